#!/usr/bin/env python3
"""How closely a voice's reference word timings follow its signal, without any model.

At a boundary where a word ending in a vowel (CMUdict's last phone) is followed, without a pause,
by a word starting with a voiceless fricative (S, SH, F, TH), the signal itself marks the
boundary: the share of energy above 3.5 kHz rises from the vowel's level to the fricative's. This
script finds that rise in each such boundary (8 ms Hann frames every 1 ms; the onset is the first
frame above halfway between the two levels that the next 10 frames mostly stay above) and
prints, per source of boundary times, where those times sit against it: the median signed
offset (a convention: where the source puts the boundary within the rise) and the spread about
that median (IQR, 10-90% range, median absolute deviation). A source whose spread is wide is
noisy against the signal, whatever model is scored against it.

Sources: the reference (words/<id>.tsv) and, with --textgrids, align's words tier; then the rise
is searched within 40 ms of the midpoint of the two, so that neither is favoured, and only
boundaries that both place are used; the third row is align against the reference.

  .venv/bin/python3 scripts/parity/fricative_onsets.py --corpus data/kal-corpus \
      [--textgrids aligned/textgrids] [--cmudict data/cmudict/cmudict.dict]

Needs numpy (the .venv of scripts/setup.sh has it); reads 16-bit PCM WAV.
"""
import argparse
import os
import signal
import statistics
import sys
import wave

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import score_alignment  # noqa: E402  (scripts/score_alignment.py: readers and word pairing)

VOICELESS_FRICATIVES = {"S", "SH", "F", "TH"}
CONSONANTS = set("P B T D K G CH JH F V TH DH S Z SH ZH HH M N NG L R W Y".split())
HOP_S, WINDOW_S, SEARCH_S = 0.001, 0.008, 0.040  # asked for; frames are whole samples
HIGH_HZ, LOW_HZ = 3500.0, (80.0, 1500.0)


def read_cmudict(path):
    """word -> its first pronunciation's phones without stress marks."""
    words = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            parts = line.split()
            if not parts or parts[0].startswith(";;;"):
                continue
            word = parts[0].split("(")[0].lower()
            words.setdefault(word, [p.rstrip("012") for p in parts[1:]])
    return words


def read_wav(path):
    with wave.open(path) as w:
        if w.getsampwidth() != 2 or w.getnchannels() != 1:
            sys.exit(f"{path}: 16-bit mono PCM expected")
        rate = w.getframerate()
        samples = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16)
    return samples.astype(np.float64) / 32768.0, rate


class Frames:
    """log10 of the energy above HIGH_HZ over that in LOW_HZ per frame (`share`); frame k is
    centred at k * hop_s + window_s / 2, hop and window being whole samples (at 22,050 Hz a hop
    of 22 samples is 0.998 ms, not HOP_S)."""

    def __init__(self, share, hop, window, rate):
        self.share, self.hop_s, self.window_s = share, hop / rate, window / rate

    def time(self, k):
        return k * self.hop_s + self.window_s / 2

    def index(self, t):
        return int((t - self.window_s / 2) / self.hop_s)


def high_band_share(samples, rate):
    hop, window = int(rate * HOP_S), int(rate * WINDOW_S)
    if len(samples) < window:
        return Frames(np.zeros(0), hop, window, rate)
    n = 1 + (len(samples) - window) // hop
    frames = np.lib.stride_tricks.as_strided(samples, (n, window), (samples.strides[0] * hop, samples.strides[0]))
    power = np.abs(np.fft.rfft(frames * np.hanning(window), axis=1)) ** 2
    freqs = np.fft.rfftfreq(window, 1.0 / rate)
    high = power[:, freqs >= HIGH_HZ].sum(1)
    low = power[:, (freqs > LOW_HZ[0]) & (freqs < LOW_HZ[1])].sum(1)
    return Frames(np.log10(high + 1e-10) - np.log10(low + 1e-10), hop, window, rate)


def onset_near(frames, centre_s):
    """The rise's time within SEARCH_S of centre_s, or None where there is no clear rise (the
    levels of its first and last 15 frames less than a factor of 10 apart)."""
    share = frames.share
    first = max(frames.index(centre_s - SEARCH_S), 0)
    last = min(frames.index(centre_s + SEARCH_S), len(share) - 1)
    part = share[first:last + 1]
    if len(part) < 40:
        return None
    before, after = np.median(part[:15]), np.median(part[-15:])
    if after - before < 1.0:
        return None
    half = (before + after) / 2
    for i in np.nonzero(part > half)[0]:
        if np.mean(part[i:i + 10] > half) > 0.8:
            return frames.time(first + i)
    return None


def offsets(corpus, textgrids, cmudict):
    """Per source, the boundary times minus the signal's onset in ms; and the counts: candidate
    boundaries, those without a clear rise (left out), utterances without a TextGrid."""
    normalise = score_alignment.normalise
    words_dir = os.path.join(corpus, "words")
    found = {"reference": [], "align": [], "align - reference": []}
    counts = {"candidates": 0, "no_clear_rise": 0, "missing_textgrids": 0}
    for name in sorted(os.listdir(words_dir)):
        if not name.endswith(".tsv"):
            continue
        reference = score_alignment.read_reference(os.path.join(words_dir, name))
        hypothesis, pairs = None, [(r, None, None) for r in range(len(reference))]
        if textgrids:
            grid = os.path.join(textgrids, name[:-4] + ".TextGrid")
            if not os.path.exists(grid):
                counts["missing_textgrids"] += 1
                continue
            hypothesis = [w for w in score_alignment.read_textgrid_tier(grid, "words") if w[0] != ""]
            pairs = score_alignment.pair_words(reference, hypothesis)
        frames = None
        for r, first, last in pairs:
            if r == 0 or abs(reference[r - 1][2] - reference[r][1]) > 1e-4:
                continue  # a pause before the word, or the utterance's first
            phones, before = cmudict.get(normalise(reference[r][0])), cmudict.get(normalise(reference[r - 1][0]))
            if not phones or not before or phones[0] not in VOICELESS_FRICATIVES or before[-1] in CONSONANTS:
                continue
            t_ref = reference[r][1]
            t_align = None
            if hypothesis is not None:
                if normalise(reference[r][0]) != "".join(normalise(w) for w, _, _ in hypothesis[first:last + 1]):
                    continue  # paired by position only
                t_align = hypothesis[first][1]
            if frames is None:
                wav = os.path.join(corpus, "wavs", name[:-4] + ".wav")
                if not os.path.exists(wav):
                    sys.exit(f"{wav}: not found (its words are in {os.path.join(words_dir, name)})")
                frames = high_band_share(*read_wav(wav))
            counts["candidates"] += 1
            onset = onset_near(frames, t_ref if t_align is None else (t_ref + t_align) / 2)
            if onset is None:
                counts["no_clear_rise"] += 1
                continue
            found["reference"].append(1000.0 * (t_ref - onset))
            if t_align is not None:
                found["align"].append(1000.0 * (t_align - onset))
                found["align - reference"].append(1000.0 * (t_align - t_ref))
    return {k: v for k, v in found.items() if v}, counts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", required=True, help="a corpus folder with wavs/ and words/")
    ap.add_argument("--textgrids", help="align's textgrids/ folder for this corpus")
    ap.add_argument("--cmudict", default="data/cmudict/cmudict.dict")
    args = ap.parse_args()
    if hasattr(signal, "SIGPIPE"):  # `... | head -1` ends quietly, as other commands do
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    for path in (os.path.join(args.corpus, "words"), os.path.join(args.corpus, "wavs"), args.cmudict, args.textgrids):
        if path and not os.path.exists(path):
            sys.exit(f"{path}: not found")
    found, counts = offsets(args.corpus, args.textgrids, read_cmudict(args.cmudict))
    print(f"# {counts['candidates']} vowel + voiceless fricative boundaries, {counts['no_clear_rise']} without a "
          f"clear rise within {SEARCH_S * 1000:.0f} ms (left out), {counts['missing_textgrids']} utterances "
          "without a TextGrid")
    if not found:
        sys.exit(f"{args.corpus}: no vowel + voiceless fricative boundary with a clear rise")
    print("source,boundaries,median_signed_ms,iqr_ms,p10_p90_ms,mad_ms")
    for source, values in found.items():
        median = statistics.median(values)
        p10, p25, p75, p90 = np.percentile(values, [10, 25, 75, 90])
        mad = statistics.median(abs(v - median) for v in values)
        print(f"{source},{len(values)},{median:+.1f},{p75 - p25:.1f},{p90 - p10:.1f},{mad:.1f}")


if __name__ == "__main__":
    main()
