# Probe: the text encoder's FFN (kernel-3 convolutions 192 -> 768 -> 192 with ReLU, dropout and
# the [B, 1, T] mask, TF32, forward and backward) with NCHW activations ([B, C, T] contiguous,
# what the model runs) against channels-last ones ([B, T, C] memory seen as [B, C, T], weights
# likewise). The bf16 step's profile shows cuDNN converting layouts around these convolutions
# (nchwToNhwc / nhwcToNchw, 0.95 ms a step, docs/benchmarks.md "Profile"). Question: does
# keeping the activations channels-last remove that cost without adding another?
# Prints per layout the GPU time of one forward and backward (kernel time under the profiler,
# mean of 5), the share of it in layout conversions, and the kernels that take the most.
#   python3 dev/py/ffn_layout_probe.py [B T]
import sys

import torch
from torch.profiler import ProfilerActivity, profile

torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
torch.backends.cudnn.benchmark = True
B = int(sys.argv[1]) if len(sys.argv) > 1 else 32
T = int(sys.argv[2]) if len(sys.argv) > 2 else 180
C, F, CALLS = 192, 768, 5


def channels_last(t):
    """t [N, C, T] with [N, T, C] memory."""
    return t.transpose(1, 2).contiguous().transpose(1, 2)


def tensors(last):
    torch.manual_seed(0)
    w1, w2 = torch.randn(F, C, 3, device="cuda") * 0.05, torch.randn(C, F, 3, device="cuda") * 0.05
    x = torch.randn(B, C, T, device="cuda")
    if last:
        w1, w2, x = channels_last(w1), channels_last(w2), channels_last(x)
    b1, b2 = torch.zeros(F, device="cuda"), torch.zeros(C, device="cuda")
    mask = torch.ones(B, 1, T, device="cuda")
    return [t.requires_grad_() for t in (w1, w2, b1, b2, x)] + [mask]


def ffn(w1, w2, b1, b2, x, mask):
    h = torch.relu(torch.nn.functional.conv1d(x * mask, w1, b1, padding=1))
    h = torch.nn.functional.dropout(h, 0.1)
    y = torch.nn.functional.conv1d(h * mask, w2, b2, padding=1) * mask
    y.sum().backward()


for last in (False, True):
    args = tensors(last)
    for _ in range(20):
        ffn(*args)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(CALLS):
            ffn(*args)
        torch.cuda.synchronize()
    kernels = [k for k in prof.key_averages() if k.device_type.name == "CUDA"]
    ms = lambda ks: sum(k.device_time_total for k in ks) / CALLS / 1e3
    conversions = [k for k in kernels if "nchwToNhwc" in k.key or "nhwcToNchw" in k.key]
    print(f"{'channels-last' if last else 'NCHW'}: {ms(kernels):.3f} ms of GPU time a call, "
          f"{ms(conversions):.3f} ms of it layout conversions (B={B}, T={T})")
    for k in sorted(kernels, key=lambda k: -k.device_time_total)[:8]:
        print(f"  {k.device_time_total / CALLS / 1e3:.3f} ms {k.count // CALLS:3d}x  {k.key[:88]}")
