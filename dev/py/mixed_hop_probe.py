#!/usr/bin/env python3
"""Would runs on two frame grids, combined in time, align closer than runs on one? The probe that
led to `align`'s median across frame grids (75606b3, src/infer/align_export/time_ensemble.h); it
reads durations files only, so it needs no checkpoints, and it splits no short gap between the
medians as `align` does.

Each run's durations (align's durations/ folder, one per run, any hop)
become word edges in seconds, as align's default word tier placed them before 2026-12-07
(`--junction middle`; word_edges_probe.py's rule, with align's 40-ms pause threshold in that
run's frames); each word's start and end is then the median over the runs, and the result is scored as scripts/score_alignment.py does:

    python3 dev/py/mixed_hop_probe.py --corpus .parity/corpora/default \\
        --durations RUN1/aligned/durations RUN2/aligned/durations ...

Utterances that some run lacks, or whose runs disagree on the number of words, are left out.
docs/accuracy.md ("Runs of two hops together") has the figures. Needs numpy.
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


def edges_in_seconds(j):
    frame_s = j["hop_length"] / j["sampling_rate"]
    return wp.word_edges(wp.word_frames(j["tokens"], j["durations"]), frame_s)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", required=True, help="LJSpeech-layout folder with words/")
    ap.add_argument("--durations", required=True, nargs="+", help="align's durations/ folder of each run")
    a = ap.parse_args()
    errors, left_out = [], 0
    common = set.intersection(*(set(os.listdir(d)) for d in a.durations))
    for name in sorted(f for f in common if f.endswith(".json")):
        runs = []
        for d in a.durations:
            with open(os.path.join(d, name), encoding="utf-8") as f:
                runs.append(json.load(f))
        edges = [edges_in_seconds(j) for j in runs]
        if len({len(b) for b, _ in edges}) != 1:
            left_out += 1
            continue
        begin = list(np.median([b for b, _ in edges], axis=0))
        end = list(np.median([e for _, e in edges], axis=0))
        reference = sa.read_reference(os.path.join(a.corpus, "words", runs[0]["id"] + ".tsv"))
        sa.boundary_errors(reference, wp.labelled(runs[0], begin, end), errors, [])
    print(f"{len(a.durations)} runs: {sa.summary_line(sa.figures(errors))}"
          + (f" ({left_out} utterance(s) left out)" if left_out else ""))


if __name__ == "__main__":
    main()
