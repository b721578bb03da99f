#!/usr/bin/env bash
# Data-parallel training on one host: starts N copies of a command, one per GPU (or CPU
# process), with torchrun's environment (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT).
#   scripts/launch.sh 2 ./train --config configs/ljspeech.yaml
# Rank r uses cuda:r; ranks meet at 127.0.0.1:$MASTER_PORT (default 29500).
# The launcher supervises its ranks until the last one has ended:
#   - SIGINT/SIGTERM to the launcher (Ctrl-C, a scheduler) is passed to every rank still running
#     (SIGHUP as SIGTERM), and the launcher waits for them: `train` stops all ranks at one step
#     with a checkpoint.
#   - If one rank fails, the others are sent SIGTERM at once (instead of staying blocked in a
#     collective until the group's timeout).
#   - Exit status: 0 when every rank finished; 128 + the signal (130, 143) when a signal stopped
#     them and every rank exited so; otherwise the first failing rank's status.
set -uo pipefail
n=${1:?usage: scripts/launch.sh N command [args...]}
shift
[[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "launch: N must be a positive integer, got '$n'" >&2; exit 2; }
export WORLD_SIZE=$n MASTER_ADDR=${MASTER_ADDR:-127.0.0.1} MASTER_PORT=${MASTER_PORT:-29500}
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}

declare -A running=()  # pid -> rank, for the ranks not yet waited for
signalled=0            # the signal passed on to the ranks (0: none)
forward() {
  signalled=$1
  ((${#running[@]})) && kill -s "$1" "${!running[@]}" 2>/dev/null
}
# Each rank in a process group of its own (job control): Ctrl-C at a terminal reaches the
# launcher alone, which passes it on once; a rank signalled twice would exit without a checkpoint.
set -m
# While the ranks start, a signal is only noted (a trap runs between two commands, so it
# could fall between a rank's start and its entry in `running`), then passed on once to all.
trap 'signalled=2' INT
trap 'signalled=15' TERM HUP
for ((r = 0; r < n; r++)); do
  RANK=$r LOCAL_RANK=$r "$@" &
  running[$!]=$r
done
trap 'forward 2' INT
trap 'forward 15' TERM HUP  # a closed terminal: the ranks stop with a checkpoint too
((signalled)) && forward "$signalled"

failed=0       # the first status that is neither 0 nor 128 + the forwarded signal
interrupted=0  # a rank exited with 128 + the forwarded signal
ended() {      # ended PID STATUS: one rank is gone
  unset "running[$1]"
  if ((signalled && $2 == 128 + signalled)); then
    interrupted=1
  elif (($2 != 0 && failed == 0)); then
    failed=$2
    echo "launch: rank exited with status $2; stopping the other ranks" >&2
    ((${#running[@]})) && kill -s TERM "${!running[@]}" 2>/dev/null
  fi
}
while ((${#running[@]})); do
  pid=""
  wait -n -p pid "${!running[@]}" 2>/dev/null
  code=$?
  if [ -n "${pid:-}" ]; then ended "$pid" "$code"; continue; fi
  # No pid: a trapped signal ended the wait early (the ranks run on), or job control had
  # already reaped a rank that exited while the launcher was busy (`wait -n` then answers
  # "no such job", which retried would spin for ever). `wait PID` still has the status of a
  # reaped child, so every rank that is gone is collected by its pid.
  gone=0
  for p in "${!running[@]}"; do
    kill -0 "$p" 2>/dev/null && continue
    wait "$p"
    ended "$p" $?
    gone=1
  done
  ((gone)) || sleep 0.1
done
((failed)) && exit "$failed"
((interrupted)) && exit $((128 + signalled))
exit 0
