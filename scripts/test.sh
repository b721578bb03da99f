#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, and runs every test suite.
# CUDA suites skip themselves on machines without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
ctest --test-dir "${MONOFLOW_BUILD_DIR:-build}" --output-on-failure -j "$(nproc)"
