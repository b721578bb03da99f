#!/usr/bin/env python3
"""Would the runs of the alignment recipe agree better with each other's offsets taken out? A
probe, not part of `align`.

`align` given several checkpoints takes, token by token, the median of the runs' boundaries
(src/infer/align_export/ensemble.h), and every run places its boundaries with an offset of its
own. Here each run's offset is measured against the runs' per-boundary median, over every inner
token boundary of the corpus (the mean of the differences clipped to +-3 frames, so a fraction of
a frame), taken out down to the runs' median offset, and the boundaries combined again; the word
tier is rebuilt as align's word_spans.cpp does (word_edges_probe.py's rule) and scored as
scripts/score_alignment.py does:

    python3 dev/py/ensemble_offsets_probe.py --corpus data/flite-corpus \\
        --durations .parity-work/recipe/flite/s{1,2,3}-ckpt_000002500/aligned/durations

Variants: shipped (the lower median; touching words split at the middle frame, as align's
default before 2026-12-07, `--junction middle`); centre (the same boundaries, touching words
split at their exact middle, as `--junction centre`); aligned-median and aligned-mean (the runs' offsets out, then the median or
the mean of the boundaries, a fraction of a frame; split at the exact middle). --per-utterance
measures each run's offset in each utterance instead. docs/accuracy.md ("Other shapes of the
aligner") has the figures. Needs numpy.
"""
import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
sys.path.insert(0, HERE)
import score_alignment as sa  # noqa: E402
import word_edges_probe as wp  # noqa: E402

VARIANTS = ("shipped", "centre", "aligned-median", "aligned-mean")
CLIP_FRAMES = 3


def word_tier(j, durations, exact_middle):
    """(label, start s, end s) of each word from token durations (whole or fractional frames)."""
    frames = wp.word_frames(j["tokens"], list(durations))
    return wp.labelled(j, *wp.word_edges(frames, j["hop_length"] / j["sampling_rate"], exact_middle))


def run_offsets(boundaries):
    """Each run's offset (frames) from the per-boundary median: [runs, boundaries] -> [runs]."""
    d = boundaries - np.median(boundaries, axis=0)
    return np.clip(d, -CLIP_FRAMES, CLIP_FRAMES).mean(axis=1)


def combined(cum, variant, offsets):
    """One utterance's cumulative token ends ([runs, tokens]) combined into one row."""
    if variant in ("shipped", "centre"):
        b = np.sort(cum, axis=0)[(len(cum) - 1) // 2]  # the lower median, as median_durations
    else:
        c = cum - (offsets - np.median(offsets))[:, None]
        b = np.median(c, axis=0) if variant == "aligned-median" else c.mean(axis=0)
    b[-1] = cum[0, -1]  # every run ends at the utterance's last frame
    return np.diff(np.concatenate([[0.0], b]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", required=True, help="LJSpeech-layout folder with words/")
    ap.add_argument("--durations", nargs="+", required=True, help="align's durations/ folder of each run")
    ap.add_argument("--per-utterance", action="store_true", help="each run's offset in each utterance")
    a = ap.parse_args()
    utterances = []
    for name in sorted(f for f in os.listdir(a.durations[0]) if f.endswith(".json")):
        paths = [os.path.join(d, name) for d in a.durations]
        if not all(os.path.exists(p) for p in paths):
            continue
        runs = []
        for p in paths:
            with open(p, encoding="utf-8") as f:
                runs.append(json.load(f))
        utterances.append((runs[0], np.array([np.cumsum(r["durations"]) for r in runs], dtype=float)))
    offsets = run_offsets(np.concatenate([cum[:, :-1] for _, cum in utterances], axis=1))
    print("runs' offsets (frames): " + " ".join(f"{o:+.2f}" for o in offsets))
    errors = {v: [] for v in VARIANTS}
    for j, cum in utterances:
        reference = sa.read_reference(os.path.join(a.corpus, "words", j["id"] + ".tsv"))
        here = run_offsets(cum[:, :-1]) if a.per_utterance else offsets
        for v in VARIANTS:
            tier = word_tier(j, combined(cum, v, here), exact_middle=v != "shipped")
            sa.boundary_errors(reference, tier, errors[v], [])  # same-text pairs only
    for v in VARIANTS:
        print(f"{v:15s} {sa.summary_line(sa.figures(errors[v]))}")


if __name__ == "__main__":
    main()
