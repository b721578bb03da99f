# Shared by the dev/py probes: microseconds per call of f on the current CUDA stream, the CUDA
# kernels of calls of f under the profiler, and f recorded as a CUDA graph.
import torch
from torch.profiler import ProfilerActivity, profile


def timed_us(f, n=30, warmup=3):
    for _ in range(warmup):
        f()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(True), torch.cuda.Event(True)
    start.record()
    for _ in range(n):
        f()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / n * 1000


def cuda_kernels(f, calls=10, warmup=3):
    """The profiler's averages of the CUDA kernels that `calls` calls of f ran (after `warmup`
    calls); device_time_total / calls is a kernel's time per call."""
    for _ in range(warmup):
        f()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            f()
        torch.cuda.synchronize()
    return [k for k in prof.key_averages() if k.device_type.name == "CUDA"]


def graphed(f):
    """f recorded as a CUDA graph (after one call on a side stream, as capture wants); returns
    the graph's replay."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        f()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        f()
    return g.replay
