#!/usr/bin/env bash
# CPU inference against the official model in PyTorch, on the same cores (issue 30's target: at
# least 2x). For each thread count, ROUNDS rounds; a round runs monoflow's
# `bench_inference --device cpu` and then scripts/parity/official_cpu_infer.py, both with that
# many threads, CALLS timed calls each (after 3 warm-ups), the 100-symbol sentence to ~1,800
# frames of the ljspeech.yaml model (docs/design.md, "Inference"). Alternating the two sides round
# by round keeps a shared machine's drift out of their ratio; the table gives each round's ratio
# and their median. Rows go to CSV (threads,round,monoflow_ms,official_ms,ratio).
#
#   [BUILD=build] [PYTHON=python3] [OFFICIAL=.parity/glow-tts] [THREADS="2 4 8 16"] [ROUNDS=5]
#   [CALLS=10] [CSV=cpu_infer_rounds.csv] bash scripts/parity/cpu_infer_rounds.sh
#
# OFFICIAL is a checkout of jaywalnut310/glow-tts (scripts/parity/prepare.sh fetches it); the
# Python needs torch. Thread counts above the usable cores are left out.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$ROOT/build}
PY=${PYTHON:-python3}
OFFICIAL=${OFFICIAL:-$ROOT/.parity/glow-tts}
ROUNDS=${ROUNDS:-5}
CALLS=${CALLS:-10}
CSV=${CSV:-cpu_infer_rounds.csv}
cores=$(nproc)
THREADS=${THREADS:-"2 4 8 16"}

bench="$BUILD/bin/bench_inference"
[ -x "$bench" ] || { echo "cpu_infer_rounds: $bench not built" >&2; exit 1; }
[ -f "$OFFICIAL/models.py" ] || { echo "cpu_infer_rounds: no official checkout at $OFFICIAL (OFFICIAL=DIR)" >&2; exit 1; }
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ && "$CALLS" =~ ^[1-9][0-9]*$ ]] || { echo "cpu_infer_rounds: ROUNDS and CALLS must be whole numbers >= 1" >&2; exit 2; }

# The median ms of one side's call, from its CSV line (bench_inference: the `ms` column of its
# fp32 row; official_cpu_infer.py: frames,length_scale,ms,...).
monoflow_ms() {
  local csv
  csv=$(mktemp)
  OMP_NUM_THREADS=$1 "$bench" --device cpu --config "$ROOT/configs/ljspeech.yaml" --calls "$CALLS" --csv "$csv" \
    > /dev/null 2>&1 || { rm -f "$csv"; return 1; }
  awk -F, '$1 == "fp32" { print $6 }' "$csv"
  rm -f "$csv"
}
errors=$(mktemp)
trap 'rm -f "$errors"' EXIT
official_ms() {
  OMP_NUM_THREADS=$1 "$PY" "$ROOT/scripts/parity/official_cpu_infer.py" --official "$OFFICIAL" --calls "$CALLS" \
    --threads "$1" 2> "$errors" | awk -F, 'NF >= 3 && $1 ~ /^[0-9]+$/ { print $3 }'
}

median() {  # FORMAT VALUE...: the values' median, printed with FORMAT
  local format=$1
  shift
  printf '%s\n' "$@" | sort -g |
    awk -v f="$format" '{ v[NR] = $1 } END { printf f, (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
range() {  # "min-max" of the arguments, whole numbers
  printf '%s\n' "$@" | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%.0f-%.0f", lo, hi }'
}

echo "threads,round,monoflow_ms,official_ms,ratio" > "$CSV"
echo "cpu_infer_rounds: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $cores usable cores," \
  "$ROUNDS round(s) of $CALLS timed call(s) a side"
printf '%-8s %-22s %-22s %s\n' threads "monoflow ms: median" "official ms: median" "official / monoflow: median (each round)"
status=0
for n in $THREADS; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "cpu_infer_rounds: THREADS: '$n' is not a whole number >= 1" >&2; exit 2; }
  [ "$n" -le "$cores" ] || continue
  mono=() offi=() ratios=()
  for r in $(seq "$ROUNDS"); do
    m=$(monoflow_ms "$n") && o=$(official_ms "$n") && [ -n "$m" ] && [ -n "$o" ] || {
      echo "cpu_infer_rounds: round $r at $n threads failed (monoflow '${m:-}', official '${o:-}')" >&2
      tail -3 "$errors" >&2
      status=1
      continue
    }
    ratio=$(awk -v m="$m" -v o="$o" 'BEGIN { printf "%.2f", o / m }')
    echo "$n,$r,$m,$o,$ratio" >> "$CSV"
    mono+=("$m") offi+=("$o") ratios+=("$ratio")
  done
  [ ${#ratios[@]} -gt 0 ] || continue
  printf '%-8s %-22s %-22s %s\n' "$n" "$(median %.0f "${mono[@]}") ($(range "${mono[@]}"))" \
    "$(median %.0f "${offi[@]}") ($(range "${offi[@]}"))" "$(median %.2f "${ratios[@]}")x (${ratios[*]})"
done
exit $status
