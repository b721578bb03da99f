#!/usr/bin/env python3
"""float32 error of Winograd F(m, 5) 1-D convolutions by evaluation points, at the WN shape.

Simulates src/models/winograd_conv1d.cpp's arithmetic in numpy: the transforms built from the
points as there (BT rows scaled so that their smallest entry is 1, G in float64), the input
transform, the products at each point and the output transform in float32; prints the largest
error against float64 relative to the output's largest magnitude (tests/models bound: 1e-5).
The simulation's summation order differs from the kernel's: F(4, 5) gives ~3.0e-6 here against
2.3e-6 measured by winograd_conv1d_dev.

    python3 dev/cpu/winograd_points.py [--channels 192] [--frames 900] [--seeds 2]
"""
import argparse

import numpy as np

TAPS = 5
POINT_SETS = {
    "F(4,5) 0 +-1 +-2 +-1/2 (the kernel's)": (4, [0, 1, -1, 2, -2, 0.5, -0.5]),
    "F(5,5) + 3/2": (5, [0, 1, -1, 2, -2, 0.5, -0.5, 1.5]),
    "F(5,5) + 3": (5, [0, 1, -1, 2, -2, 0.5, -0.5, 3]),
    "F(6,5) + +-3": (6, [0, 1, -1, 2, -2, 0.5, -0.5, 3, -3]),
    "F(6,5) + +-1/4": (6, [0, 1, -1, 2, -2, 0.5, -0.5, 0.25, -0.25]),
    "F(6,5) + +-3/2": (6, [0, 1, -1, 2, -2, 0.5, -0.5, 1.5, -1.5]),
    "F(6,5) + +-4/3": (6, [0, 1, -1, 2, -2, 0.5, -0.5, 4 / 3, -4 / 3]),
    "F(6,5) + +-3/4": (6, [0, 1, -1, 2, -2, 0.5, -0.5, 0.75, -0.75]),
}


def transforms(m, points):
    """BT [n, n], G [n, TAPS] (float64), AT [m, n] for the finite points plus infinity."""
    n = m + TAPS - 1
    v = np.zeros((n, n))
    for p, a in enumerate(points):
        v[p] = [a**j for j in range(n)]
    v[n - 1, n - 1] = 1.0
    c = np.linalg.inv(v)
    bt, g, at = np.zeros((n, n)), np.zeros((n, TAPS)), np.zeros((m, n))
    for p in range(n):
        col = c[:, p]
        scale = 1.0 / np.abs(col[np.abs(col) > 1e-9]).min()
        bt[p] = np.where(np.abs(col) < 1e-9, 0.0, col * scale)
        for k in range(TAPS):
            g[p, k] = (points[p] ** k if p < n - 1 else float(k == TAPS - 1)) / scale
        for i in range(m):
            at[i, p] = points[p] ** i if p < n - 1 else float(i == m - 1)
    return bt.astype(np.float32), g, at.astype(np.float32)


def error(m, points, channels, frames, seed):
    rng = np.random.default_rng(seed)
    n = m + TAPS - 1
    x = rng.standard_normal((channels, frames)).astype(np.float32)
    w = (rng.standard_normal((2 * channels, channels, TAPS)) / np.sqrt(TAPS * channels)).astype(np.float32)
    bt, g, at = transforms(m, points)
    tiles = (frames + m - 1) // m
    xp = np.pad(x.astype(np.float64), ((0, 0), (TAPS // 2, TAPS // 2 + m * tiles - frames + n)))
    want = sum(w[:, :, k].astype(np.float64) @ xp[:, k : k + frames] for k in range(TAPS))
    d = xp[:, np.arange(tiles)[:, None] * m + np.arange(n)[None, :]].astype(np.float32)  # [C, tiles, n]
    v = np.einsum("pj,cqj->pcq", bt, d).astype(np.float32)
    u = np.einsum("ock,pk->poc", w.astype(np.float64), g).astype(np.float32)
    prod = np.matmul(u, v)  # float32 [n, C_out, tiles]
    y = np.einsum("ip,poq->oqi", at, prod).reshape(2 * channels, -1)[:, :frames]
    return np.abs(y.astype(np.float64) - want).max() / np.abs(want).max()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--channels", type=int, default=192)
    ap.add_argument("--frames", type=int, default=900)
    ap.add_argument("--seeds", type=int, default=2)
    args = ap.parse_args()
    for name, (m, points) in POINT_SETS.items():
        worst = max(error(m, points, args.channels, args.frames, s) for s in range(args.seeds))
        mults = (m + TAPS - 1) / m
        print(f"{name:40s} {mults:.2f} multiplies/output  max |error| / max |y| {worst:.2e}")


if __name__ == "__main__":
    main()
