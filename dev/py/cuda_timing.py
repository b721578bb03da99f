# Shared by the dev/py probes: microseconds per call of f on the current CUDA stream.
import torch


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
