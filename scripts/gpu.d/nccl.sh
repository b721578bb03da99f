#!/usr/bin/env bash
# Two-GPU data-parallel hook for scripts/gpu.sh (runs on a machine with 2+ GPUs; skipped
# otherwise): the ljspeech.yaml model on the default corpus (carry data/monoflow-corpus), 80
# steps on one GPU, then 80 on two through scripts/launch.sh (NCCL); prints the median step
# time of each, the losses, and whether rank 1 ended with rank 0's weights (rank 0's last
# checkpoint against rank 1's MONOFLOW_DEBUG_RANK_CHECKPOINTS copy, read by Python torch).
set -uo pipefail
# NVLink multicast stays off on shared hosts (the GPU machine's KINDS.md).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
gpus=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)
[ "$gpus" -ge 2 ] || { echo "nccl.sh: $gpus GPU(s), skipped"; exit 0; }
BIN="$BUILD/bin/train"
CORPUS=data/monoflow-corpus
[ -x "$BIN" ] && [ -s "$CORPUS/metadata.csv" ] || { echo "nccl.sh: needs $BIN and $CORPUS, skipped"; exit 0; }
echo "== two-GPU data parallel (NCCL), ljspeech.yaml model, 80 steps, batch_size 32 per process"
RUNS=$(mktemp -d)
C=(--config configs/ljspeech.yaml --set data.dataset_dir=$CORPUS --set data.validation_size=8
   --set train.warmup_steps=400 --set train.learning_rate=0.316 --set train.log_interval=1
   --set train.val_interval=100000 --set train.checkpoint_interval=100000
   --set data.cache_dir=$RUNS/cache --set 'data.cmudict_path=""' --align-backend cuda-fast --max-steps 80)
timeout 200 "$BIN" "${C[@]}" --run-dir "$RUNS/one" > "$OUT/nccl_one.log" 2>&1 || { echo "one-GPU run failed"; tail -5 "$OUT/nccl_one.log"; exit 1; }
MONOFLOW_DEBUG_RANK_CHECKPOINTS=1 timeout 240 scripts/launch.sh 2 "$BIN" "${C[@]}" --run-dir "$RUNS/two" \
  > "$OUT/nccl_two.log" 2>&1 || { echo "two-GPU run failed"; tail -20 "$OUT/nccl_two.log"; exit 1; }
grep -m1 "processes" "$OUT/nccl_two.log"
python3 - "$RUNS" <<'PY'
import glob, json, statistics as st, sys, torch
runs = sys.argv[1]
for name in ("one", "two"):
    rows = [json.loads(l) for l in open("%s/%s/metrics.jsonl" % (runs, name))]
    tr = [r for r in rows if "loss/mle" in r and r["step"] > 20]
    print("%s GPU(s): median step %.1f ms over steps 21-%d; step %d mle %.4f dur %.4f" % (
        "1" if name == "one" else "2", st.median(r["time/step_ms"] for r in tr), tr[-1]["step"],
        tr[-1]["step"], tr[-1]["loss/mle"], tr[-1]["loss/dur"]))
ckpt = sorted(glob.glob(runs + "/two/checkpoints/*.pt"))[-1]
a = torch.jit.load(ckpt, map_location="cpu").state_dict()
b = torch.jit.load(runs + "/two/rank1_final.pt", map_location="cpu").state_dict()
keys = [k for k in a if k.startswith("model.")]
if not keys: print("no model.* tensors in the checkpoint; its keys start:", list(a)[:5])
same = all(torch.equal(a[k], b[k]) for k in keys)
print("rank 0's checkpoint and rank 1's final weights: %d tensors, %s" % (len(keys), "identical" if same else "DIFFERENT"))
sys.exit(0 if same and keys else 1)
PY
rc=$?
rm -rf "$RUNS"
exit $rc
