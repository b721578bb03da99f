#!/usr/bin/env bash
# The README's main-job command: trains a small Glow-TTS on the default corpus and leaves a
# checkpoint, alignment images and a synthesized wav in runs/quickstart/.
#   scripts/quickstart.sh                 # a few minutes on a CPU, longer on a GPU
#   MONOFLOW_QUICKSTART_MINUTES=20 scripts/quickstart.sh
# Steps: build if needed (scripts/setup.sh), generate the default corpus if missing
# (scripts/make_corpus.sh, with espeak-ng's word timings), fill the feature cache, train
# configs/quickstart.yaml (continuing a previous quick-start run when there is one; one without a
# checkpoint is moved aside into runs/quickstart/previous-<time>/), synthesize a sentence with
# the newest checkpoint.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${MONOFLOW_BUILD_DIR:-$ROOT/build}
CORPUS=data/monoflow-corpus
RUN=runs/quickstart
CONFIG=configs/quickstart.yaml
SENTENCE=${MONOFLOW_QUICKSTART_TEXT:-"The morning train left the station exactly on time."}
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  MINUTES=${MONOFLOW_QUICKSTART_MINUTES:-20}
else
  MINUTES=${MONOFLOW_QUICKSTART_MINUTES:-8}
fi

for tool in train synthesize preprocess speak; do
  if [ ! -x "$BUILD/bin/$tool" ]; then
    echo "quickstart: building monoflow (scripts/setup.sh)"
    MONOFLOW_BUILD_DIR="$BUILD" scripts/setup.sh
    break
  fi
done
# After the build: the corpus is rendered by build/bin/speak (wavs and their word timings).
if [ ! -s "$CORPUS/metadata.csv" ] || [ ! -d "$CORPUS/words" ]; then
  echo "quickstart: generating the default corpus into $CORPUS"
  MONOFLOW_BUILD_DIR="$BUILD" scripts/make_corpus.sh "$CORPUS"
fi

mkdir -p "$RUN"
"$BUILD/bin/preprocess" --config "$CONFIG" --dataset-dir "$CORPUS" --cache-dir "$RUN/cache" >/dev/null

resume=()
if ls "$RUN"/checkpoints/ckpt_*.pt >/dev/null 2>&1; then
  resume=(--resume)
  echo "quickstart: continuing the previous quick-start run in $RUN"
elif [ -s "$RUN/metrics.jsonl" ]; then
  # A run stopped before its first checkpoint: nothing to continue; train keeps it in previous-*/.
  resume=(--force-new)
  echo "quickstart: the previous quick-start run left no checkpoint; starting a new one"
fi
echo "quickstart: training $CONFIG for up to $MINUTES minutes (Ctrl-C stops it with a checkpoint)"
rc=0
"$BUILD/bin/train" --config "$CONFIG" --run-dir "$RUN" --max-minutes "$MINUTES" "${resume[@]}" || rc=$?
# 130 (Ctrl-C) and 143 (SIGTERM): stopped early with a checkpoint; synthesize with it anyway.
if [ "$rc" -ne 0 ] && [ "$rc" -ne 130 ] && [ "$rc" -ne 143 ]; then exit "$rc"; fi

ckpt=$(ls "$RUN"/checkpoints/ckpt_*.pt | tail -1)
"$BUILD/bin/synthesize" --checkpoint "$ckpt" --text "$SENTENCE" --out "$RUN/quickstart.wav" \
  --mel-png "$RUN/quickstart_mel.png" --align-png "$RUN/quickstart_align.png"

echo
echo "quickstart: done"
echo "  checkpoint:        $ckpt"
val_align=$(ls "$RUN"/images/val_align_0*.png 2>/dev/null | tail -1)
echo "  alignment images:  ${val_align:-(none)} (validation utterance, MAS path), $RUN/quickstart_align.png (synthesis)"
echo "                     all of them: $RUN/images/"
echo "  synthesized audio: $RUN/quickstart.wav  (Griffin-Lim; text: \"$SENTENCE\")"
echo "  TensorBoard:       $ROOT/.venv/bin/tensorboard --logdir $RUN/tensorboard"
echo "  metrics:           $RUN/metrics.jsonl"
