# Probe: the text encoder's convolutions ([B, C, T] float32, TF32) as cuDNN runs them against
# the same products written as batched GEMMs on the NCHW tensors, forward and backward.
# Question behind it: in the bf16 step's profile (docs/benchmarks.md "Profile") the encoder's
# 1x1 convolutions (attention projections) take ~1.3 ms a step on cuDNN's generic kernels and
# its kernel-3 convolutions ~2.75 ms with cuDNN's layout conversions around them. A 1x1
# convolution is W @ x[b] for every item b; a kernel-3 one the sum of three such products over
# time-shifted views of the padded input, which cuBLAS reads in place (leading dimension T + 2).
# In bf16 (third argument) a 1x1 convolution is also timed as one GEMM over [B * T, C] rows
# (`rows`: activations already [B, T, C], as an encoder in that layout would hold them).
# Prints per shape and form the GPU time of one forward + backward (input and weight gradients:
# kernel time under the profiler, mean of 10 calls), and the forms' largest difference from cuDNN's.
#   python3 dev/py/conv_gemm_probe.py [B T [float|bf16]]
import sys

import torch
import torch.nn.functional as F

from cuda_timing import cuda_kernels

torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
torch.backends.cudnn.benchmark = True
B = int(sys.argv[1]) if len(sys.argv) > 1 else 32
T = int(sys.argv[2]) if len(sys.argv) > 2 else 175
DTYPE = torch.bfloat16 if len(sys.argv) > 3 and sys.argv[3] == "bf16" else torch.float32


def cudnn(x, w):
    return F.conv1d(x, w, padding=w.size(2) // 2)


def gemm(x, w):
    """The convolution as batched products: W_k [Cout, Cin] broadcast over the batch (stride 0)."""
    k = w.size(2)
    if k == 1:
        return torch.matmul(w[:, :, 0], x)
    xp = F.pad(x, (k // 2, k // 2))
    y = torch.matmul(w[:, :, 0], xp[:, :, 0:T])
    for j in range(1, k):
        y = y + torch.matmul(w[:, :, j], xp[:, :, j:j + T])
    return y


def gemm_bmm(x, w):
    """As gemm, with explicit bmm/baddbmm on the expanded weight (no autograd-side adds)."""
    k = w.size(2)
    xp = F.pad(x, (k // 2, k // 2)) if k > 1 else x
    y = torch.bmm(w[:, :, 0].expand(B, -1, -1), xp[:, :, 0:T])
    for j in range(1, k):
        y = torch.baddbmm(y, w[:, :, j].expand(B, -1, -1), xp[:, :, j:j + T])
    return y


shapes = [  # name, Cin, Cout, kernel
    ("attention q/k/v/o", 192, 192, 1),
    ("proj_m", 192, 80, 1),
    ("FFN conv_1", 192, 768, 3),
    ("FFN conv_2", 768, 192, 3),
    ("duration conv", 256, 256, 3),
]


def kernel_us(f, calls=10):
    return sum(k.device_time_total for k in cuda_kernels(f, calls)) / calls


print(f"B={B} T={T} {'bf16' if DTYPE == torch.bfloat16 else 'float32 (TF32)'}, forward + backward, kernel time")
print("shape,form,us,max_abs_diff_vs_cudnn")
for name, cin, cout, k in shapes:
    torch.manual_seed(0)
    x = torch.randn(B, cin, T, device="cuda", dtype=DTYPE, requires_grad=True)
    w = (torch.randn(cout, cin, k, device="cuda", dtype=DTYPE) * cin ** -0.5).requires_grad_()
    gy = torch.randn(B, cout, T, device="cuda", dtype=DTYPE)
    # The same values as [B, T, C] rows, made before the timing: the layout an encoder would keep.
    x_rows = x.detach().transpose(1, 2).contiguous().requires_grad_()
    gy_rows = gy.transpose(1, 2).contiguous()
    forms = [("cudnn", cudnn), ("matmul", gemm), ("bmm", gemm_bmm)]
    if k == 1 and DTYPE == torch.bfloat16:
        forms.append(("rows", None))
    ref = None
    for form, f in forms:
        def step():
            if f is None:  # y [B, T, Cout] = x [B, T, Cin] W^T; compared in [B, C, T]
                y = F.linear(x_rows, w[:, :, 0])
                gx, gw = torch.autograd.grad(y, (x_rows, w), gy_rows)
                return y.transpose(1, 2), gx.transpose(1, 2), gw
            y = f(x, w)
            return (y,) + torch.autograd.grad(y, (x, w), gy)
        outs = step()
        if ref is None:
            ref = [o.detach().clone() for o in outs]
        diff = max((o.float() - r.float()).abs().max().item() for o, r in zip(outs, ref))
        us = kernel_us(step)
        print(f"{name},{form},{us:.1f},{diff:.2e}")
