#!/usr/bin/env bash
# MAS benchmark hook for scripts/gpu.sh (runs on the GPU machine): the MAS grid of
# docs/design.md ("Benchmark specifications: MAS grid") for every available backend;
# CSV to $OUT/mas.csv, table to stdout. Then, where it was built, the kernel harness
# (dev/cuda/mas_fast.cu: every cuda-fast version, v1-v4, at the training batch with K = 2, 4
# and 8, against its CPU reference) to $OUT/mas_fast_dev.txt.
# BENCH_MAS_ARGS passes extra arguments (e.g. "--quick" or "--backends cuda,cuda-fast").
set -uo pipefail
BIN="$BUILD/bin/bench_mas"
[ -x "$BIN" ] || { echo "mas.sh: $BIN not built, skipped"; exit 0; }
echo "== MAS benchmark"
timeout --foreground "${BENCH_TIMEOUT:-480}" "$BIN" --csv "$OUT/mas.csv" ${BENCH_MAS_ARGS:-} > "$OUT/mas.txt" 2> "$OUT/mas.log"
rc=$?
sed -n '/^backend /,/^$/p' "$OUT/mas.txt"
[ $rc -eq 0 ] || { echo "bench_mas exit $rc"; tail -5 "$OUT/mas.log"; }
DEV="$BUILD/bin/mas_fast_dev"
if [ -x "$DEV" ]; then
  echo "== cuda-fast versions (mas_fast_dev, training batch)"
  timeout --foreground 300 "$DEV" --check --k 2,4,8 > "$OUT/mas_fast_dev.txt" 2>&1 || { echo "mas_fast_dev exit $?"; rc=1; }
  grep -E "^(shape|variant|v[0-9])" "$OUT/mas_fast_dev.txt"
fi
exit $rc
