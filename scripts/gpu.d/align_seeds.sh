#!/usr/bin/env bash
# Run-to-run spread of alignment accuracy, for scripts/gpu.sh (GPU machine; ~30 s a run).
# Skipped unless ALIGN_SEEDS is set, e.g. ALIGN_SEEDS="11 22 33". For each seed and each token
# choice ("chars": configs/quickstart.yaml as is; "blank": data.add_blank=true), trains
# quickstart.yaml on the default corpus for ALIGN_SEED_STEPS (2500: one run's accuracy has
# settled by then, docs/history/benchmarks-2026-11.md) steps, one run after another (six at once on one H100
# ran at ~9 steps/s each: time-slicing between processes), then aligns its last checkpoint on
# ALIGN_DEVICE (cuda) and scores it against espeak-ng's word timings: one CSV line per run, to
# $OUT/align_seeds.csv. ALIGN_CHOICES picks token choices ("chars blank"); with ALIGN_EDGE_AB=1
# each run is also aligned with --silence-edge-ms 0 (word edges at the silence not pulled in), a second
# line whose tokens read "<choice>-edge0"; with ALIGN_RECENTRE_AB=1, also with --recentre
# (boundaries moved by the offset the spectral change tells), a line "<choice>-recentred". Every run's TextGrids come back in
# $OUT/align_seeds_textgrids.tgz (<label>_<seed>/), to score again without the GPU.
# ALIGN_CONFIG trains another config (configs/quickstart.yaml), ALIGN_SET adds overrides to
# every run ("key=value ..."). ALIGN_ENSEMBLE=N also aligns each N consecutive seeds' runs
# together (align with N checkpoints: each boundary's median), a line "<choice>-median<N>" whose
# seed reads "s1+s2+...".
# Needs data/monoflow-corpus with its words/ carried (scripts/make_corpus.sh).
set -uo pipefail
[ -n "${ALIGN_SEEDS:-}" ] || exit 0
CORPUS=data/monoflow-corpus
[ -x "$BUILD/bin/align" ] && [ -x "$BUILD/bin/train" ] || { echo "align_seeds.sh: align/train not built, skipped"; exit 0; }
[ -d "$CORPUS/words" ] || { echo "align_seeds.sh: $CORPUS/words missing, skipped"; exit 0; }
W=$OUT/align_seeds
mkdir -p "$W"
declare -A CHOICE=([chars]="" [blank]="data.add_blank=true")
STEPS=${ALIGN_SEED_STEPS:-2500}
DEVICE=${ALIGN_DEVICE:-cuda}
CHOICES=${ALIGN_CHOICES:-chars blank}
echo "== alignment accuracy over seeds ${ALIGN_SEEDS}, $CHOICES, $STEPS steps each"
echo "tokens,seed,steps,median_abs_ms,median_signed_ms,within_10,within_25,within_50" | tee "$OUT/align_seeds.csv"
# Align the checkpoint with the extra align arguments, score, one CSV line labelled $1.
align_and_score() {
  local label=$1; shift
  "$BUILD/bin/align" --checkpoint "$ckpt" --dataset-dir "$CORPUS" --out "$W/aligned" --device "$DEVICE" \
    --batch-size 32 --cache-dir "$cache" -q "$@" > "$W/align.log" 2>&1 || { tail -3 "$W/align.log"; return; }
  python3 scripts/score_alignment.py --textgrids "$W/aligned/textgrids" --reference "$CORPUS/words" \
    --row "$label,$seed,$step" | tee -a "$OUT/align_seeds.csv"
  grep -h "TextGrids" "$W/align.log" | sed "s/^ */  $label $seed: /"
  mkdir -p "$W/textgrids"
  mv "$W/aligned/textgrids" "$W/textgrids/${label}_$seed"
  rm -rf "$W/aligned"
}
group=() group_seeds=()
for name in $CHOICES; do
  for seed in $ALIGN_SEEDS; do
    run=$W/run_${name}_$seed cache=$W/cache_$name
    overrides=(--set train.seed=$seed --set train.max_steps=$STEPS --set data.dataset_dir=$CORPUS --set data.cache_dir=$cache)
    for kv in ${CHOICE[$name]} ${ALIGN_SET:-}; do overrides+=(--set "$kv"); done
    timeout --foreground 300 "$BUILD/bin/train" --config "${ALIGN_CONFIG:-configs/quickstart.yaml}" --run-dir "$run" "${overrides[@]}" > "$W/train.log" 2>&1
    ckpt=$(ls "$run"/checkpoints/ckpt_*.pt 2>/dev/null | sort -V | tail -1)
    [ -n "$ckpt" ] || { echo "$name seed $seed: no checkpoint"; tail -3 "$W/train.log"; continue; }
    step=$(basename "$ckpt" .pt); step=$((10#${step#ckpt_}))
    align_and_score "$name"
    [ "${ALIGN_EDGE_AB:-0}" = 1 ] && align_and_score "$name-edge0" --silence-edge-ms 0
    [ "${ALIGN_RECENTRE_AB:-0}" = 1 ] && align_and_score "$name-recentred" --recentre
    if [ "${ALIGN_ENSEMBLE:-0}" -gt 1 ]; then
      mkdir -p "$W/kept"
      mv "$ckpt" "$W/kept/${name}_$seed.pt"
      group+=("$W/kept/${name}_$seed.pt") group_seeds+=("$seed")
      if [ ${#group[@]} -eq "$ALIGN_ENSEMBLE" ]; then
        ckpt=${group[0]} seed=$(IFS=+; echo "${group_seeds[*]}")
        extra=(); for k in "${group[@]:1}"; do extra+=(--checkpoint "$k"); done
        align_and_score "$name-median$ALIGN_ENSEMBLE" "${extra[@]}"
        rm -f "${group[@]}"; group=() group_seeds=()
      fi
    fi
    rm -rf "$run"
  done
  group=() group_seeds=()
done
[ -d "$W/textgrids" ] && tar czf "$OUT/align_seeds_textgrids.tgz" -C "$W/textgrids" .
rm -rf "$W"  # keep the transfer small: the CSV and the TextGrids hold the results
