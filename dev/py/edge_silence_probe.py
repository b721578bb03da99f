#!/usr/bin/env python3
"""Would silent stretches at a word's edges be pauses? A probe, not part of `align`.

Festival pauses at phrase breaks its own model predicts, where the text has no punctuation; the
letter model has no token for such a silence and hands it to the blank at the next word's start
(or the last word's end), so align's words tier stretches the word over the pause
(docs/accuracy.md, "Pauses the text does not mark"). Here each word of align's words tier is
trimmed acoustically: a run of silent frames of at least --min-pause-ms at its start or end is
taken out of it (left as a pause). A frame (10 ms window, 5 ms hop) is silent when its energy is
--below-db or more under the utterance's loudest frame. Scored as scripts/score_alignment.py
scores, with each setting beside the words tier as align wrote it:

    python3 dev/py/edge_silence_probe.py --corpus data/kal-corpus \\
        --textgrids .parity-work/gpu/score/kal-centre/aligned/textgrids --min-pause-ms 80,120,160

The corpus's wavs/ (16-bit PCM) and words/ (the reference) are read; the TextGrids are align's.
"""
import argparse
import math
import os
import struct
import sys
import wave

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
import score_alignment as sa  # noqa: E402

WINDOW_S, HOP_S = 0.010, 0.005


def frame_db(path):
    """Energy in dB of 10 ms frames every 5 ms of a 16-bit PCM wav (mono, or its first channel)."""
    with wave.open(path) as w:
        rate, channels, n = w.getframerate(), w.getnchannels(), w.getnframes()
        if w.getsampwidth() != 2:
            sys.exit(f"{path}: expected 16-bit PCM")
        raw = w.readframes(n)
    samples = struct.unpack(f"<{n * channels}h", raw)[::channels]
    win, hop = int(WINDOW_S * rate), int(HOP_S * rate)
    out = []
    for start in range(0, max(1, len(samples) - win + 1), hop):
        chunk = samples[start:start + win]
        energy = sum(s * s for s in chunk) / max(1, len(chunk))
        out.append(10 * math.log10(energy + 1e-3))
    return out


def trimmed(words, db, min_pause_s, below_db):
    """The words tier with silent runs of at least min_pause_s taken off each word's two edges."""
    loud = max(db) if db else 0.0
    silent = [d <= loud - below_db for d in db]

    def frame_at(t):
        return min(len(silent) - 1, max(0, int(round((t - WINDOW_S / 2) / HOP_S))))

    out = []
    for word, begin, end in words:
        first, last = frame_at(begin), frame_at(end)
        run = 0
        while first + run < last and silent[first + run]:
            run += 1
        if run * HOP_S >= min_pause_s:
            begin = min(end, begin + run * HOP_S)
        run = 0
        while last - run > first and silent[last - run]:
            run += 1
        if run * HOP_S >= min_pause_s:
            end = max(begin, end - run * HOP_S)
        out.append((word, begin, end))
    return out


def score(corpus, textgrids, min_pause_s, below_db):
    def trim(utterance, words):
        if min_pause_s is None:
            return words
        return trimmed(words, frame_db(os.path.join(corpus, "wavs", utterance + ".wav")), min_pause_s, below_db)

    return sa.score(textgrids, os.path.join(corpus, "words"), "words", transform=trim)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", required=True, help="the corpus folder (wavs/, words/)")
    ap.add_argument("--textgrids", required=True, help="align's textgrids/ folder")
    ap.add_argument("--min-pause-ms", default="80,120,160", help="comma-separated silent-run lengths")
    ap.add_argument("--below-db", default="40", help="comma-separated: dB under the loudest frame")
    args = ap.parse_args()
    print(f"as align wrote them: {sa.summary_line(score(args.corpus, args.textgrids, None, 0))}")
    for below in (float(b) for b in args.below_db.split(",")):
        for ms in (float(m) for m in args.min_pause_ms.split(",")):
            f = score(args.corpus, args.textgrids, ms / 1000, below)
            print(f"silent runs >= {ms:.0f} ms at {below:.0f} dB under the loudest: {sa.summary_line(f)}")


if __name__ == "__main__":
    main()
