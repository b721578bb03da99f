#!/usr/bin/env bash
# CI: `pip install .` into .venv, reusing the build/ that scripts/test.sh made (pyproject.toml's
# build-dir), then the installed package from outside the source tree: it trains a tiny model,
# synthesizes and aligns (tests/python/pip_smoke.py), and its console scripts run.
#   scripts/test_pip.sh     after scripts/setup.sh or scripts/test.sh (MONOFLOW_BUILD_DIR as theirs)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
start=$(date +%s)
.venv/bin/python -m pip install -q --no-build-isolation -C build-dir="${MONOFLOW_BUILD_DIR:-build}" .
echo "test_pip: pip install . took $(( $(date +%s) - start )) s"
cd "$(mktemp -d)"
OMP_NUM_THREADS=2 "$ROOT/.venv/bin/python" "$ROOT/tests/python/pip_smoke.py"
