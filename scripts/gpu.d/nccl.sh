#!/usr/bin/env bash
# Two-GPU data-parallel hook for scripts/gpu.sh (runs on a machine with 2+ GPUs; skipped
# otherwise), docs/design.md "Two GPUs":
#  1. the training-step benchmark's batches, 32 per process: bench_train_step on one GPU, then
#     on two through scripts/launch.sh (NCCL), cuda-fast TF32, graph and eager (NCCL_MODES);
#  2. the default corpus (carry data/monoflow-corpus): `train` with the ljspeech.yaml model,
#     NCCL_STEPS steps on one GPU, then on two; median step time of the logged intervals after
#     the first quarter, the losses, and whether rank 1 ended with rank 0's weights (rank 0's
#     last checkpoint against rank 1's MONOFLOW_DEBUG_RANK_CHECKPOINTS copy, read by Python torch).
# Prints per workload: step ms on 1 and 2 GPUs, throughput ratio (2 x 32 / 32 per step) and
# efficiency (ratio / 2).
set -uo pipefail
# NVLink multicast stays off on shared hosts (the GPU machine's KINDS.md).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
gpus=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)
[ "$gpus" -ge 2 ] || { echo "nccl.sh: $gpus GPU(s), skipped"; exit 0; }
rc=0

# 1. Synthetic batches.
BENCH="$BUILD/bin/bench_train_step"
if [ -x "$BENCH" ]; then
  B=(--backends cuda-fast --precisions tf32 --modes "${NCCL_MODES:-graph,eager}")
  echo "== two-GPU step benchmark (synthetic batches, 32 per process)"
  CUDA_VISIBLE_DEVICES=0 timeout 300 "$BENCH" "${B[@]}" --csv "$OUT/nccl_bench_one.csv" > /dev/null 2> "$OUT/nccl_bench_one.log" \
    || { echo "one-GPU benchmark failed"; tail -5 "$OUT/nccl_bench_one.log"; rc=1; }
  timeout 300 scripts/launch.sh 2 "$BENCH" "${B[@]}" --csv "$OUT/nccl_bench_two.csv" > /dev/null 2> "$OUT/nccl_bench_two.log" \
    || { echo "two-GPU benchmark failed"; tail -20 "$OUT/nccl_bench_two.log"; rc=1; }
  python3 - "$OUT/nccl_bench_one.csv" "$OUT/nccl_bench_two.csv" <<'PY' || rc=1
import csv, sys
one = {r["mode"]: r for r in csv.DictReader(open(sys.argv[1]))}
two = {r["mode"]: r for r in csv.DictReader(open(sys.argv[2]))}
print("mode   1 GPU ms (p90)    2 GPUs ms (p90)   ratio  efficiency")
for mode in one:
    a, b = one[mode], two.get(mode)
    if b is None: continue
    ratio = float(b["samples_per_s"]) / float(a["samples_per_s"])
    print("%-6s %7.1f (%6.1f)  %7.1f (%6.1f)   %.2fx  %3.0f%%   %s of %s gradient buckets summed during backward" % (
          mode, float(a["step_ms"]), float(a["step_ms_p90"]), float(b["step_ms"]), float(b["step_ms_p90"]), ratio,
          50 * ratio, b.get("buckets_in_backward", "?"), b.get("grad_buckets", "?")))
PY
fi

# 2. The default corpus through `train`.
BIN="$BUILD/bin/train"
CORPUS=data/monoflow-corpus
[ -x "$BIN" ] && [ -s "$CORPUS/metadata.csv" ] || { echo "nccl.sh: needs $BIN and $CORPUS for the corpus runs, skipped"; exit $rc; }
STEPS=${NCCL_STEPS:-160}
echo "== two-GPU data parallel (NCCL) on the default corpus, ljspeech.yaml model, $STEPS steps, batch_size 32 per process"
RUNS=$(mktemp -d)
C=(--config configs/ljspeech.yaml --set data.dataset_dir=$CORPUS --set data.validation_size=8
   --set train.warmup_steps=400 --set train.learning_rate=0.316 --set train.log_interval=10
   --set train.val_interval=100000 --set train.checkpoint_interval=100000
   --set data.cache_dir=$RUNS/cache --set 'data.cmudict_path=""' --align-backend cuda-fast --max-steps "$STEPS"
   ${NCCL_TRAIN_ARGS:-})
CUDA_VISIBLE_DEVICES=0 timeout 240 "$BIN" "${C[@]}" --run-dir "$RUNS/one" > "$OUT/nccl_one.log" 2>&1 || { echo "one-GPU run failed"; tail -5 "$OUT/nccl_one.log"; exit 1; }
MONOFLOW_DEBUG_RANK_CHECKPOINTS=1 timeout 240 scripts/launch.sh 2 "$BIN" "${C[@]}" --run-dir "$RUNS/two" \
  > "$OUT/nccl_two.log" 2>&1 || { echo "two-GPU run failed"; tail -20 "$OUT/nccl_two.log"; exit 1; }
grep -m1 "processes" "$OUT/nccl_two.log"
grep -m1 "CUDA graphs" "$OUT/nccl_two.log"
python3 - "$RUNS" "$STEPS" <<'PY'
import glob, json, statistics as st, sys, torch
runs, steps = sys.argv[1], int(sys.argv[2])
median = {}
for name in ("one", "two"):
    rows = [json.loads(l) for l in open("%s/%s/metrics.jsonl" % (runs, name))]
    tr = [r for r in rows if "loss/mle" in r and r["step"] > steps // 4 and r["step"] % 10 == 0]
    median[name] = st.median(r["time/step_ms"] for r in tr)
    print("%s GPU(s): median step %.1f ms over the intervals of steps %d-%d; step %d mle %.4f dur %.4f" % (
        "1" if name == "one" else "2", median[name], tr[0]["step"] - 9, tr[-1]["step"], tr[-1]["step"],
        tr[-1]["loss/mle"], tr[-1]["loss/dur"]))
ratio = 2 * median["one"] / median["two"]
print("corpus: throughput 2 GPUs / 1 GPU %.2fx, efficiency %.0f%%" % (ratio, 50 * ratio))
ckpt = sorted(glob.glob(runs + "/two/checkpoints/*.pt"))[-1]
a = torch.jit.load(ckpt, map_location="cpu").state_dict()
b = torch.jit.load(runs + "/two/rank1_final.pt", map_location="cpu").state_dict()
keys = [k for k in a if k.startswith("model.")]
if not keys: print("no model.* tensors in the checkpoint; its keys start:", list(a)[:5])
same = all(torch.equal(a[k], b[k]) for k in keys)
print("rank 0's checkpoint and rank 1's final weights: %d tensors, %s" % (len(keys), "identical" if same else "DIFFERENT"))
sys.exit(0 if same and keys else 1)
PY
[ $? -eq 0 ] || rc=1
rm -rf "$RUNS"
exit $rc
