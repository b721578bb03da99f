#!/usr/bin/env bash
# Data-parallel scaling hook for scripts/gpu.sh (runs on a machine with 2+ GPUs; skipped
# otherwise), docs/design.md "Two GPUs", issue 31. Measures every GPU count of {1, 2, 4, 8} that
# the machine has (nvidia-smi; NCCL_GPUS="1 2 4" picks, 1 is always the baseline), one GPU with
# CUDA_VISIBLE_DEVICES=0, N through scripts/launch.sh N, the parts NCCL_WORKLOADS names
# (default "synthetic corpus"):
#  synthetic: bench_train_step's batches, 32 per process, cuda-fast, NCCL_MODES (default graph),
#     NCCL_PRECISIONS (default "bf16 tf32"), one launch per count;
#  corpus: the default corpus (carry data/monoflow-corpus) through `train` with the ljspeech.yaml
#     model, per precision (bf16: autocast as configured, first, so that a spent budget loses TF32
#     first; tf32: --set train.fp16_run=false) and count, NCCL_STEPS steps (default 160),
#     NCCL_CORPUS_BATCH per process (default 32, as issue 31 specifies; at 4 or 8 x 32 the 275
#     training utterances give 3 or 2 steps an epoch: the sampler repeats batches so that every
#     rank has one, and each step's ranks pad to the longest of neighbouring batches; the output
#     says how many); median step time of the logged intervals after the first quarter, the last
#     losses, and whether rank 0's last checkpoint equals every other rank's final weights
#     (MONOFLOW_DEBUG_RANK_CHECKPOINTS's rank<r>_final.pt, read by Python torch).
# Prints one table per workload, precision and mode (step ms, speed-up = throughput N x batch /
# step ms against one GPU's, efficiency = speed-up / N; scripts/gpu.d/nccl_scaling.py) and writes
# $OUT/nccl_scaling.csv. Bounded: each run's timeout ends it by NCCL_BUDGET_S seconds (default
# 300) after the hook began (a stopped run's ranks get up to ~25 s more to leave), and a run that
# would get less than 45 s (bench) or 60 s (train) is skipped, with a line saying so (exit status
# 1: not all measured); so one part fits a 10-minute device call after the build, and the other
# part goes in a second call.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
# NVLink multicast stays off on shared hosts (the GPU machine's KINDS.md).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-gpu-out} BUILD=${BUILD:-build-gpu}
# The carried libraries (scripts/gpu.sh sets this too; here for the hook run on its own).
[ -d .deps/root ] && export LD_LIBRARY_PATH="$PWD/.deps/root/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
gpus=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | wc -l)
[ "$gpus" -ge 2 ] || { echo "nccl.sh: $gpus GPU(s), skipped"; exit 0; }
counts=(1)
for n in ${NCCL_GPUS:-1 2 4 8}; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "nccl.sh: NCCL_GPUS: '$n' is not a GPU count"; exit 2; }
  if [ "$n" -gt "$gpus" ]; then
    [ -n "${NCCL_GPUS:-}" ] && echo "nccl.sh: $n GPUs asked for, the machine has $gpus: not measured"
    continue
  fi
  [[ " ${counts[*]} " == *" $n "* ]] || counts+=("$n")
done
mapfile -t counts < <(printf '%s\n' "${counts[@]}" | sort -n)
[ "${#counts[@]}" -ge 2 ] || { echo "nccl.sh: no count above 1 GPU to measure, skipped"; exit 0; }
WORKLOADS=${NCCL_WORKLOADS:-synthetic corpus}
PRECISIONS=${NCCL_PRECISIONS:-bf16 tf32}
for p in $PRECISIONS; do
  [[ "$p" == tf32 || "$p" == bf16 ]] || { echo "nccl.sh: NCCL_PRECISIONS: '$p' (tf32 or bf16)"; exit 2; }
done
BUDGET=${NCCL_BUDGET_S:-300}
deadline=$((SECONDS + BUDGET))
echo "== data-parallel scaling (NCCL): $gpus GPUs here, measuring ${counts[*]}; $WORKLOADS; budget ${BUDGET} s"
SCALING="scripts/gpu.d/nccl_scaling.py"
rm -f "$OUT/nccl_scaling.csv"
rc=0
port=29500

# Seconds a run may take: its cap, or what is left of the budget. Prints nothing and fails
# when less than $2 seconds are left (the run is then skipped).
allow() {
  local cap=$1 least=$2 left=$((deadline - SECONDS))
  [ "$left" -ge "$least" ] || return 1
  echo $((left < cap ? left : cap))
}

# run N TIMEOUT LOG STDOUT command...: the command on one GPU, or on N through launch.sh (a fresh
# port each time), stderr (and stdout when STDOUT is -) into LOG. At the timeout SIGTERM goes to
# the whole group (train then stops at its next step, with its checkpoint), SIGKILL 20 s later
# if the command is still there. timeout leads a process group of its own: after a failure or a
# timeout, the ranks still in it (one stuck in a collective ignores SIGTERM) get 20 s to leave,
# then SIGKILL, so that none holds a GPU during the next run.
run() {
  local n=$1 t=$2 log=$3 stdout=$4 pid code waited=0
  shift 4
  port=$((port + 1))
  [ "$stdout" = - ] && stdout=$log
  if [ "$n" -eq 1 ]; then
    CUDA_VISIBLE_DEVICES=0 timeout -k 20 "$t" "$@" 2>> "$log" >> "$stdout" &
  else
    CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((n - 1))) MASTER_PORT=$port timeout -k 20 "$t" scripts/launch.sh "$n" "$@" \
      2>> "$log" >> "$stdout" &
  fi
  pid=$!
  wait "$pid"
  code=$?
  if [ "$code" -ne 0 ]; then
    while kill -0 -- -"$pid" 2> /dev/null && [ "$waited" -lt 20 ]; do sleep 1; waited=$((waited + 1)); done
    kill -KILL -- -"$pid" 2> /dev/null
    if [ "$code" -eq 124 ]; then
      echo "$n GPU(s): stopped by the ${t} s timeout (its log: $log)"
    else
      echo "$n GPU(s): failed with exit code $code; the end of $log:"
      tail -15 "$log"
    fi
  fi
  return "$code"
}

# 1. Synthetic batches: each count's rows in one process group; rank 0's CSV on stdout, row by
# row, so that a run stopped part-way keeps the rows it finished.
if [[ " $WORKLOADS " == *" synthetic "* ]]; then
  BENCH="$BUILD/bin/bench_train_step"
  if [ -x "$BENCH" ]; then
    B=(--backends cuda-fast --precisions "$(echo "$PRECISIONS" | tr -s ' ' ',')" --modes "${NCCL_MODES:-graph}")
    echo "== synthetic batches: bench_train_step ${B[*]}, 32 per process"
    args=()
    for n in "${counts[@]}"; do
      t=$(allow 200 45) || { echo "$n GPU(s): skipped, NCCL_BUDGET_S (${BUDGET} s) spent; NCCL_WORKLOADS=synthetic in another call"; rc=1; continue; }
      : > "$OUT/nccl_bench_$n.log"; : > "$OUT/nccl_bench_$n.csv"
      run "$n" "$t" "$OUT/nccl_bench_$n.log" "$OUT/nccl_bench_$n.csv" "$BENCH" "${B[@]}" || rc=1
      args+=("$n=$OUT/nccl_bench_$n.csv")
    done
    [ "${#args[@]}" -gt 0 ] && { python3 "$SCALING" synthetic --csv "$OUT/nccl_scaling.csv" "${args[@]}" || rc=1; }
  else
    echo "nccl.sh: no $BENCH (TARGETS=bench_train_step), synthetic part skipped"
  fi
fi

# 2. The default corpus through `train`, per precision and count.
if [[ " $WORKLOADS " == *" corpus "* ]]; then
  BIN="$BUILD/bin/train"
  CORPUS=data/monoflow-corpus
  if [ -x "$BIN" ] && [ -s "$CORPUS/metadata.csv" ]; then
    STEPS=${NCCL_STEPS:-160}
    CB=${NCCL_CORPUS_BATCH:-32}
    MODE=graph
    [[ "${NCCL_TRAIN_ARGS:-}" == *cuda_graphs=false* ]] && MODE=eager
    echo "== default corpus: train, ljspeech.yaml model, $STEPS steps, batch_size $CB per process, $MODE"
    RUNS=$(mktemp -d)
    # shellcheck disable=SC2206  # NCCL_TRAIN_ARGS is words of --set options
    C=(--config configs/ljspeech.yaml --set data.dataset_dir=$CORPUS --set data.validation_size=8
       --set train.warmup_steps=400 --set train.learning_rate=0.316 --set train.log_interval=10
       --set train.val_interval=100000 --set train.checkpoint_interval=100000 --set train.batch_size="$CB"
       --set data.cache_dir="$RUNS/cache" --set 'data.cmudict_path=""' --align-backend cuda-fast --max-steps "$STEPS"
       ${NCCL_TRAIN_ARGS:-})
    args=()
    for p in $PRECISIONS; do
      fp16=true; [ "$p" = tf32 ] && fp16=false
      for n in "${counts[@]}"; do
        t=$(allow 180 60) || { echo "$p, $n GPU(s): skipped, NCCL_BUDGET_S (${BUDGET} s) spent; NCCL_WORKLOADS=corpus in another call"; rc=1; continue; }
        log="$OUT/nccl_corpus_${p}_$n.log"
        : > "$log"
        MONOFLOW_DEBUG_RANK_CHECKPOINTS=1 run "$n" "$t" "$log" - "$BIN" "${C[@]}" --set train.fp16_run=$fp16 \
          --run-dir "$RUNS/${p}_$n" || rc=1
        [ "$n" -gt 1 ] && grep -m1 "processes" "$log"
        args+=("$p:$n=$RUNS/${p}_$n:$log")
      done
    done
    [ "${#args[@]}" -gt 0 ] && { python3 "$SCALING" corpus --csv "$OUT/nccl_scaling.csv" --steps "$STEPS" \
      --batch "$CB" --mode "$MODE" "${args[@]}" || rc=1; }
    if [ "$CB" -eq 32 ] && [ "${counts[-1]}" -ge 4 ]; then
      echo "(corpus: 32 per process, as issue 31 specifies: the targets' per-GPU work; a smaller batch would change"
      echo " the one-GPU baseline too. With 4 or 8 ranks the training utterances make few steps an epoch (the"
      echo " steps/epoch above): the sampler repeats batches so that no rank goes without one, and all ranks of a"
      echo " step pad to the longest of N neighbouring batches, so these counts measure that padding as well as"
      echo " the scaling. NCCL_CORPUS_BATCH=8 runs every count with 8 per process.)"
    fi
    rm -rf "$RUNS"
  else
    echo "nccl.sh: needs $BIN (TARGETS=train) and $CORPUS (carried) for the corpus part, skipped"
  fi
fi
[ -s "$OUT/nccl_scaling.csv" ] && echo "nccl.sh: $OUT/nccl_scaling.csv"
exit $rc
