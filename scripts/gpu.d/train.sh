#!/usr/bin/env bash
# Training-step benchmark hook for scripts/gpu.sh (runs on the GPU machine, typically 2-3 minutes, at most ~4):
#  1. bench_train_step (docs/design.md, "Benchmark specifications: Training step") for every
#     available MAS backend in tf32 and bf16: CSV to $OUT/train_step.csv, table to stdout.
#  2. When the default corpus was carried along (data/monoflow-corpus), a short training run of
#     the ljspeech.yaml model on it with --compare-align (all backends on each step's logp):
#     loss curve, per-backend MAS times and alignment images to $OUT/train_run/.
# The shortened schedule (warm-up 400 instead of 4000) scales learning_rate by sqrt(400/4000) so
# the peak rate stays the official 1.1e-3: with 1.0 it peaks 3x higher, and on the H100 such a run
# (bf16) diverged at the peak, step ~400 (2026-11-22).
# TRAIN_STEP_ARGS passes extra arguments to bench_train_step; TRAIN_RUN_MINUTES
# (default 1) bounds part 2; TRAIN_RUN=0 skips it; TRAIN_BENCH_TIMEOUT (300 s) bounds part 1.
set -uo pipefail
BIN="$BUILD/bin/bench_train_step"
[ -x "$BIN" ] || { echo "train.sh: $BIN not built, skipped"; exit 0; }
echo "== training step benchmark (B=32, ljspeech.yaml model, median of 30 steps)"
timeout --foreground "${TRAIN_BENCH_TIMEOUT:-300}" "$BIN" --config configs/ljspeech.yaml --csv "$OUT/train_step.csv" \
  ${TRAIN_STEP_ARGS:-} > "$OUT/train_step.txt" 2> "$OUT/train_step.log"
rc=$?
grep -E "^(backend|cpu|cuda)" "$OUT/train_step.log" || tail -5 "$OUT/train_step.log"
[ $rc -eq 0 ] || echo "bench_train_step exit $rc"

CORPUS=data/monoflow-corpus
if [ "${TRAIN_RUN:-1}" != "0" ] && [ -s "$CORPUS/metadata.csv" ] && [ -x "$BUILD/bin/train" ]; then
  echo "== short training run: ljspeech.yaml model on $CORPUS, cuda backend, --compare-align"
  RUN=$OUT/train_run
  rm -rf "$RUN"
  timeout --foreground 110 "$BUILD/bin/train" --config configs/ljspeech.yaml --run-dir "$RUN" --align-backend cuda --compare-align \
    --max-minutes "${TRAIN_RUN_MINUTES:-1}" --set data.dataset_dir=$CORPUS --set data.validation_size=8 \
    --set train.warmup_steps=400 --set train.learning_rate=0.316 --set train.log_interval=10 --set train.val_interval=100 \
    --set train.checkpoint_interval=100000 --set train.keep_checkpoints=1 --set data.cache_dir=$OUT/train_cache --set 'data.cmudict_path=""' \
    > "$RUN.log" 2>&1
  trc=$?
  rm -rf "$OUT/train_cache" "$RUN"/checkpoints  # keep the transfer small
  tail -3 "$RUN.log"
  [ -s "$RUN/metrics.jsonl" ] && python3 - "$RUN/metrics.jsonl" <<'PY' || true
import json, sys, statistics as st
rows = [json.loads(l) for l in open(sys.argv[1])]
train = [r for r in rows if "loss/mle" in r]
val = [r for r in rows if "val/loss/mle" in r]
print("step  mle     dur     step_ms  mas_ms cpu / cuda / cuda-fast")
for r in train[:: max(1, len(train) // 12)] + train[-1:]:
    mas = " / ".join("%.2f" % r.get("time/mas_ms/" + b, float("nan")) for b in ("cpu", "cuda", "cuda-fast"))
    print("%5d %7.4f %7.4f %8.1f  %s" % (r["step"], r["loss/mle"], r["loss/dur"], r["time/step_ms"], mas))
for b in ("cpu", "cuda", "cuda-fast"):
    v = [r["time/mas_ms/" + b] for r in train if r.get("time/mas_ms/" + b) is not None]
    if v: print("MAS %-9s median %.2f ms over %d logged steps" % (b, st.median(v), len(v)))
for r in val: print("validation step %d: mle %.4f dur %.4f" % (r["step"], r["val/loss/mle"], r["val/loss/dur"]))
PY
  [ $trc -eq 0 ] || echo "train exit $trc"
fi
exit $rc
