#!/usr/bin/env bash
# CPU inference on the GPU machine's host cores against the official model in PyTorch
# (scripts/parity/cpu_infer_rounds.sh; a few minutes): needs the official checkout carried in
# .parity/glow-tts (scripts/parity/prepare.sh). CPU_INFER_THREADS ("2 4 8 <cores>"),
# CPU_INFER_ROUNDS (3). CSV to $OUT/cpu_infer_rounds.csv, the table to stdout, then the ops by self
# time on every core ($OUT/cpu_infer_ops.txt). First, where built,
# dev/cpu's winograd_conv1d_dev on 2 threads and on every core: the WN layer's kernels, with the
# AVX2 GEMM blocks beside the AVX-512F ones where the host has it.
set -uo pipefail
[ -x "$BUILD/bin/bench_inference" ] || { echo "cpu_infer.sh: bench_inference not built, skipped"; exit 0; }
[ -f .parity/glow-tts/models.py ] || { echo "cpu_infer.sh: .parity/glow-tts not carried, skipped"; exit 0; }
if [ -x "$BUILD/bin/winograd_conv1d_dev" ]; then
  for n in 2 "$(nproc)"; do
    echo "== winograd_conv1d_dev, $n threads"
    OMP_NUM_THREADS=$n timeout --foreground 120 "$BUILD/bin/winograd_conv1d_dev" | tee -a "$OUT/winograd_conv1d_dev.txt"
  done
fi
echo "== CPU inference against the official model, same threads"
BUILD="$BUILD" OFFICIAL=.parity/glow-tts THREADS="${CPU_INFER_THREADS:-2 4 8 $(nproc)}" \
  ROUNDS="${CPU_INFER_ROUNDS:-3}" CSV="$OUT/cpu_infer_rounds.csv" \
  timeout "${CPU_INFER_TIMEOUT:-420}" bash scripts/parity/cpu_infer_rounds.sh
# Where the time goes on every core (CPU_INFER_PROFILE=0 skips it): the ATen ops between the
# Winograd layers scale worse with threads than the layers do.
if [ "${CPU_INFER_PROFILE:-1}" != "0" ]; then
  echo "== bench_inference --device cpu on $(nproc) threads, by op"
  OMP_NUM_THREADS=$(nproc) timeout --foreground 120 "$BUILD/bin/bench_inference" --device cpu --calls 5 \
    --profile "$OUT/cpu_infer_profile.json" > "$OUT/cpu_infer_profile.log" 2>&1 &&
    python3 scripts/profile_cpu_ops.py --top 20 "$OUT/cpu_infer_profile.json" | tee "$OUT/cpu_infer_ops.txt"
fi
