#!/usr/bin/env bash
# A/B hook for scripts/gpu.sh (GPU machine, ~3 minutes + ~1 per round): the training step of
# this tree against a baseline tree, both built here, run alternately (this, base, base, this
# per round) so that drift in the machine falls on both. Prepare the baseline here first:
#   rm -rf .ab && mkdir -p .ab/base && git archive REV | tar -x -C .ab/base
# (.ab is ignored; name it in the call's carry). AB_ROUNDS (default 1) rounds; AB_ARGS are
# bench_train_step's arguments (default: cuda-fast, TF32 and bf16, graph). Tables to stdout,
# CSVs to $OUT/ab_*.csv.
set -uo pipefail
BASE=${AB_BASE:-.ab/base}
[ -d "$BASE/src" ] || { echo "ab.sh: no baseline tree at $BASE, skipped"; exit 0; }
BIN="$BUILD/bin/bench_train_step"
[ -x "$BIN" ] || { echo "ab.sh: $BIN not built, skipped"; exit 0; }
[ -n "${GPU_CMAKE_ARGS:-}" ] || { echo "ab.sh: run it through scripts/gpu.sh (GPU_CMAKE_ARGS unset)"; exit 1; }
BASE_BUILD=${AB_BASE_BUILD:-/tmp/ab-base-build}
echo "== A/B: building the baseline's bench_train_step"
# The same configuration as this tree's build (gpu.sh), so that only the source differs.
# shellcheck disable=SC2086
cmake -S "$BASE" -B "$BASE_BUILD" $GPU_CMAKE_ARGS > "$OUT/ab_configure.log" 2>&1 ||
  { tail -20 "$OUT/ab_configure.log"; exit 1; }
cmake --build "$BASE_BUILD" -j 16 --target bench_train_step > "$OUT/ab_build.log" 2>&1 ||
  { grep -E "error|Error" "$OUT/ab_build.log" | head -20; exit 1; }
ARGS=${AB_ARGS:---backends cuda-fast --precisions tf32,bf16 --modes graph}
rc=0
n=0
for round in $(seq "${AB_ROUNDS:-1}"); do
  for side in this base base this; do
    n=$((n + 1))
    bin=$BIN; [ $side = base ] && bin="$BASE_BUILD/bin/bench_train_step"
    echo "-- run $n: $side"
    # shellcheck disable=SC2086
    timeout --foreground 300 "$bin" --config configs/ljspeech.yaml --csv "$OUT/ab_${n}_$side.csv" $ARGS 2> "$OUT/ab_run.log" > /dev/null ||
      { echo "bench_train_step exit $?"; tail -5 "$OUT/ab_run.log"; rc=1; }
    grep -E "^(backend|cpu|cuda)" "$OUT/ab_run.log"
  done
done
exit $rc
