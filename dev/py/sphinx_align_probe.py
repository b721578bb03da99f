#!/usr/bin/env python3
"""Word timings from an independent aligner, as a yardstick for `align`. A probe, not part of the product.

When `align` scores poorly on one voice, the question is whether the voice's reference word
timings or `align` is at fault. This script gives a second opinion from an unrelated forced
aligner, pocketsphinx 5 (an HMM aligner with its own en-us acoustic model and the CMU
dictionary that the package ships): it writes one TextGrid per utterance, with a "words" tier,
that scripts/score_alignment.py scores as it scores align's textgrids/.

    python3 -m venv /tmp/psenv
    /tmp/psenv/bin/pip install pocketsphinx==5.0.4 numpy scipy soundfile
    /tmp/psenv/bin/python dev/py/sphinx_align_probe.py --corpus .parity/corpora/kal \
        --out /tmp/sphinx/kal [--limit N] [--jobs 2] [--frate 100]
    python3 scripts/score_alignment.py --textgrids /tmp/sphinx/kal \
        --reference .parity/corpora/kal/words

The corpus is in LJSpeech layout: metadata.csv (id|text|normalized text) and wavs/<id>.wav or
.flac. Each file is read as mono, resampled to 16 kHz where its rate differs, and aligned with
the third field of its metadata line. Text: hyphens, slashes and dashes part words; then each
word is lower-cased and keeps letters, digits and inner apostrophes only. Utterances are skipped
(and counted) when they hold a digit (numbers are not spelt out: each voice reads them its own
way, and a wrong reading would misplace the words around it), when a word is missing from the
dictionary, or when the alignment fails.

Times: pocketsphinx gives each word a first frame and a frame count; a word spans
[start / frate, (start + duration) / frate) seconds (frate: frames a second, 100 by default, a
10-ms step). The acoustic model was trained at 100 frames a second; another --frate changes the
HMMs' minimum durations and the feature dynamics, so it is there to try, not to trust.
Silences between words are empty intervals.
"""
import argparse
import math
import multiprocessing
import os
import re
import sys

import numpy as np
import scipy.signal
import soundfile

RATE = 16000
_decoder = None
_frate = 100


def words_of(text):
    """The words to align, or None and the reason (a digit) for skipping."""
    words = []
    # A typographic apostrophe is the dictionary's ASCII one ("it\u2019s" is "it's").
    for piece in re.split(r"[\s\-\u2010-\u2015/]+", text.lower().replace("\u2019", "'")):
        w = re.sub(r"[^a-z0-9']", "", piece).strip("'")
        if w:
            words.append(w)
    if any(re.search(r"[0-9]", w) for w in words):
        return None, "digits"
    return words, None


def init_worker(frate):
    global _decoder, _frate
    import pocketsphinx
    _frate = frate
    # bestpath off: the lattice's best path can give the first pass a one-frame <s> that the
    # second (state-level) pass then rejects as an impossible duration, failing the utterance.
    # Wide beams: with the defaults (1e-48, 7e-29, 1e-48) the first pass loses the sentence's
    # end on a fifth of the espeak-ng utterances (no hypothesis); a one-sentence grammar is
    # cheap to search wide.
    _decoder = pocketsphinx.Decoder(samprate=RATE, frate=frate, lm=None, bestpath=False, beam=1e-120,
                                    wbeam=1e-100, pbeam=1e-120, loglevel="FATAL")


def read_audio(path):
    x, rate = soundfile.read(path, dtype="float64", always_2d=True)
    x = x.mean(axis=1)
    if rate != RATE:
        g = math.gcd(RATE, rate)
        x = scipy.signal.resample_poly(x, RATE // g, rate // g)
    return np.clip(np.round(x * 32767.0), -32768, 32767).astype(np.int16)


def align_one(job):
    """(id, status, detail): status "ok", "digits", "oov" (detail: the words) or "failed"."""
    utt, wav, text, out_dir = job
    words, why = words_of(text)
    if words is None:
        return utt, why, text
    missing = [w for w in words if _decoder.lookup_word(w) is None]
    if missing:
        return utt, "oov", " ".join(missing)
    try:
        audio = read_audio(wav).tobytes()
        d = _decoder
        d.set_align_text(" ".join(words))  # first pass: word-level search over the sentence
        d.start_utt()
        d.process_raw(audio, full_utt=True)
        d.end_utt()
        if d.hyp() is None:
            return utt, "failed", "no hypothesis in the first pass"
        d.set_alignment()  # second pass: Viterbi alignment down to HMM states
        d.start_utt()
        d.process_raw(audio, full_utt=True)
        d.end_utt()
        alignment = d.get_alignment()
        if alignment is None:
            return utt, "failed", "no alignment"
        spans = [(re.sub(r"\(\d+\)$", "", w.name), w.start, w.start + w.duration) for w in alignment]
    except Exception as e:  # pocketsphinx raises RuntimeError/ValueError on failures
        return utt, "failed", f"{type(e).__name__}: {e}"
    spans = [s for s in spans if not (s[0].startswith("<") or s[0].startswith("["))]
    if [s[0] for s in spans] != words:
        return utt, "failed", f"aligned words {[s[0] for s in spans]} differ from {words}"
    total = len(audio) / 2 / RATE
    intervals = []
    t = 0.0
    for w, f0, f1 in spans:
        a, b = f0 / _frate, min(f1 / _frate, total)
        if a > t:
            intervals.append(("", t, a))
        intervals.append((w, a, b))
        t = b
    if t < total:
        intervals.append(("", t, total))
    write_textgrid(os.path.join(out_dir, utt + ".TextGrid"), total, intervals)
    return utt, "ok", ""


def write_textgrid(path, total, intervals):
    def q(s):
        return '"' + s.replace('"', '""') + '"'
    lines = ['File type = "ooTextFile"', 'Object class = "TextGrid"', "",
             "xmin = 0 ", f"xmax = {total:.6f} ", "tiers? <exists> ", "size = 1 ", "item []: ",
             "    item [1]:", '        class = "IntervalTier" ', '        name = "words" ',
             "        xmin = 0 ", f"        xmax = {total:.6f} ", f"        intervals: size = {len(intervals)} "]
    for i, (text, a, b) in enumerate(intervals, start=1):
        lines += [f"        intervals [{i}]:", f"            xmin = {a:.6f} ",
                  f"            xmax = {b:.6f} ", f"            text = {q(text)} "]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", required=True, help="LJSpeech-layout corpus directory")
    ap.add_argument("--out", required=True, help="directory for <id>.TextGrid")
    ap.add_argument("--limit", type=int, help="only the first N utterances")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes (2)")
    ap.add_argument("--frate", type=int, default=100, help="frames a second (100, the model's)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    jobs = []
    with open(os.path.join(args.corpus, "metadata.csv"), encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            fields = line.rstrip("\n").split("|")
            if len(fields) < 3:
                sys.exit(f"metadata.csv:{n}: expected id|text|normalized text")
            wav = next((p for p in (os.path.join(args.corpus, "wavs", fields[0] + e) for e in (".wav", ".flac"))
                        if os.path.exists(p)), None)
            if wav is None:
                sys.exit(f"metadata.csv:{n}: no wavs/{fields[0]}.wav or .flac")
            jobs.append((fields[0], wav, fields[2], args.out))
    if args.limit:
        jobs = jobs[:args.limit]
    with multiprocessing.Pool(args.jobs, initializer=init_worker, initargs=(args.frate,)) as pool:
        results = pool.map(align_one, jobs, chunksize=4)
    by = {}
    for utt, status, detail in results:
        by.setdefault(status, []).append((utt, detail))
    print(f"{len(results)} utterances: aligned {len(by.get('ok', []))}, skipped for digits "
          f"{len(by.get('digits', []))}, for words not in the dictionary {len(by.get('oov', []))}, "
          f"alignment failed {len(by.get('failed', []))}")
    for status in ("oov", "failed"):
        for utt, detail in by.get(status, [])[:8]:
            print(f"  {status} {utt}: {detail}")


if __name__ == "__main__":
    main()
