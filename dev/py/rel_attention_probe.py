# Probe: what the text encoder's relative-position attention costs per layer (forward + backward,
# CUDA-graph replay, float32 with TF32 as the step runs it under bf16 autocast too), as the
# official attentions.py composes it, against a lower bound for a fused version: the same
# three batched products, one softmax and one dropout, with the relative terms as [l, 2w+1]
# band products instead of [l, 2l-1] ones padded and reshaped to absolute positions.
# Question behind it: is a fused relative attention worth writing (issue 10, item 4)?
#   python3 rel_attention_probe.py [B] [l]
import sys, torch
import torch.nn.functional as F
from cuda_timing import graphed, timed_us
torch.backends.cuda.matmul.allow_tf32 = True
dev = "cuda"
B = int(sys.argv[1]) if len(sys.argv) > 1 else 32
L = int(sys.argv[2]) if len(sys.argv) > 2 else 184
H, D, W, P = 2, 96, 4, 0.1


def rel_to_abs(x):
    b, h, l, _ = x.size()
    x = F.pad(x, [0, 1])
    x = F.pad(x.view(b, h, l * 2 * l), [0, l - 1])
    return x.view(b, h, l + 1, 2 * l - 1)[:, :, :l, l - 1:]


def abs_to_rel(x):
    b, h, l, _ = x.size()
    x = F.pad(x, [0, l - 1])
    x = F.pad(x.view(b, h, l * l + l * (l - 1)), [l, 0])
    return x.view(b, h, l, 2 * l)[:, :, :, 1:]


def rel_emb(e, l):
    pad = max(l - (W + 1), 0)
    start = max(W + 1 - l, 0)
    return F.pad(e, [0, 0, pad, pad])[:, start:start + 2 * l - 1]


def composite(q, k, v, ek, ev, mask):
    s = q @ k.transpose(-2, -1) / D ** 0.5
    s = s + rel_to_abs(q @ rel_emb(ek, L).unsqueeze(0).transpose(-2, -1)) / D ** 0.5
    s = s.masked_fill(mask == 0, -1e4)
    p = F.dropout(torch.softmax(s, -1), P, True)
    return p @ v + abs_to_rel(p) @ rel_emb(ev, L).unsqueeze(0)


def band_lower_bound(q, k, v, ek, ev, mask):
    # Not the same function: the band terms are stand-ins of the right size (a broadcast add
    # and a [l, 2w+1] slice), to bound what one band kernel each way could cost.
    s = q @ k.transpose(-2, -1) / D ** 0.5
    s = s + (q @ ek.transpose(-2, -1)).sum(-1, keepdim=True)
    s = s.masked_fill(mask == 0, -1e4)
    p = F.dropout(torch.softmax(s, -1), P, True)
    return p @ v + p[..., : 2 * W + 1] @ ev


def products_only(q, k, v, ek, ev, mask):
    s = q @ k.transpose(-2, -1)
    return s @ v


q, k, v = (torch.randn(B, H, L, D, device=dev, requires_grad=True) for _ in range(3))
ek, ev = (torch.randn(1, 2 * W + 1, D, device=dev, requires_grad=True) for _ in range(2))
lengths = torch.randint(L // 2, L + 1, (B,), device=dev)
x_mask = (torch.arange(L, device=dev)[None] < lengths[:, None]).float()
mask = (x_mask[:, None, :, None] * x_mask[:, None, None, :])
gout = torch.randn(B, H, L, D, device=dev)
print(f"B={B} l={L} heads={H} d={D} window={W}: us per layer, forward + backward, graph replay")
for name, f in (("composite", composite), ("band lower bound", band_lower_bound), ("products only", products_only)):
    def step(f=f):
        for t in (q, k, v, ek, ev):
            t.grad = None
        f(q, k, v, ek, ev, mask).backward(gout)
    print(f"{name:18s} {timed_us(graphed(step), n=100):8.1f}")
