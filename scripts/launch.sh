#!/usr/bin/env bash
# Data-parallel training on one host: starts N copies of a command, one per GPU (or CPU
# process), with torchrun's environment (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT).
#   scripts/launch.sh 2 ./train --config configs/ljspeech.yaml
# Rank r uses cuda:r; ranks meet at 127.0.0.1:$MASTER_PORT (default 29500). If one rank fails,
# the others are stopped and the first failure's exit code is returned.
set -uo pipefail
n=${1:?usage: scripts/launch.sh N command [args...]}
shift
[[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "launch: N must be a positive integer, got '$n'" >&2; exit 2; }
export WORLD_SIZE=$n MASTER_ADDR=${MASTER_ADDR:-127.0.0.1} MASTER_PORT=${MASTER_PORT:-29500}
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
pids=()
for ((r = 0; r < n; r++)); do
  RANK=$r LOCAL_RANK=$r "$@" &
  pids+=($!)
done
# Whichever rank ends first is seen first (wait -n): a failed rank stops its peers at once
# instead of leaving them blocked in a collective until the group's timeout.
rc=0
for ((left = n; left > 0; left--)); do
  wait -n
  code=$?
  if [ $code -ne 0 ] && [ $rc -eq 0 ]; then
    rc=$code
    kill "${pids[@]}" 2>/dev/null
  fi
done
exit $rc
