#!/usr/bin/env bash
# Inference benchmark hook for scripts/gpu.sh (GPU machine, well under a minute): bench_inference
# (docs/design.md, "Benchmark specifications: Inference"), TF32 and bf16: CSV to
# $OUT/inference.csv, table to stdout. Then the same sentence as a batch of 16 (synthesize
# --text-file's default batch), TF32: $OUT/inference_batch16.csv.
set -uo pipefail
BIN="$BUILD/bin/bench_inference"
[ -x "$BIN" ] || { echo "infer.sh: $BIN not built, skipped"; exit 0; }
echo "== inference benchmark (100 symbols -> ~1800 frames, median of 20 calls)"
timeout --foreground "${INFER_TIMEOUT:-180}" "$BIN" --config configs/ljspeech.yaml --csv "$OUT/inference.csv" \
  > /dev/null 2> "$OUT/inference.log"
rc=$?
grep -E "^(prec|tf32|bf16|fp32)" "$OUT/inference.log" || tail -5 "$OUT/inference.log"
echo "== the same, 16 at once (batch 16, TF32)"
timeout --foreground "${INFER_TIMEOUT:-180}" "$BIN" --config configs/ljspeech.yaml --batch 16 --precisions tf32 \
  --csv "$OUT/inference_batch16.csv" > /dev/null 2> "$OUT/inference_batch16.log" || rc=1
grep -E "^(prec|tf32)" "$OUT/inference_batch16.log" || tail -5 "$OUT/inference_batch16.log"
exit $rc
