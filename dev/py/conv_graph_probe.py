# Probe: which cuDNN engine runs the decoder's k=5 weight gradient ([B, 192, 1, T] channels-last,
# 192 -> 384), by mel length T, dtype, benchmark mode, and eager against CUDA-graph replay.
# Question behind it: the graphed bf16 step ran this wgrad in 2.6 ms/step on a cutlass kernel
# where the eager step took 1.3 ms on cuDNN's xmma wgrad (profiles of 2026-11-23).
import sys, torch
from torch.profiler import profile, ProfilerActivity
from cuda_timing import graphed, timed_us
torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
dev = "cuda"
conv_bwd = torch.ops.aten.convolution_backward
args = ([1, 1], [0, 2], [1, 1], False, [0, 0], 1)

def kernels(f):
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        f(); torch.cuda.synchronize()
    return ",".join(sorted({e.name[:40] for e in p.events() if e.device_type.name == "CUDA"}))

Ts = [int(t) for t in sys.argv[1:]] or [500, 504, 508, 512]
print("T,dtype,benchmark,mode,us,kernels")
for T in Ts:
  for dtype in (torch.float32, torch.bfloat16):
    B, C, K = 32, 192, 5
    x = torch.randn(B, C, 1, T, device=dev, dtype=dtype).contiguous(memory_format=torch.channels_last)
    w = torch.randn(2 * C, C, 1, K, device=dev, dtype=dtype).contiguous(memory_format=torch.channels_last)
    gy = torch.randn(B, 2 * C, 1, T, device=dev, dtype=dtype).contiguous(memory_format=torch.channels_last)
    wgrad = lambda: conv_bwd(gy, x, w, None, *args, [False, True, False])
    for bench in (False, True):
      torch.backends.cudnn.benchmark = bench
      wgrad()
      print(f"{T},{str(dtype)[6:]},{bench},eager,{timed_us(wgrad):.1f},{kernels(wgrad)}", flush=True)
      replay = graphed(wgrad)
      print(f"{T},{str(dtype)[6:]},{bench},graph,{timed_us(replay):.1f},{kernels(replay)}", flush=True)
