#!/usr/bin/env bash
# MAS benchmark hook for scripts/gpu.sh (runs on the GPU machine): the MAS grid of
# docs/design.md ("Benchmark specifications: MAS grid") for every available backend;
# CSV to $OUT/mas.csv, table to stdout.
# BENCH_MAS_ARGS passes extra arguments (e.g. "--quick" or "--backends cuda,cuda-fast").
set -uo pipefail
BIN="$BUILD/bin/bench_mas"
[ -x "$BIN" ] || { echo "mas.sh: $BIN not built, skipped"; exit 0; }
echo "== MAS benchmark"
timeout "${BENCH_TIMEOUT:-480}" "$BIN" --csv "$OUT/mas.csv" ${BENCH_MAS_ARGS:-} > "$OUT/mas.txt" 2> "$OUT/mas.log"
rc=$?
sed -n '/^backend /,/^$/p' "$OUT/mas.txt"
[ $rc -eq 0 ] || { echo "bench_mas exit $rc"; tail -5 "$OUT/mas.log"; }
exit $rc
