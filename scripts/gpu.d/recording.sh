#!/usr/bin/env bash
# What recording the CUDA graphs costs a run, under each run.cudnn_search (hook for
# scripts/gpu.sh; needs data/monoflow-corpus carried along; ~2 minutes):
#   quick-start: configs/quickstart.yaml, 1,500 steps (RECORDING_QS_STEPS);
#   ljspeech.yaml model: 1,000 steps on the same corpus (RECORDING_LJ_STEPS; 0 skips it).
# One checkpoint at the end, no validation. Per run: the wall time, the recording's share (the
# run's end line), the median logged step time over the last quarter of the run (intervals that
# recorded no graph) and the last losses. Table in $OUT/recording.txt.
# RECORDING_MODES picks the values (default "auto always never").
set -uo pipefail
BIN=$BUILD/bin/train
CORPUS=data/monoflow-corpus
[ -x "$BIN" ] || { echo "recording.sh: $BIN not built, skipped"; exit 0; }
[ -s "$CORPUS/metadata.csv" ] || { echo "recording.sh: $CORPUS not carried, skipped"; exit 0; }
TABLE=$OUT/recording.txt
: > "$TABLE"

summarise() {  # name run_dir wall_s
  python3 - "$@" <<'PY' | tee -a "$TABLE"
import json, statistics, sys
name, run, wall = sys.argv[1], sys.argv[2], float(sys.argv[3])
rows = [json.loads(l) for l in open(run + "/metrics.jsonl") if '"loss/mle"' in l]
last_step = rows[-1]["step"]
steady = [r["time/step_ms"] for r in rows if r.get("time/graph_recording_s", 0) == 0 and r["step"] > 0.75 * last_step]
recording = sum(r.get("time/graph_recording_s", 0) for r in rows)
step = statistics.median(steady) if steady else float("nan")
print(f"{name:16s} | {wall:6.1f} s | {recording:5.1f} s | {step:6.2f} ms | {rows[-1]['loss/mle']:.4f} / {rows[-1]['loss/dur']:.4f}")
PY
}

one_run() {  # name config steps extra...
  local name=$1 config=$2 steps=$3
  shift 3
  local run=$OUT/recording_$name start end
  rm -rf "$run"
  start=$(date +%s.%N)
  "$BIN" --config "$config" --set train.max_steps="$steps" --set train.checkpoint_interval="$steps" \
    --set train.val_interval=0 --set run.dir="$run" --set data.dataset_dir=$CORPUS "$@" > "$run.log" 2>&1 ||
    { echo "$name: train failed"; tail -3 "$run.log"; return 1; }
  end=$(date +%s.%N)
  grep "CUDA graphs: .* recorded," "$run.log" | sed "s/^/  $name: /"
  summarise "$name" "$run" "$(python3 -c "print($end - $start)")"
  rm -rf "$run/checkpoints"
}

echo "== recording the graphs (wall | recording | last-quarter step | last mle / dur)"
rc=0
for mode in ${RECORDING_MODES:-auto always never}; do
  one_run "qs-$mode" configs/quickstart.yaml "${RECORDING_QS_STEPS:-1500}" --set run.cudnn_search="$mode" || rc=1
done
if [ "${RECORDING_LJ_STEPS:-1000}" != "0" ]; then
  for mode in ${RECORDING_MODES:-auto always}; do
    [ "$mode" = never ] && continue
    one_run "lj-$mode" configs/ljspeech.yaml "${RECORDING_LJ_STEPS:-1000}" --set run.cudnn_search="$mode" \
      --set data.cmudict_path= || rc=1
  done
fi
exit $rc
