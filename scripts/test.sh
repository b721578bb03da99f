#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, and runs every test suite.
# CUDA suites skip themselves on machines without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."

# Test-only packages: serve's browser test (tests/serve/test_page.py) drives headless Chromium
# through Selenium (Debian's, in the system Python). Not in setup.sh: a user who only builds
# and trains needs no browser.
source scripts/lib/apt.sh
apt_install_missing "test (the browser test)" chromium chromium-driver python3-selenium

scripts/setup.sh
ctest --test-dir "${MONOFLOW_BUILD_DIR:-build}" --output-on-failure -j "$(nproc)"
