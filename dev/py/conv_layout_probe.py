# Probe: the decoder's k=5 convolution ([B, 192, T] -> 384 channels, channels-last) as cuDNN
# sees it in two equal forms: time as the width ([B, C, 1, T], kernel 1x5, what the model runs)
# and time as the height ([B, C, T, 1], kernel 5x1). In channels-last memory both are the same
# bytes (B, T, C), so switching is a free view; cuDNN picks its engines per form, though.
# Question behind it: the 1x5 form's weight gradient falls on a 2-4x slower engine in narrow
# length bands (bf16 around B x T = 16,384; conv_graph_probe.py). Does the 5x1 form escape the
# band, and is it as fast elsewhere? Prints the forward, data-gradient and weight-gradient times
# (graph replays, benchmark mode) per form, length and dtype, and the forms' largest difference.
import sys, torch
from cuda_timing import graphed, timed_us
torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
torch.backends.cudnn.benchmark = True
conv = torch.ops.aten.convolution
conv_bwd = torch.ops.aten.convolution_backward

B = int(sys.argv[1]) if len(sys.argv) > 1 else 32
Ts = [int(t) for t in sys.argv[2:]] or [256, 384, 448, 504, 512, 520, 576, 768, 1024]
print("B,T,dtype,form,fwd_us,dgrad_us,wgrad_us,max_rel_diff")
for T in Ts:
  for dtype in (torch.float32, torch.bfloat16):
    C, K = 192, 5
    cl = torch.channels_last
    x = torch.randn(B, C, 1, T, device="cuda", dtype=dtype).contiguous(memory_format=cl)
    w = torch.randn(2 * C, C, 1, K, device="cuda", dtype=dtype).contiguous(memory_format=cl)
    gy = torch.randn(B, 2 * C, 1, T, device="cuda", dtype=dtype).contiguous(memory_format=cl)
    forms = {
        "1xK": (x, w, gy, [0, 2]),
        # The same bytes, time as the height: views, no copies.
        "Kx1": (x.transpose(2, 3), w.transpose(2, 3), gy.transpose(2, 3), [2, 0]),
    }
    results = {}
    for name, (xf, wf, gf, pad) in forms.items():
      args = ([1, 1], pad, [1, 1], False, [0, 0], 1)
      fwd = lambda: conv(xf, wf, None, *args)
      dgrad = lambda: conv_bwd(gf, xf, wf, None, *args, [True, False, False])[0]
      wgrad = lambda: conv_bwd(gf, xf, wf, None, *args, [False, True, False])[1]
      out = wgrad().float()
      results[name] = out if name == "1xK" else out.transpose(2, 3)
      times = [timed_us(graphed(f)) for f in (fwd, dgrad, wgrad)]
      diff = ((results[name] - results["1xK"]).abs().max() / results["1xK"].abs().max()).item()
      print(f"{B},{T},{str(dtype)[6:]},{name}," + ",".join(f"{t:.1f}" for t in times) + f",{diff:.2e}", flush=True)
