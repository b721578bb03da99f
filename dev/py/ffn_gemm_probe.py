# Probe: the text encoder's FFN (kernel-3 convolutions 192 -> 768 -> 192 with ReLU, dropout and
# the mask, TF32, forward and backward) as the model runs it ([B, C, T] activations, cuDNN, which
# converts layouts around each convolution) against the same arithmetic on [B, T, C] activations
# where a kernel-3 convolution is one GEMM: the padded input's three-frame windows ([B, T, 3 C],
# `unfold`) times the weight seen as [C_out, 3 C_in] (`linear`), the mask a [B, T, 1] broadcast.
# ffn_layout_probe.py showed that channels-last memory under cuDNN does not pay by itself; the
# question here is whether plain GEMMs over [B, T, C] do, before the encoder is rewritten for it.
# Prints per variant the GPU time of one forward and backward (kernel time under the profiler,
# mean of 5 calls after 20), its kernel count, and the largest kernels; and checks that both
# variants give the same output and gradients (TF32 tolerance).
#   python3 dev/py/ffn_gemm_probe.py [B T]
import sys

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
torch.backends.cudnn.benchmark = True
B = int(sys.argv[1]) if len(sys.argv) > 1 else 32
T = int(sys.argv[2]) if len(sys.argv) > 2 else 180
C, FILTER, CALLS = 192, 768, 5
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def inputs():
    torch.manual_seed(0)
    w1 = torch.randn(FILTER, C, 3, device=DEVICE) * 0.05
    w2 = torch.randn(C, FILTER, 3, device=DEVICE) * 0.05
    b1, b2 = torch.randn(FILTER, device=DEVICE) * 0.1, torch.randn(C, device=DEVICE) * 0.1
    x = torch.randn(B, C, T, device=DEVICE)
    lengths = torch.randint(T // 2, T + 1, (B,), device=DEVICE)
    lengths[0] = T
    mask = (torch.arange(T, device=DEVICE)[None, :] < lengths[:, None]).float()  # [B, T]
    return w1, w2, b1, b2, x, mask


def ffn_bct(w1, w2, b1, b2, x, mask):
    """What the model runs: [B, C, T], cuDNN."""
    m = mask[:, None, :]
    h = torch.relu(F.conv1d(x * m, w1, b1, padding=1))
    return F.conv1d(h * m, w2, b2, padding=1) * m


def conv3_btc(x, w, b):
    """x [B, T, C_in] -> [B, T, C_out]: one GEMM over the three-frame windows."""
    windows = F.pad(x, (0, 0, 1, 1)).unfold(1, 3, 1)  # [B, T, C_in, 3], [b, t, c, k] = x[b, t + k - 1, c]
    return F.linear(windows.reshape(x.size(0), x.size(1), -1), w.reshape(w.size(0), -1), b)


def ffn_btc(w1, w2, b1, b2, x, mask):
    m = mask[:, :, None]
    h = torch.relu(conv3_btc(x * m, w1, b1))
    return conv3_btc(h * m, w2, b2) * m


def ffn_bct_via_btc(w1, w2, b1, b2, x, mask):
    """[B, C, T] in and out (the model's interface), [B, T, C] GEMMs inside: two transposes a call."""
    return ffn_btc(w1, w2, b1, b2, x.transpose(1, 2).contiguous(), mask).transpose(1, 2).contiguous()


def run(variant, args, grad_out):
    out = variant(*args)
    out.backward(grad_out)
    return out


def measure(name, variant, args, grad_out):
    for _ in range(20):
        run(variant, args, grad_out)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(CALLS):
            run(variant, args, grad_out)
        torch.cuda.synchronize()
    kernels = [k for k in prof.key_averages() if k.device_type.name == "CUDA"]
    total = sum(k.device_time_total for k in kernels) / CALLS / 1e3
    count = sum(k.count for k in kernels) // CALLS
    print(f"{name}: {total:.3f} ms of GPU time a forward and backward, {count} kernels (B={B}, T={T})")
    for k in sorted(kernels, key=lambda k: -k.device_time_total)[:6]:
        print(f"  {k.device_time_total / CALLS / 1e3:.3f} ms {k.count // CALLS:3d}x  {k.key[:88]}")
    return total


w1, w2, b1, b2, x, mask = inputs()
bct = [t.clone().requires_grad_() for t in (w1, w2, b1, b2, x)] + [mask]
btc = [t.clone().requires_grad_() for t in (w1, w2, b1, b2)] + [x.transpose(1, 2).contiguous().requires_grad_(), mask]
g = torch.randn(B, C, T, device=DEVICE)
out_bct = run(ffn_bct, bct, g)
out_btc = run(ffn_btc, btc, g.transpose(1, 2).contiguous())
scale = out_bct.abs().max().item()
print(f"output: max |difference| {(out_bct - out_btc.transpose(1, 2)).abs().max().item() / scale:.1e} of its range")
for label, a, b in (("w1", bct[0], btc[0]), ("w2", bct[1], btc[1]), ("b1", bct[2], btc[2]), ("b2", bct[3], btc[3])):
    print(f"grad {label}: max |difference| {(a.grad - b.grad).abs().max().item() / a.grad.abs().max().item():.1e} of its range")
print(f"grad x: max |difference| "
      f"{(bct[4].grad - btc[4].grad.transpose(1, 2)).abs().max().item() / bct[4].grad.abs().max().item():.1e} of its range")
for t in bct[:5] + btc[:5]:
    t.grad = None
base = measure("[B, C, T], cuDNN (the model)", ffn_bct, bct, g)
gemm = measure("[B, T, C], unfold + linear", ffn_btc, btc, g.transpose(1, 2).contiguous())
inside = measure("[B, C, T] in and out, [B, T, C] GEMMs inside", ffn_bct_via_btc, bct, g)
print(f"ratios against the model: {base / gemm:.2f}x ([B, T, C] throughout), {base / inside:.2f}x (GEMMs inside)")
