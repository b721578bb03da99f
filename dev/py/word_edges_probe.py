#!/usr/bin/env python3
"""How far can a rule applied to `align`'s word boundaries go? A probe, not part of `align`.

Rebuilds align's word tier from its durations/<id>.json (the same rules as
src/infer/align_export/word_spans.cpp with the defaults before 2026-12-07: each word with the
blanks around it, gaps under 4 frames split at their middle rounded down (`--junction middle`),
a boundary half a frame before its frame), then moves
boundaries to where the audio falls silent and scores every variant against the voice's word
timings as scripts/score_alignment.py does (its boundary_errors):

    python3 dev/py/word_edges_probe.py --corpus data/flite-corpus \
        --durations .parity-work/recipe/flite/final/aligned/durations [--below-db 35] [--shifts]

Silence: 5-ms windows every 2.5 ms whose energy lies more than --below-db under the utterance's
95th percentile, 10 ms of them in a row. Variants: shipped (no move); ends (a word's end to the
silence onset nearest to it within half a mel window); ends+touching (and, where the words
touch, the next word's start with it: a stop's closure goes to the word it opens); pause-ends
(only the ends before a pause). Half a mel window is win_length / 2 samples: the durations
files say win_length since 2026-12-05; for older ones give the training config's data.win_length
with --win-length (default 1,024; configs/aligner.yaml's is 512 since 4d88817, the figures in
docs/accuracy.md are of 1,024-sample runs). With --shifts, also the best that one constant shift of every
boundary can do, chosen with the references (an oracle: no rule that does not see them can do
better by shifting): the shift, from -12 to +12 ms in 0.5 ms steps, of the highest share within
25 ms and that of the lowest median. docs/accuracy.md ("Word edges on the silence", "The best
constant shift") has the figures. Needs numpy.
"""
import argparse
import json
import math
import os
import sys
import wave

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import score_alignment as sa  # noqa: E402

VARIANTS = ("shipped", "ends", "ends+touching", "pause-ends")
MIN_PAUSE_S = 0.040  # align's --min-pause-ms default
BLOCK_S, WINDOW_S, MIN_SILENCE_S = 0.0025, 0.005, 0.010


def spoken(token):
    return token != "<blank>" and (token.isalnum() or ord(token[0]) >= 0x80 or token.startswith("@"))


def word_frames(tokens, durations):
    """[begin, end) frames of each word: its spoken tokens with the blank before and after."""
    words, frame, current = [], 0, None
    for i, (token, d) in enumerate(zip(tokens, durations)):
        if token == " ":
            if current:
                words.append(current)
            current = None
        elif spoken(token):
            if current is None:
                lead = durations[i - 1] if i > 0 and tokens[i - 1] == "<blank>" else 0
                current = [frame - lead, frame]
            tail = durations[i + 1] if i + 1 < len(tokens) and tokens[i + 1] == "<blank>" else 0
            current[1] = frame + d + tail
        frame += d
    if current:
        words.append(current)
    return words


def words_of(text):
    out = []
    for w in text.split():
        w = w.strip("".join(chr(c) for c in range(0x80) if not chr(c).isalnum()))
        if any(c.isalnum() or ord(c) >= 0x80 for c in w):
            out.append(w)
    return out


def silence(path, below_db):
    with wave.open(path) as w:
        rate = w.getframerate()
        x = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16).astype(np.float64) / 32768.0
    hop, half = int(round(BLOCK_S * rate)), int(round(WINDOW_S * rate)) // 2
    db = np.array([10 * np.log10(np.mean(x[max(0, c - half):c + half] ** 2) + 1e-12)
                   for c in range(hop // 2, len(x), hop)])
    return db < np.percentile(db, 95) - below_db


def silence_onsets(silent, lo_s, hi_s):
    run = int(round(MIN_SILENCE_S / BLOCK_S))
    return [j * BLOCK_S for j in range(max(1, int(lo_s / BLOCK_S)), min(len(silent) - run, int(hi_s / BLOCK_S) + 1))
            if silent[j:j + run].all() and not silent[j - 1]]


def min_pause_frames(frame_s):
    """align's pause threshold in frames of frame_s seconds, rounded as align rounds it (4 at hop 256)."""
    return math.ceil(MIN_PAUSE_S / frame_s - 1e-9)


def word_edges(frames, frame_s, exact_middle=False):
    """Each word's start and end (s): a boundary half a frame before its frame, and words whose
    gap is under min_pause_frames touching at its middle (rounded down to a frame, as `--junction
    middle`, or exactly, as `--junction centre`, align's default since 2026-12-07)."""
    begin = [(b - 0.5) * frame_s for b, _ in frames]
    end = [(e - 0.5) * frame_s for _, e in frames]
    min_pause = min_pause_frames(frame_s)
    for i in range(len(frames) - 1):
        gap = frames[i + 1][0] - frames[i][1]
        if gap < min_pause:
            end[i] = begin[i + 1] = (frames[i][1] + (gap / 2 if exact_middle else gap // 2) - 0.5) * frame_s
    return begin, end


def labelled(j, begin, end):
    """(label, start s, end s) of each word; numbers where the text's words do not match."""
    labels = words_of(j["text"])
    if len(labels) != len(begin):
        labels = [str(i) for i in range(len(begin))]
    return list(zip(labels, begin, end))


def utterance_words(j, silent, variant, win_length):
    frame_s = j["hop_length"] / j["sampling_rate"]
    reach_s = j.get("win_length", win_length) / 2 / j["sampling_rate"]  # half of the mel window
    frames = word_frames(j["tokens"], j["durations"])
    begin, end = word_edges(frames, frame_s)
    for i in range(len(frames) - 1):
        pause = frames[i + 1][0] - frames[i][1] >= min_pause_frames(frame_s)
        if variant == "shipped" or (variant == "pause-ends" and not pause):
            continue
        onsets = silence_onsets(silent, end[i] - reach_s, end[i] + reach_s)
        if onsets:
            end[i] = min(onsets, key=lambda t: abs(t - end[i]))
            if variant == "ends+touching" and not pause:
                begin[i + 1] = end[i]
    return labelled(j, begin, end)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", required=True, help="LJSpeech-layout folder with wavs/ and words/")
    ap.add_argument("--durations", required=True, help="align's durations/ folder")
    ap.add_argument("--below-db", type=float, default=35.0)
    ap.add_argument("--win-length", type=int, default=1024, help="the run's data.win_length (samples), for durations files that do not say it")
    ap.add_argument("--shifts", action="store_true", help="also the best constant shift (see above)")
    a = ap.parse_args()
    errors = {v: [] for v in VARIANTS}
    for name in sorted(f for f in os.listdir(a.durations) if f.endswith(".json")):
        with open(os.path.join(a.durations, name), encoding="utf-8") as f:
            j = json.load(f)
        reference = sa.read_reference(os.path.join(a.corpus, "words", j["id"] + ".tsv"))
        silent = silence(os.path.join(a.corpus, "wavs", j["id"] + ".wav"), a.below_db)
        for v in VARIANTS:
            sa.boundary_errors(reference, utterance_words(j, silent, v, a.win_length), errors[v], [])  # same-text pairs only
    for v in VARIANTS:
        print(f"{v:14s} {sa.summary_line(sa.figures(errors[v]))}")
    if a.shifts:
        e = np.array(errors["shipped"])
        figures = {s_ms: sa.figures(list(e + s_ms / 1000)) for s_ms in np.arange(-12, 12.25, 0.5)}
        for what, key, pick in (("within 25 ms", "within_25ms", max), ("median", "median_abs_ms", min)):
            s_ms = pick(figures, key=lambda s: figures[s][key])
            print(f"best {what}: every boundary {abs(s_ms):.1f} ms {'later' if s_ms >= 0 else 'earlier'}: "
                  f"{sa.summary_line(figures[s_ms])}")


if __name__ == "__main__":
    main()
