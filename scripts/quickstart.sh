#!/usr/bin/env bash
# The README's main-job command: trains a small Glow-TTS on the default corpus and leaves a
# checkpoint, alignment images and a synthesized wav in runs/quickstart/.
#   scripts/quickstart.sh                          # 2,500 steps: ~3.5 minutes on two idle CPU cores
#   MONOFLOW_QUICKSTART_STEPS=5000 scripts/quickstart.sh     # train the same run further
#   MONOFLOW_QUICKSTART_MINUTES=20 scripts/quickstart.sh     # a longer time limit (busy machine)
# Steps: build if needed (scripts/setup.sh), generate the default corpus if missing
# (scripts/make_corpus.sh, with espeak-ng's word timings; ~2 minutes on two cores, with a
# progress line every 25 sentences), fill the feature cache, train configs/quickstart.yaml to
# its step target (continuing a previous quick-start run of the same config when there is one;
# one without a checkpoint, or of another config, is moved aside into
# runs/quickstart/previous-<time>/), synthesize a sentence with the newest checkpoint.
# The step target is what fits the stated time: 2,500 steps at the ~12 steps/s of two idle CPU
# cores (8-9 before the CPU dropout of 87bf0c7; docs/benchmarks.md "Training runs"), ~20 s on a GPU; it is also
# where the blank model aligns best (README, "Alignments"). The time limit only stops a run on a
# machine that is busier than that, with a checkpoint.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${MONOFLOW_BUILD_DIR:-$ROOT/build}
CORPUS=data/monoflow-corpus
RUN=runs/quickstart
CONFIG=configs/quickstart.yaml
SENTENCE=${MONOFLOW_QUICKSTART_TEXT:-"The morning train left the station exactly on time."}
STEPS=${MONOFLOW_QUICKSTART_STEPS:-2500}
MINUTES=${MONOFLOW_QUICKSTART_MINUTES:-10}
[[ "$STEPS" =~ ^[1-9][0-9]*$ ]] || { echo "quickstart: MONOFLOW_QUICKSTART_STEPS must be a whole number >= 1, got '$STEPS'" >&2; exit 2; }
echo "quickstart: $STEPS training steps (~3.5 minutes on two idle CPU cores, ~20 s on a GPU; stopped with a" \
     "checkpoint after $MINUTES minutes at most), after a first build and corpus render if needed"

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
echo "quickstart: computing the corpus's mel spectrograms into $RUN/cache"
"$BUILD/bin/preprocess" --config "$CONFIG" --dataset-dir "$CORPUS" --cache-dir "$RUN/cache" >/dev/null

# The resolved config without its step target: a previous run continues only under the same one.
resolved() { grep -v '^ *max_steps:' "$@"; }
resume=()
if ls "$RUN"/checkpoints/ckpt_*.pt >/dev/null 2>&1; then
  if [ -s "$RUN/config.yaml" ] &&
     ! diff -q <(resolved "$RUN/config.yaml") \
               <("$BUILD/bin/train" --config "$CONFIG" --run-dir "$RUN" --dry-run | resolved) >/dev/null; then
    resume=(--force-new)
    echo "quickstart: the previous quick-start run in $RUN used another config; starting a new one"
  else
    resume=(--resume)
    last=$(ls "$RUN"/checkpoints/ckpt_*.pt | tail -1)
    last_step=$(basename "$last" .pt); last_step=$((10#${last_step#ckpt_}))
    if ((last_step >= STEPS)); then
      echo "quickstart: the previous quick-start run already reached step $last_step" \
           "(MONOFLOW_QUICKSTART_STEPS=$((STEPS * 2)) trains it further)"
    else
      echo "quickstart: continuing the previous quick-start run in $RUN from step $last_step"
    fi
  fi
elif [ -s "$RUN/metrics.jsonl" ]; then
  # A run stopped before its first checkpoint: nothing to continue; train keeps it in previous-*/.
  resume=(--force-new)
  echo "quickstart: the previous quick-start run left no checkpoint; starting a new one"
fi
echo "quickstart: training $CONFIG to step $STEPS, for $MINUTES minutes at most (Ctrl-C stops it with a checkpoint)"
rc=0
"$BUILD/bin/train" --config "$CONFIG" --run-dir "$RUN" --max-steps "$STEPS" --max-minutes "$MINUTES" \
  "${resume[@]}" || rc=$?
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
