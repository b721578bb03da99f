#!/usr/bin/env python3
"""Do the blanks next to a word belong to it? A probe, not part of `align`.

align's word tier (src/infer/align_export/word_spans.cpp) gives each word the blank right before
its first spoken token and the blank right after its last. Here that rule is varied, each run's
word tier rebuilt from its durations/<id>.json (word_edges_probe.py's edges: a boundary half a
frame before its frame, gaps under align's pause threshold split at their middle), the runs
combined as align combines runs of different frame grids (the median of each word edge in
seconds, words whose median gap is under 40 ms touching at its middle), and scored as
scripts/score_alignment.py does:

    python3 dev/py/word_blanks_probe.py --corpus data/kal-corpus \\
        --durations .parity-work/recipe/kal/{,v1-}s{1,2,3}-ckpt_000002500/aligned/durations

Variants: shipped (align's rule); punct, punct-start, punct-end (a word next to punctuation, i.e.
a separator run holding a token that is neither blank, space nor spoken, keeps its blank on that
side, both or one, out); long, long-start, long-end (a blank of align's pause length or longer,
40 ms, is left out of its word). docs/accuracy.md ("Pauses the text does not mark") has the
figures.
"""
import argparse
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
sys.path.insert(0, HERE)
import score_alignment as sa  # noqa: E402
import word_edges_probe as wp  # noqa: E402

VARIANTS = ("shipped", "punct", "punct-start", "punct-end", "long", "long-start", "long-end")


def word_frames(tokens, durations, variant, frame_s):
    """[begin, end) frames of each word under `variant` (the module docstring)."""
    starts, frame = [], 0
    for d in durations:
        starts.append(frame)
        frame += d
    groups, current = [], []
    for i, token in enumerate(tokens):
        if token == " ":
            if current:
                groups.append(current)
            current = []
        elif wp.spoken(token):
            current.append(i)
    if current:
        groups.append(current)

    def punctuation_between(a, b):
        return any(t not in ("<blank>", " ") and not wp.spoken(t) for t in tokens[a + 1:b])

    limit = wp.min_pause_frames(frame_s)
    words = []
    for g, group in enumerate(groups):
        first, last = group[0], group[-1]
        lead = durations[first - 1] if first > 0 and tokens[first - 1] == "<blank>" else 0
        tail = durations[last + 1] if last + 1 < len(tokens) and tokens[last + 1] == "<blank>" else 0
        before = groups[g - 1][-1] if g > 0 else -1
        after = groups[g + 1][0] if g + 1 < len(groups) else len(tokens)
        kind, _, side = variant.partition("-")
        if kind == "punct":
            lead = 0 if side != "end" and punctuation_between(before, first) else lead
            tail = 0 if side != "start" and punctuation_between(last, after) else tail
        elif kind == "long":
            lead = 0 if side != "end" and lead >= limit else lead
            tail = 0 if side != "start" and tail >= limit else tail
        words.append([starts[first] - lead, starts[last] + durations[last] + tail])
    return words


def combined_words(runs, variant):
    """The runs' word edges (s), each the median over the runs; short gaps joined at their middle."""
    tiers = []
    for j in runs:
        frame_s = j["hop_length"] / j["sampling_rate"]
        tiers.append(wp.word_edges(word_frames(j["tokens"], j["durations"], variant, frame_s), frame_s))
    n = len(tiers[0][0])
    if any(len(begin) != n for begin, _ in tiers):
        return None
    begin = [statistics.median(t[0][k] for t in tiers) for k in range(n)]
    end = [statistics.median(t[1][k] for t in tiers) for k in range(n)]
    for k in range(n - 1):
        if begin[k + 1] - end[k] < wp.MIN_PAUSE_S:
            end[k] = begin[k + 1] = (end[k] + begin[k + 1]) / 2
    return wp.labelled(runs[0], begin, end)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", required=True, help="an LJSpeech folder with words/<id>.tsv")
    ap.add_argument("--durations", nargs="+", required=True, help="each run's align durations/ folder")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    args = ap.parse_args()
    for variant in args.variants.split(","):
        if variant not in VARIANTS:
            sys.exit(f"word_blanks_probe: unknown variant {variant!r} (one of {', '.join(VARIANTS)})")
        matched, other = [], []
        words_dir = os.path.join(args.corpus, "words")
        for name in sorted(os.listdir(words_dir)):
            paths = [os.path.join(d, name[:-4] + ".json") for d in args.durations]
            if not name.endswith(".tsv") or not all(os.path.exists(p) for p in paths):
                continue
            runs = []
            for p in paths:
                with open(p, encoding="utf-8") as f:
                    runs.append(json.load(f))
            hypothesis = combined_words(runs, variant)
            if hypothesis is not None:
                sa.boundary_errors(sa.read_reference(os.path.join(words_dir, name)), hypothesis, matched, other)
        print(f"{variant:12s} {sa.summary_line(sa.figures(matched))}")


if __name__ == "__main__":
    main()
