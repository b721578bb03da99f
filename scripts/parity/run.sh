#!/usr/bin/env bash
# The parity benchmark, on the GPU machine (scripts/gpu.d/parity.sh calls it after the build; the
# README of this folder says what is measured and how to prepare it):
#   BUILD=build-gpu OUT=out PARITY=.parity CORPORA="default flite" SEEDS="1 2 3" STEPS=2000 \
#     SAVE_EVERY=250 SIDES="official-tf32 monoflow-bf16 monoflow-tf32" bash scripts/parity/run.sh
# PARITY holds what scripts/parity/prepare.sh made: glow-tts/ (the official source), wheels/,
# corpora/<name>/ (metadata.csv, words/, audio). The work goes to WORK (.parity-work: runs,
# evaluations, alignments), outside $OUT so that a later call on the same machine goes on where a
# call that ran out of time stopped: a finished run, evaluation or alignment is not done again.
# The report goes to $OUT/parity_report.md and is printed last.
# On a machine without a GPU everything runs on the CPU, one run at a time, in float32 on both
# sides: SIDES="official-fp32 monoflow-fp32" (the equal-wall-clock table then measures against
# monoflow-fp32: DEFAULT_SIDE), PYTHON naming a Python with torch, numpy and Cython.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD=${BUILD:-$ROOT/build-gpu}
OUT=${OUT:-$ROOT/gpu-out}
PARITY=$(realpath "${PARITY:-$ROOT/.parity}")
CORPORA=${CORPORA:-default flite}
SEEDS=${SEEDS:-1 2 3}
STEPS=${STEPS:-2000}
SAVE_EVERY=${SAVE_EVERY:-250}
SIDES=${SIDES-official-tf32 monoflow-bf16 monoflow-tf32}  # empty: no parity runs (the recipe alone)
CONFIG_YAML=${CONFIG_YAML:-configs/quickstart.yaml}
CONFIG_JSON=${CONFIG_JSON:-scripts/parity/quickstart.json}
# More monoflow settings for every tool (--set words), to match CONFIG_JSON: the ljspeech.yaml-size
# pair runs CONFIG_YAML=configs/ljspeech.yaml CONFIG_JSON=scripts/parity/ljspeech.json
# PARITY_SETS='--set data.cmudict_path=""' (neither side looks words up in CMUdict).
PARITY_SETS=${PARITY_SETS:-}
PY=${PYTHON:-python3}
# Runs go one per GPU, as many at once as the machine has GPUs (each run uses one).
# PARITY_GPUS above the count shares the GPUs round robin (no timings then, only accuracy).
GPUS_FOUND=$(nvidia-smi -L 2>/dev/null | wc -l)
GPU_COUNT=$((GPUS_FOUND > 0 ? GPUS_FOUND : 1))
GPUS=${PARITY_GPUS:-$GPU_COUNT}
# Where both trainers and the judge run: the GPU where there is one, else the CPU.
if ((GPUS_FOUND > 0)); then DEVICE=cuda:0; else DEVICE=cpu; fi
DEVICE=${PARITY_DEVICE:-$DEVICE}
# The side the equal-wall-clock table measures against (report.py --default-side).
DEFAULT_SIDE=${DEFAULT_SIDE:-$([ "$DEVICE" = cpu ] && echo monoflow-fp32 || echo monoflow-bf16)}
# The official trainer's data-loading processes (its own default 4, the official recipe's 8); on
# a CPU they take cores from training, so one.
OFFICIAL_WORKERS=${OFFICIAL_WORKERS:-$([ "$DEVICE" = cpu ] && echo 1 || echo 4)}
# The alignment recipe (README's): RECIPE_CONFIG once per seed of RECIPE_SEEDS and variant of
# RECIPE_VARIANTS (below) on each corpus,
# each run until its max_steps or RECIPE_MINUTES, then align with its defaults given every run's
# last checkpoint; RECIPE_MINUTES=0 skips it. (Before 2026-12-04 the recipe was one run of
# configs/ljspeech_blank.yaml: RECIPE_CONFIG=configs/ljspeech_blank.yaml RECIPE_SEEDS=1234.)
RECIPE_CONFIG=${RECIPE_CONFIG:-configs/aligner.yaml}
RECIPE_SEEDS=${RECIPE_SEEDS:-1 2 3}
RECIPE_MINUTES=${RECIPE_MINUTES:-0}
RECIPE_SAVE_EVERY=${RECIPE_SAVE_EVERY:-}  # steps between scored checkpoints (empty: the last alone)
RECIPE_CORPORA=${RECIPE_CORPORA-$CORPORA}  # the recipe's corpora, when they differ from the parity runs'
# Another shape of the recipe, for trying one on every voice: more train settings (--set words,
# e.g. "--set data.win_length=512") and more align arguments (e.g. "--junction middle"). Give such
# a try its own WORK, since a finished recipe is not run again.
RECIPE_SETS=${RECIPE_SETS:-}
RECIPE_ALIGN=${RECIPE_ALIGN:-}
# The runs together scored a second time with these align arguments added (e.g. "--junction
# middle"; not an option RECIPE_ALIGN already gives: align takes each once), into
# recipe/<corpus>/final-compare: two rules on the same checkpoints, also for a finished recipe.
RECIPE_COMPARE=${RECIPE_COMPARE:-}
# Runs of several shapes together: RECIPE_VARIANTS lists train settings separated by ';', each
# trained once per seed (the first as run-s<seed>, the k-th after it as run-v<k>-s<seed>), and
# align combines them all. Unset: README's recipe, the config's frames and 5.8 ms frames; empty
# (RECIPE_VARIANTS=""): the config's frames alone (the recipe before 2026-12-05's 75606b3).
RECIPE_VARIANTS=${RECIPE_VARIANTS-;--set data.hop_length=128 --set data.max_mel_frames=2400}
# Recipe runs trained at once (0: all of them): as README says, all at once with one thread each
# on a CPU, one after another on a GPU. A run's result does not depend on what runs beside it.
if ((GPUS_FOUND > 0)); then
  RECIPE_AT_ONCE=${RECIPE_AT_ONCE:-1} RECIPE_THREADS=""
else
  RECIPE_AT_ONCE=${RECIPE_AT_ONCE:-0} RECIPE_THREADS="--set run.threads=1"
fi
WORK=$(realpath -m "${WORK:-$ROOT/.parity-work}")
mkdir -p "$WORK" "$OUT"
OFFICIAL=$WORK/glow-tts
BIN=$BUILD/bin

# The official code and the Python packages it imports that this machine lacks.
[ -f "$OFFICIAL/train.py" ] || cp -r "$PARITY/glow-tts" "$OFFICIAL"
export PYTHONPATH="$WORK/pylib:${PYTHONPATH:-}"
# Its Cython MAS only where a parity run is judged in the official model (SIDES not empty).
CYTHON=$([ -n "$SIDES" ] && echo 1 || echo 0) bash scripts/parity/python_deps.sh "$PY" "$PARITY/wheels" "$WORK/pylib" || exit 1
# The MAS, built in place where monotonic_align/__init__.py imports it from.
[ -z "$SIDES" ] || [ -n "$(ls "$OFFICIAL"/monotonic_align/monotonic_align/core*.so 2>/dev/null)" ] || (cd "$OFFICIAL/monotonic_align" && mkdir -p monotonic_align && "$PY" -m cython -3 core.pyx -o core.c &&
  gcc -O3 -shared -fPIC $("$PY" -c "import sysconfig; print('-I' + sysconfig.get_paths()['include'])") \
    -I"$("$PY" -c 'import numpy; print(numpy.get_include())')" core.c \
    -o "monotonic_align/core$("$PY" -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")") \
  || { echo "parity: building the official MAS failed"; exit 1; }

run_monoflow() {  # corpus precision seed dir
  local corpus=$1 precision=$2 seed=$3 dir=$4 fp16=true
  [ "$precision" = bf16 ] || fp16=false
  local on_cpu=()
  [ "$DEVICE" = cpu ] && on_cpu=(--set run.device=cpu)
  "$BIN/train" --config "$CONFIG_YAML" --run-dir "$dir" $(data_sets "$corpus") --set train.seed="$seed" "${on_cpu[@]}" \
    --set train.max_steps="$STEPS" --set train.checkpoint_interval="$SAVE_EVERY" --set train.keep_checkpoints=1000 \
    --set train.val_interval=$((STEPS * 10)) --set train.fp16_run=$fp16 --set train.allow_tf32=true \
    --set run.tensorboard=false > "$dir.log" 2>&1
}


data_sets() {  # the data settings both monoflow tools take for a corpus, as --set arguments
  local data=$WORK/data/$1
  echo "--set data.dataset_dir=$PARITY/corpora/$1 --set data.training_files=$data/train.txt --set data.validation_files=$data/val.txt"
  echo "--set data.add_blank=true --set data.cache_dir=$data/cache $PARITY_SETS"
}

prepare_corpus() {  # corpus: split, features, official filelists and config, front-end check
  local corpus=$1 src=$PARITY/corpora/$1 data=$WORK/data/$1
  mkdir -p "$data"
  # The same split for both trainers: every tenth utterance (by id) validates.
  sort "$src/metadata.csv" | awk -F'|' -v train="$data/train.txt" -v val="$data/val.txt" \
    '{ line = "wavs/" $1 ".flac|" $2; if (NR % 10 == 0) print line > val; else print line > train }'
  cat "$data/train.txt" "$data/val.txt" > "$data/all.txt"
  # monoflow's features and tokens; the official reads the same mels from .npy.
  "$BIN/preprocess" --config "$CONFIG_YAML" $(data_sets "$corpus") --npy-out "$data/npy" > "$data/preprocess.log" 2>&1 \
    || { tail -5 "$data/preprocess.log"; return 1; }
  for split in train val; do
    sed -E "s#^[^|]*/([^/|]+)\.flac\|#$data/npy/\1.npy|#" "$data/$split.txt" > "$data/official_$split.txt"
  done
  "$PY" -c 'import json, sys
c = json.load(open(sys.argv[1]))
c["data"]["training_files"] = sys.argv[2] + "/official_train.txt"
c["data"]["validation_files"] = sys.argv[2] + "/official_val.txt"
json.dump(c, sys.stdout, indent=1)' "$CONFIG_JSON" "$data" > "$data/official.json"
  # Utterances whose tokens differ between the front-ends leave both sides' lists (named in the
  # report), then the check must find none.
  "$PY" scripts/parity/check_frontend.py --official "$OFFICIAL" --config "$data/official.json" \
    --tokens "$data/npy/tokens.tsv" --differ-out "$data/left_out.txt" "$data/official_train.txt" \
    "$data/official_val.txt" > "$data/frontend_first.txt"
  cat "$data/frontend_first.txt"
  # A few texts the two cleaners read differently are left out; most of them differing means the
  # settings differ (PARITY_SETS changing monoflow's tokens, CMUdict say), and leaving them out
  # would train on what is left.
  local differ=0 total
  total=$(wc -l < "$data/all.txt")
  [ -f "$data/left_out.txt" ] && differ=$(wc -l < "$data/left_out.txt")
  if ((differ * 2 > total)); then
    echo "parity: $corpus: the front-ends give other tokens for $differ of $total utterances; both sides" \
      "must read the same tokens (PARITY_SETS: '$PARITY_SETS'; scripts/parity/README.md)" >&2
    return 1
  fi
  if [ -s "$data/left_out.txt" ]; then
    local f
    for f in train val all official_train official_val; do
      grep -v -F -f <(sed 's#.*#/&.#' "$data/left_out.txt") "$data/$f.txt" > "$data/$f.tmp" && mv "$data/$f.tmp" "$data/$f.txt"
    done
  fi
  "$PY" scripts/parity/check_frontend.py --official "$OFFICIAL" --config "$data/official.json" \
    --tokens "$data/npy/tokens.tsv" "$data/official_train.txt" "$data/official_val.txt" > "$data/frontend.txt"
  local rc=$?
  cat "$data/frontend.txt"
  return $rc
}

train_run() {  # corpus side seed: one training run, unless it finished before
  local corpus=$1 side=$2 seed=$3 name=$1/$2-s$3
  local dir=$WORK/runs/$name data=$WORK/data/$1
  [ -f "$dir.done" ] && return 0
  mkdir -p "$(dirname "$dir")"
  # An official run stopped by the end of a device call goes on from its last save (resume.pt);
  # anything else starts again.
  [[ $side == official-* && -f $dir/resume.pt ]] || rm -rf "$dir"
  local start rc
  start=$(date +%s%N)
  case $side in
    official-*) "$PY" scripts/parity/official_train.py --official "$OFFICIAL" --config "$data/official.json" \
                  --out "$dir" --seed "$seed" --steps "$STEPS" --save-every "$SAVE_EVERY" --resume \
                  --precision "${side#official-}" --device "$DEVICE" --workers "$OFFICIAL_WORKERS" >> "$dir.log" 2>&1 ;;
    monoflow-*) run_monoflow "$corpus" "${side#monoflow-}" "$seed" "$dir" ;;
  esac
  rc=$?
  echo "{\"run\": \"$name\", \"rc\": $rc, \"process_ms\": $((($(date +%s%N) - start) / 1000000))}" >> "$WORK/processes.jsonl"
  [ $rc = 0 ] || { echo "parity: $name failed (rc $rc)"; tail -5 "$dir.log"; return 1; }
  touch "$dir.done"
  echo "parity: $name done in $((($(date +%s%N) - start) / 1000000000)) s"
}

evaluate_run() {  # corpus dir: one judge for every checkpoint (monoflow's converted to the official format first)
  local corpus=$1 dir=$2 name=$1/$(basename "$2") data=$WORK/data/$1
  [ -s "$dir.evals.jsonl" ] && return 0
  local ckpts=() c o
  if [ -d "$dir/checkpoints" ]; then
    mkdir -p "$dir/official"
    for c in "$dir"/checkpoints/ckpt_*.pt; do
      o=$dir/official/$(basename "${c%.pt}").pth
      "$BIN/convert_weights" --to-official "$c" "$o" > /dev/null 2>&1 || echo "parity: convert $c failed"
      ckpts+=("$o")
    done
  else
    ckpts=("$dir"/G_*.pth)
  fi
  if "$PY" scripts/parity/evaluate.py --official "$OFFICIAL" --config "$data/official.json" --device "$DEVICE" \
       --val-list "$data/official_val.txt" --run "$name" --mel-dir "$WORK/mels" "${ckpts[@]}" \
       > "$dir.evals.tmp" 2> "$dir.eval.log"; then
    mv "$dir.evals.tmp" "$dir.evals.jsonl"
  else
    echo "parity: evaluating $name failed"; tail -3 "$dir.eval.log"
  fi
}

recipe_run() {  # corpus: RECIPE_CONFIG once per seed of RECIPE_SEEDS, then align (defaults) and score
  # Each seed's last checkpoint is scored alone, and all of them together (align's median of
  # several --checkpoint): the recipe's figure. With RECIPE_SAVE_EVERY set, every checkpoint of
  # each run is scored too (how accuracy grows with training). A run that fails is named and left
  # out, the others are still scored, and final/seeds.txt says which runs "together" holds; the
  # recipe then counts as unfinished (no <corpus>.json), so a later call trains the failed seeds
  # again and scores the runs together anew.
  local corpus=$1 dir=$WORK/recipe/$1 seed lasts=() seeds=() failed=0 name ckpt running=0 k tag variants=()
  [ -s "$dir.json" ] && { recipe_compare "$corpus"; return 0; }
  mkdir -p "$dir"
  IFS=';' read -ra variants <<< "$RECIPE_VARIANTS"
  ((${#variants[@]} > 0)) || variants=("")
  local started=$SECONDS
  for k in "${!variants[@]}"; do
    tag=$( ((k == 0)) || echo "v$k-")
    for seed in $RECIPE_SEEDS; do
      [ -f "$dir/run-${tag}s$seed.done" ] && continue
      if ((RECIPE_AT_ONCE > 0 && running >= RECIPE_AT_ONCE)); then
        wait -n
        running=$((running - 1))
      fi
      recipe_train "$corpus" "$dir/run-${tag}s$seed" "$seed" "${variants[$k]}" &
      running=$((running + 1))
    done
  done
  wait
  echo "parity: recipe on $corpus: its runs trained in $((SECONDS - started)) s (RECIPE_AT_ONCE=$RECIPE_AT_ONCE)"
  for k in "${!variants[@]}"; do
    tag=$( ((k == 0)) || echo "v$k-")
    for seed in $RECIPE_SEEDS; do
      local run=$dir/run-${tag}s$seed
      if [ ! -f "$run.done" ]; then
        echo "parity: recipe run on $corpus (${tag}seed $seed) failed, left out"; tail -3 "$run.log"
        failed=$((failed + 1))
        continue
      fi
      local ckpts=("$run"/checkpoints/ckpt_*.pt) scored
      lasts+=("${ckpts[-1]}")
      seeds+=("$tag$seed")
      scored=("${ckpts[-1]}")
      [ -n "${RECIPE_SAVE_EVERY:-}" ] && scored=("${ckpts[@]}")
      for ckpt in "${scored[@]}"; do
        name=${tag}s$seed-$(basename "$ckpt" .pt)
        recipe_score "$corpus" "$dir/$name" "$ckpt" && echo "parity: recipe on $corpus ($name): $(grep -m1 -i median "$dir/$name/score.txt")"
      done
    done
  done
  ((${#lasts[@]} > 0)) || return 1
  recipe_score "$corpus" "$dir/final" "${lasts[@]}" || return 1
  echo "${seeds[*]}" > "$dir/final/seeds.txt"
  printf '%s\n' "${lasts[@]}" > "$dir/final/checkpoints.txt"
  echo "parity: recipe on $corpus (${#lasts[@]} runs together, seeds ${seeds[*]}): $(grep -m1 -i median "$dir/final/score.txt")"
  rm -rf "$dir/final-compare"  # scored the runs of an earlier "final"
  ((failed == 0)) || return 1
  cp "$dir/final/score.json" "$dir.json"
  recipe_compare "$corpus"
}

recipe_compare() {  # corpus: the runs together of a finished recipe scored again with RECIPE_COMPARE
  # added to align's arguments, into final-compare (args.txt and seeds.txt name what it holds);
  # done again only when the arguments change.
  local dir=$WORK/recipe/$1 ckpts=()
  [ -n "$RECIPE_COMPARE" ] && [ -s "$dir/final/checkpoints.txt" ] || return 0
  [ -s "$dir/final-compare/score.json" ] && [ "$(cat "$dir/final-compare/args.txt" 2>/dev/null)" = "$RECIPE_COMPARE" ] &&
    return 0
  rm -rf "$dir/final-compare" && mkdir -p "$dir/final-compare" || return 1
  echo "$RECIPE_COMPARE" > "$dir/final-compare/args.txt"
  cp "$dir/final/seeds.txt" "$dir/final-compare/"
  mapfile -t ckpts < "$dir/final/checkpoints.txt"
  if RECIPE_ALIGN="$RECIPE_ALIGN $RECIPE_COMPARE" recipe_score "$1" "$dir/final-compare" "${ckpts[@]}"; then
    echo "parity: recipe on $1, the same runs with $RECIPE_COMPARE: $(grep -m1 -i median "$dir/final-compare/score.txt")"
  else
    rm -f "$dir/final-compare/score.json"  # no row for a scoring that failed
  fi
}

recipe_train() {  # corpus run seed [variant sets]: one run of the recipe; run.done when it finished
  local corpus=$1 run=$2 seed=$3 variant=${4:-}
  rm -rf "$run"
  # --foreground keeps timeout (and so train) in the caller's process group: a timeout around the
  # whole call then stops the runs too, where a timeout of its own group left them training into
  # the next call's runs of the same seeds.
  # shellcheck disable=SC2086
  timeout --foreground $((RECIPE_MINUTES * 60 + 180)) "$BIN/train" --config "$RECIPE_CONFIG" --run-dir "$run" \
    --max-minutes "$RECIPE_MINUTES" $(data_sets "$corpus") --set train.seed="$seed" --set run.tensorboard=false \
    $RECIPE_SETS $variant $RECIPE_THREADS $([ -n "${RECIPE_SAVE_EVERY:-}" ] && echo "--set train.checkpoint_interval=$RECIPE_SAVE_EVERY --set train.keep_checkpoints=100" \
      || echo "--set train.keep_checkpoints=2") > "$run.log" 2>&1 && touch "$run.done"
}

recipe_score() {  # corpus dir checkpoint...: align (defaults) into dir, then score (dir/score.txt, .json)
  local corpus=$1 dir=$2 ckpt ckpts=()
  shift 2
  for ckpt in "$@"; do ckpts+=(--checkpoint "$ckpt"); done
  mkdir -p "$dir"
  # shellcheck disable=SC2086
  "$BIN/align" "${ckpts[@]}" $RECIPE_ALIGN --dataset-dir "$PARITY/corpora/$corpus" --filelist "$WORK/data/$corpus/all.txt" \
    --set data.cache_dir="$WORK/data/$corpus/cache" --out "$dir/aligned" -q > "$dir/align.log" 2>&1 &&
  "$PY" scripts/score_alignment.py --textgrids "$dir/aligned/textgrids" --reference "$PARITY/corpora/$corpus/words" \
    --json "$dir/score.json" > "$dir/score.txt" || { echo "parity: recipe align on $corpus ($dir) failed"; tail -3 "$dir/align.log"; return 1; }
}

export -f train_run evaluate_run run_monoflow data_sets recipe_score
export WORK PARITY BIN PY OFFICIAL STEPS SAVE_EVERY CONFIG_YAML PARITY_SETS RECIPE_ALIGN DEVICE OFFICIAL_WORKERS
declare -A gpu_job
on_free_gpu() {  # command...: starts it in the background on the first GPU without a job
  local g
  while :; do
    for ((g = 0; g < GPUS; g++)); do
      if [ -z "${gpu_job[$g]:-}" ] || ! kill -0 "${gpu_job[$g]}" 2>/dev/null; then
        CUDA_VISIBLE_DEVICES=$((g % GPU_COUNT)) "$@" &
        gpu_job[$g]=$!
        return
      fi
    done
    sleep 1
  done
}

# Every corpus either part uses, once.
for corpus in $(printf '%s\n' $CORPORA $RECIPE_CORPORA | awk '!seen[$0]++'); do
  if ! grep -qs ", 0 differ" "$WORK/data/$corpus/frontend.txt"; then prepare_corpus "$corpus" || exit 1; fi
done
echo "parity: $GPUS run(s) at once, one per GPU"
# The longest first: the recipe runs, then the official trainer's, then monoflow's.
if ((RECIPE_MINUTES > 0)); then
  for corpus in $RECIPE_CORPORA; do on_free_gpu recipe_run "$corpus"; done
fi
for side in $SIDES; do
  for corpus in $CORPORA; do
    for seed in $SEEDS; do
      on_free_gpu bash -c 'train_run "$@" && evaluate_run "$1" "$WORK/runs/$1/$2-s$3"' _ "$corpus" "$side" "$seed"
    done
  done
done
wait

# Align each run's last checkpoint and the one the equal-wall-clock table picks, and score them.
cat "$WORK"/runs/*/*.evals.jsonl > "$WORK/evals.jsonl" 2>/dev/null
"$PY" scripts/parity/report.py --work "$WORK" --steps "$STEPS" --default-side "$DEFAULT_SIDE" --list-align > "$WORK/to_align.txt"
while read -r name step ckpt; do
  corpus=${name%%/*}
  out=$WORK/align/${name//\//_}_$step
  [ -s "$out.json" ] && continue
  mkdir -p "$WORK/align"
  # shellcheck disable=SC2086  # PARITY_SETS is words of --set options
  if "$BIN/align" --checkpoint "$ckpt" --config "$CONFIG_YAML" --set data.add_blank=true $PARITY_SETS \
       --set data.cache_dir="$WORK/data/$corpus/cache" --dataset-dir "$PARITY/corpora/$corpus" \
       --filelist "$WORK/data/$corpus/all.txt" --out "$out" -q > "$out.log" 2>&1 &&
     "$PY" scripts/score_alignment.py --textgrids "$out/textgrids" --reference "$PARITY/corpora/$corpus/words" \
       --json "$out.json" > /dev/null; then
    echo "{\"run\": \"$name\", \"step\": $step, \"score\": \"$out.json\"}" >> "$WORK/aligns.jsonl"
  else
    echo "parity: aligning $name at $step failed"; tail -3 "$out.log"
  fi
done < "$WORK/to_align.txt"
"$PY" scripts/parity/report.py --work "$WORK" --steps "$STEPS" --default-side "$DEFAULT_SIDE" | tee "$OUT/parity_report.md"
