#!/usr/bin/env python3
"""The official Glow-TTS timed as `bench_inference` times monoflow (docs/design.md, "Inference"):
one sentence of 100 symbols to a ~1,800-frame mel, untrained weights of the config (base.json),
eval mode with the inverse 1x1 convolutions stored (`store_inverse()`), noise scale 0.667, the
length scale set (by bisection on the duration predictor's output) for the target frame count;
3 warm-up calls, then the median of the timed ones. The official code is imported from the
directory given (never part of this repository); its MAS extension (training only) is replaced by
a stub, and librosa and scipy, imported at start-up only, by shims/ where they are not installed.

    official_cpu_infer.py --official DIR [--config DIR/configs/base.json] [--calls 10]
        [--threads N] [--device cpu]

Prints one CSV line: frames,length_scale,ms (median),ms_min,ms_max,threads
"""
import argparse
import json
import os
import statistics
import sys
import time
import types


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--official", required=True, help="checkout of jaywalnut310/glow-tts")
    p.add_argument("--config", help="hparams JSON (default: OFFICIAL/configs/base.json)")
    p.add_argument("--symbols", type=int, default=100)
    p.add_argument("--frames", type=int, default=1800)
    p.add_argument("--calls", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: torch's default)")
    p.add_argument("--seed", type=int, default=1234)
    # len(text.symbols.symbols) of the official English set, as bench_inference's vocabulary;
    # importing text/ would need unidecode, which synthesis from ids does not use.
    p.add_argument("--n-vocab", type=int, default=148)
    p.add_argument("--device", default="cpu")
    args = p.parse_args()
    official = os.path.abspath(args.official)
    sys.path.insert(0, official)
    sys.modules.setdefault("monotonic_align", types.ModuleType("monotonic_align"))  # training only
    # Appended, so an installed librosa or scipy comes first; the stand-ins fill in where missing.
    sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "shims"))
    import torch

    import models
    if args.threads:
        torch.set_num_threads(args.threads)
    with open(args.config or os.path.join(official, "configs", "base.json")) as f:
        hps = json.load(f)
    torch.manual_seed(args.seed)
    n_vocab = args.n_vocab + int(hps["data"].get("add_blank", False))
    model = models.FlowGenerator(n_vocab=n_vocab, out_channels=hps["data"]["n_mel_channels"], **hps["model"])
    model = model.to(args.device).eval()
    model.decoder.store_inverse()
    g = torch.Generator().manual_seed(args.seed)
    x = torch.randint(1, n_vocab, (1, args.symbols), generator=g).to(args.device)
    x_lengths = torch.tensor([args.symbols], device=args.device)

    def sync():
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()

    with torch.no_grad():
        _, _, logw, x_mask = model.encoder(x, x_lengths)

        def frames(scale):
            return int(torch.ceil(torch.exp(logw) * x_mask * scale).sum())

        lo, hi = 1e-3, 1.0
        while frames(hi) < args.frames and hi < 1e6:
            hi *= 2
        for _ in range(40):
            mid = 0.5 * (lo + hi)
            if frames(mid) < args.frames:
                lo = mid
            else:
                hi = mid
        scale = lo if abs(frames(lo) - args.frames) < abs(frames(hi) - args.frames) else hi
        ms = []
        out_frames = 0
        for i in range(args.warmup + args.calls):
            sync()
            t0 = time.perf_counter()
            (y, *_), *_ = model(x, x_lengths, gen=True, noise_scale=0.667, length_scale=scale)
            sync()
            if i >= args.warmup:
                ms.append(1000 * (time.perf_counter() - t0))
            out_frames = y.size(2)
    print("frames,length_scale,ms,ms_min,ms_max,threads")
    print(f"{out_frames},{scale:.4f},{statistics.median(ms):.3f},{min(ms):.3f},{max(ms):.3f},{torch.get_num_threads()}")


if __name__ == "__main__":
    main()
