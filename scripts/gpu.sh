#!/usr/bin/env bash
# Run ON THE GPU MACHINE, in one device call:
#   [TARGETS="a b"] [CTEST_REGEX=re] [CTEST_TIMEOUT=s] [TESTS=0] [HOOKS="mas train"] scripts/gpu.sh   builds with CUDA against the machine's torch, runs the CUDA test
#                            suites and the benchmarks, and prints a short table last.
# Prepare here first with scripts/gpu-deps.sh; the call carries .deps/root. Results go to $OUT.
# The hooks run their binaries under `timeout --foreground`, which keeps them in this call's
# process group, so that a timeout around the whole call (`timeout 570 bash scripts/gpu.sh`) stops
# them too: under a plain `timeout`, in a group of its own, a binary outlived its call and ran on
# beside the next call's work on the same machine. Three keep a plain `timeout`, because what they
# time has children of its own that it must stop: cpu_infer.sh's rounds script, racecheck.sh's
# compute-sanitizer and nccl.sh's launcher; a call cut while they run can leave those running.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu-out}; mkdir -p "$OUT"
DEPS=$ROOT/.deps/root
export LD_LIBRARY_PATH="$DEPS/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
BUILD=$ROOT/build-gpu
# cpp-httplib (serve) from .deps/root through pkg-config; pytest for the Python tests from the
# wheels in .deps/wheels: the GPU machine reaches no package registry (scripts/gpu-deps.sh).
export PKG_CONFIG_PATH="$DEPS/usr/lib/x86_64-linux-gnu/pkgconfig:${PKG_CONFIG_PATH:-}"
if ! python3 -c "import pytest" 2>/dev/null && [ -d "$ROOT/.deps/wheels" ]; then
  python3 -m pip install -q --no-index --find-links "$ROOT/.deps/wheels" pytest 2>/dev/null ||
    python3 -m pip install -q --user --break-system-packages --no-index --find-links "$ROOT/.deps/wheels" pytest
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"

# The configure arguments, exported for hooks that build another tree the same way (gpu.d/ab.sh).
# Word-split where used: the paths in it have no spaces on the GPU machine.
export GPU_CMAKE_ARGS="-G Ninja -DCMAKE_BUILD_TYPE=Release -DMONOFLOW_PYTHON=$(command -v python3) \
-DMONOFLOW_DEPS_PREFIX=$DEPS -DMONOFLOW_WITH_ESPEAK=OFF -DCMAKE_CUDA_ARCHITECTURES=90"
# shellcheck disable=SC2086
cmake -S . -B "$BUILD" $GPU_CMAKE_ARGS > "$OUT/configure.log" 2>&1 || { tail -40 "$OUT/configure.log"; exit 1; }
grep "monoflow:" "$OUT/configure.log"
cmake --build "$BUILD" -j 16 ${TARGETS:+--target $TARGETS} > "$OUT/build.log" 2>&1 || { grep -E "error|Error" "$OUT/build.log" | head -40; exit 1; }
echo "build: ok"

# CUDA suites (and everything else) on the GPU; TESTS=0 skips them.
rc=0
if [ "${TESTS:-1}" != "0" ]; then
  ctest --test-dir "$BUILD" --output-on-failure -j 4 --timeout "${CTEST_TIMEOUT:-900}" ${CTEST_REGEX:+-R "$CTEST_REGEX"} > "$OUT/ctest.log" 2>&1; rc=$?
  grep -E "Failed|\*\*\*|tests passed|tests failed|Total Test time" "$OUT/ctest.log" | tail -16
fi

# Benchmarks: each hook writes CSV to $OUT and prints its table. HOOKS="mas train" picks hooks;
# HOOKS=none runs none; unset, every hook in scripts/gpu.d runs (several minutes of device time).
for bench in "$ROOT"/scripts/gpu.d/*.sh; do
  name=$(basename "$bench" .sh)
  if [ -n "${HOOKS:-}" ] && [[ " $HOOKS " != *" $name "* ]]; then continue; fi
  BUILD="$BUILD" OUT="$OUT" bash "$bench" "$@" || rc=1
done
[ "${TESTS:-1}" != "0" ] && echo "== tests: $(grep -E 'tests passed|tests failed' "$OUT/ctest.log" | tail -1)"
exit $rc
