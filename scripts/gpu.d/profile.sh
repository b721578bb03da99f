#!/usr/bin/env bash
# Profile hook for scripts/gpu.sh (GPU machine, ~1 minute): the training step of the benchmark
# (cuda-fast, TF32 and bf16, eager and graph) under LibTorch's Kineto profiler, 3 steps each,
# summarised by scripts/profile_summary.py: wall time, GPU busy time and share, kernels,
# launches and synchronisations per step, and the kernels that take the GPU's time.
# Traces (gzipped) and summaries go to $OUT/profile_*. PROFILE_SHAPES=1 records every op's input
# sizes as well (more host time in eager steps; for finding which tensor a copy is). With
# PROFILE_MODES=eager-padded,graph the graph's summary names its kernels by their eager twins.
set -uo pipefail
BIN="$BUILD/bin/bench_train_step"
[ -x "$BIN" ] || { echo "profile.sh: $BIN not built, skipped"; exit 0; }
echo "== profile of the training step (Kineto)"
timeout --foreground "${PROFILE_TIMEOUT:-240}" "$BIN" --config configs/ljspeech.yaml --backends cuda-fast \
  --precisions "${PROFILE_PRECISIONS:-tf32,bf16}" --modes "${PROFILE_MODES:-eager,graph}" --steps 10 --profile "$OUT/profile" ${PROFILE_SHAPES:+--profile-shapes} \
  > /dev/null 2> "$OUT/profile_bench.log"
rc=$?
[ $rc -eq 0 ] || { echo "bench_train_step --profile exit $rc"; tail -5 "$OUT/profile_bench.log"; }
for trace in "$OUT"/profile_*.json; do
  [ -s "$trace" ] || continue
  name=$(basename "$trace" .json)
  # A graph's kernels take the parts and ops of their twins in the padded eager trace, if any.
  twin=${trace%_graph.json}_eager-padded.json
  names=(); [ "$twin" != "$trace" ] && [ -s "$twin" ] && names=(--names-from "$twin")
  python3 scripts/profile_summary.py "$trace" --top "${PROFILE_TOP:-12}" "${names[@]}" > "$OUT/$name.txt" 2>&1
  echo "-- $name"; grep -E "^median|GPU kernel time" "$OUT/$name.txt"
done
for trace in "$OUT"/profile_*.json; do [ -s "$trace" ] && gzip -f "$trace"; done
exit $rc
