#!/usr/bin/env bash
# Alignment-accuracy hook for scripts/gpu.sh (GPU machine; ALIGN_TRAIN_MINUTES + ~2 minutes):
# needs the default corpus carried along with its word timings (data/monoflow-corpus/words,
# written here by scripts/make_corpus.sh: the GPU build has no espeak-ng).
#  1. trains ALIGN_CONFIG (configs/quickstart.yaml) on it for ALIGN_TRAIN_MINUTES (8) on the GPU;
#  2. aligns every utterance with the last checkpoint, batched on the GPU (cuda-fast MAS) and on
#     the CPU (cpu MAS), timing both, and counts utterances whose durations differ;
#  3. scores both against espeak-ng's word timings (scripts/score_alignment.py).
# Everything lands in $OUT/align/ (TextGrids and durations of the GPU run, scores as JSON).
# ALIGN_RUN_DIR continues an earlier run there instead of a fresh one in $OUT/align/run.
# ALIGN_SET adds `--set` overrides to the training run, e.g. "data.add_blank=true" or
# "data.cmudict_path=data/cmudict/cmudict.dict data.add_blank=true" (the token choices that
# users' tools issue asks to measure; align reads them back from the checkpoint's config).
# ALIGN_SCORE_ALL=1 also aligns (cuda) and scores every kept checkpoint, one line each: how
# accuracy moves with training length (pair it with train.keep_checkpoints in ALIGN_SET).
set -uo pipefail
CORPUS=data/monoflow-corpus
[ -x "$BUILD/bin/align" ] && [ -x "$BUILD/bin/train" ] || { echo "align.sh: align/train not built, skipped"; exit 0; }
[ -d "$CORPUS/words" ] || { echo "align.sh: $CORPUS/words missing (carry the corpus made by scripts/make_corpus.sh), skipped"; exit 0; }
A=$OUT/align
mkdir -p "$A"
RUN=${ALIGN_RUN_DIR:-$A/run}
CONFIG=${ALIGN_CONFIG:-configs/quickstart.yaml}
MINUTES=${ALIGN_TRAIN_MINUTES:-8}
echo "== alignment accuracy: $CONFIG ${ALIGN_SET:-} on $CORPUS, $MINUTES minutes of training on the GPU"
overrides=()
for kv in ${ALIGN_SET:-}; do overrides+=(--set "$kv"); done
resume=()
ls "$RUN"/checkpoints/ckpt_*.pt > /dev/null 2>&1 && resume=(--resume)
timeout --foreground $((MINUTES * 60 + 120)) "$BUILD/bin/train" --config "$CONFIG" --run-dir "$RUN" --max-minutes "$MINUTES" \
  --set data.dataset_dir=$CORPUS --set data.cache_dir=$A/cache "${overrides[@]}" "${resume[@]}" > "$A/train.log" 2>&1
echo "train exit $?: $(grep -E '^done' "$A/train.log" | tail -1)"
ckpt=$(ls "$RUN"/checkpoints/ckpt_*.pt 2>/dev/null | tail -1)
[ -n "$ckpt" ] || { tail -5 "$A/train.log"; exit 1; }
rc=0
if [ "${ALIGN_SCORE_ALL:-0}" = 1 ]; then
  echo "step,median_abs_ms,median_signed_ms,within_10,within_25,within_50"
  for c in $(ls "$RUN"/checkpoints/ckpt_*.pt | sort -V); do
    step=$(basename "$c" .pt); step=$((10#${step#ckpt_}))
    "$BUILD/bin/align" --checkpoint "$c" --dataset-dir "$CORPUS" --out "$A/at_$step" --device cuda \
      --batch-size 32 --cache-dir "$A/cache" -q > "$A/align_at_$step.log" 2>&1 || { tail -3 "$A/align_at_$step.log"; continue; }
    python3 scripts/score_alignment.py --textgrids "$A/at_$step/textgrids" --reference "$CORPUS/words" --row "$step"
    rm -rf "$A/at_$step"
  done | tee "$A/by_step.csv"
fi
for device in cuda cpu; do
  rm -rf "$A/$device"
  start=$(date +%s%N)
  "$BUILD/bin/align" --checkpoint "$ckpt" --dataset-dir "$CORPUS" --out "$A/$device" --device $device \
    --batch-size 32 --cache-dir "$A/cache" -q > "$A/align_$device.log" 2>&1 || { tail -3 "$A/align_$device.log"; rc=1; continue; }
  ms=$((($(date +%s%N) - start) / 1000000))
  printf '%s: %s (%d.%03d s wall)\n' "$device" "$(grep '^align:' "$A/align_$device.log")" $((ms / 1000)) $((ms % 1000))
  python3 scripts/score_alignment.py --textgrids "$A/$device/textgrids" --reference "$CORPUS/words" \
    --json "$A/scores_$device.json" || rc=1
done
if [ -d "$A/cuda/durations" ] && [ -d "$A/cpu/durations" ]; then
  differ=0
  for f in "$A"/cuda/durations/*.npy; do cmp -s "$f" "$A/cpu/durations/$(basename "$f")" || differ=$((differ + 1)); done
  echo "durations: $differ of $(ls "$A"/cuda/durations/*.npy | wc -l) utterances differ between the cuda and the cpu run"
fi
rm -rf "$A/cache" "$A/cpu" "$RUN"/checkpoints/ckpt_*.pt.tmp*  # keep the transfer small
exit $rc
