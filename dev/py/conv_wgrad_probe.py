# Probe: the k=5 convolution over time of the decoder's WN layers ([B, 192, 1, T] channels-last,
# 192 -> 384): cuDNN's fprop/dgrad/wgrad against matrix products over an im2col copy.
import torch, torch.nn.functional as F
from cuda_timing import timed_us
torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
torch.backends.cudnn.benchmark = True
dev = "cuda"
def t(f):
    return timed_us(f, n=40, warmup=5)
conv_bwd = torch.ops.aten.convolution_backward
for T in (300, 432):
  for dtype in (torch.float32, torch.bfloat16):
    B, C, K = 32, 192, 5
    x = torch.randn(B, C, 1, T, device=dev, dtype=dtype).contiguous(memory_format=torch.channels_last)
    w = torch.randn(2 * C, C, 1, K, device=dev, dtype=dtype).contiguous(memory_format=torch.channels_last)
    gy = torch.randn(B, 2 * C, 1, T, device=dev, dtype=dtype).contiguous(memory_format=torch.channels_last)
    args = ([1, 1], [0, 2], [1, 1], False, [0, 0], 1)
    r = {}
    r["cudnn fprop"] = t(lambda: F.conv2d(x, w, padding=(0, 2)))
    r["cudnn dgrad"] = t(lambda: conv_bwd(gy, x, w, None, *args, [True, False, False]))
    r["cudnn wgrad"] = t(lambda: conv_bwd(gy, x, w, None, *args, [False, True, False]))
    xr = x.permute(0, 2, 3, 1).reshape(B, T, C)
    gr = gy.permute(0, 2, 3, 1).reshape(B * T, 2 * C)
    def cols():
        xp = F.pad(xr, (0, 0, 2, 2))
        return xp.as_strided((B, T, K, C), ((T + 4) * C, C, C, 1)).reshape(B * T, K * C)
    cc = cols()
    r["im2col"] = t(cols)
    r["mm wgrad (cols given)"] = t(lambda: gr.t() @ cc)
    r["mm wgrad total"] = t(lambda: gr.t() @ cols())
    wm = w.permute(0, 2, 3, 1).reshape(2 * C, K * C)
    r["mm fprop (cols given)"] = t(lambda: cc @ wm.t())
    r["mm dgrad dcols"] = t(lambda: gr @ wm)
    # check the wgrad agrees with cuDNN
    ref = conv_bwd(gy, x, w, None, *args, [False, True, False])[1].float()
    mine = (gr.t() @ cc).float().view(2 * C, K, C).permute(0, 2, 1).unsqueeze(2)
    err = ((ref - mine).abs().max() / ref.abs().max()).item()
    flop = 2 * B * T * C * 2 * C * K
    print(f"T={T} {str(dtype):15s} rel.err {err:.2e}  " + "  ".join(f"{k}: {v:.1f}us" for k, v in r.items()))
    print(f"    wgrad TFLOPS cudnn {flop / r['cudnn wgrad'] / 1e6:.0f}, mm {flop / r['mm wgrad (cols given)'] / 1e6:.0f}")
