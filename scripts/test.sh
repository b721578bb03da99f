#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, and runs every test suite.
# CUDA suites skip themselves on machines without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."

# Test-only packages: serve's browser test (tests/serve/test_page.py) drives headless Chromium
# through Selenium (Debian's, in the system Python). Not in setup.sh: a user who only builds
# and trains needs no browser.
TEST_APT_PACKAGES=(chromium chromium-driver python3-selenium)
missing=()
for p in "${TEST_APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "test: installing apt packages for the browser test: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

scripts/setup.sh
ctest --test-dir "${MONOFLOW_BUILD_DIR:-build}" --output-on-failure -j "$(nproc)"
