# Probe: how much of a coupling block's GPU time fusion around the products could remove.
# One Glow-TTS coupling block of configs/ljspeech.yaml's decoder (start 1x1 80 -> 192, a WaveNet
# of 4 layers with kernel-5 convolutions 192 -> 384, the tanh-sigmoid gate, dropout 0.05, the
# res/skip 1x1s and the masked residual, end 1x1 192 -> 160, the affine transform and its
# log-determinant) at B = 32 and T = 500 squeezed frames, bf16 autocast, forward and backward,
# written the way the official model is (plain PyTorch ops), three ways:
#   eager      each op its own kernels, as ATen runs them;
#   compiled   torch.compile (Inductor): the element-wise chains between the products fused into
#              Triton kernels, the convolutions and GEMMs still cuDNN's and cuBLAS's;
#   graphed    the eager block recorded as a CUDA graph (launch gaps gone, kernels the same).
# The profile of the monoflow step (docs/benchmarks.md, "Where the coupling blocks' time goes")
# gives its own fused kernels ~0.95 ms a block, forward and backward; the compiled figure says
# what fusing every element-wise op (not the products' epilogues) reaches at best.
# Prints per way the GPU kernel time of one forward and backward (mean of 5 calls), the kernel
# count, and the time in convolutions and GEMMs.
#   python3 dev/py/wn_compile_probe.py [B T]
import sys

import torch
import torch.nn.functional as F

from cuda_timing import cuda_kernels, graphed

torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
torch.backends.cudnn.benchmark = True
B = int(sys.argv[1]) if len(sys.argv) > 1 else 32
T = int(sys.argv[2]) if len(sys.argv) > 2 else 500
HALF, H, K, LAYERS, P, CALLS = 80, 192, 5, 4, 0.05, 5


def parameters():
    torch.manual_seed(0)
    p = {"start_w": torch.randn(H, HALF, 1) * HALF**-0.5, "start_b": torch.zeros(H),
         "end_w": torch.randn(2 * HALF, H, 1) * 0.01, "end_b": torch.zeros(2 * HALF)}
    for i in range(LAYERS):
        out = 2 * H if i < LAYERS - 1 else H
        p[f"in{i}_w"] = torch.randn(2 * H, H, K) * (H * K) ** -0.5
        p[f"in{i}_b"] = torch.zeros(2 * H)
        p[f"rs{i}_w"] = torch.randn(out, H, 1) * H**-0.5
        p[f"rs{i}_b"] = torch.zeros(out)
    return {k: v.cuda().requires_grad_() for k, v in p.items()}


def block(p, x, mask):
    x0, x1 = x.split(HALF, 1)
    h = F.conv1d(x0, p["start_w"], p["start_b"]) * mask
    skip = torch.zeros_like(h)
    for i in range(LAYERS):
        a = F.conv1d(h, p[f"in{i}_w"], p[f"in{i}_b"], padding=K // 2)
        ta, sb = a.split(H, 1)
        acts = F.dropout(torch.tanh(ta) * torch.sigmoid(sb), P)
        rs = F.conv1d(acts, p[f"rs{i}_w"], p[f"rs{i}_b"])
        if i < LAYERS - 1:
            h = (h + rs[:, :H]) * mask
            skip = skip + rs[:, H:]
        else:
            skip = skip + rs
    out = F.conv1d(skip * mask, p["end_w"], p["end_b"])
    m, logs = out.split(HALF, 1)
    z1 = (m + torch.exp(logs) * x1) * mask
    logdet = (logs * mask).sum()
    return torch.cat([x0, z1], 1), logdet


def step(f, p, x, mask):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        z, logdet = f(p, x, mask)
        loss = 0.5 * (z.float() ** 2).sum() - logdet.float()
    loss.backward()


def kernel_times(run):
    kernels = cuda_kernels(run, CALLS)
    ms = lambda ks: sum(k.device_time_total for k in ks) / CALLS / 1e3
    products = [k for k in kernels if any(s in k.key.lower() for s in ("gemm", "conv", "xmma", "cutlass", "sm90"))]
    count = sum(k.count for k in kernels) / CALLS
    return ms(kernels), count, ms(products)


p = parameters()
x = torch.randn(B, 2 * HALF, T, device="cuda")
lengths = torch.randint(T // 2, T + 1, (B,), device="cuda")
lengths[0] = T
mask = (torch.arange(T, device="cuda")[None, :] < lengths[:, None]).unsqueeze(1).float()
compiled = torch.compile(block)
ways = {"eager": lambda: step(block, p, x, mask), "compiled": lambda: step(compiled, p, x, mask)}
ways["graphed"] = graphed(ways["eager"])
print(f"one coupling block, B={B}, T={T}, bf16 autocast, forward + backward (gradients accumulate)")
for name, run in ways.items():
    total, count, products = kernel_times(run)
    print(f"{name:9s} {total:7.3f} ms GPU, {count:5.0f} kernels, {products:6.3f} ms in convolutions and GEMMs, "
          f"{total - products:6.3f} ms the rest")
