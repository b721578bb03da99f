"""scripts/parity/fricative_onsets.py: where boundary times sit against the signal's own
vowel-to-fricative rise, on utterances made here with known rises."""

import importlib.util
import os
import wave

import numpy as np
import pytest

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "parity", "fricative_onsets.py")
# Every word after the first starts with a fricative in the signal; the dictionary makes three
# boundaries an utterance candidates (the -> sea, sea -> fee, fee -> sees) and leaves out one after
# a consonant ("sees" ends in Z) and two next to a word it lacks ("blorp").
WORDS = ["the", "sea", "fee", "sees", "she", "blorp", "sea"]
DICT = "the DH AH0\nsea S IY1\nfee F IY1\nsees S IY1 Z\nshe SH IY1\n"
FRICATIVE_S = 0.12
# 16 kHz with short vowels; 22,050 Hz (a hop of 22 samples, not 1 ms) with the later boundaries
# seconds into the utterance, where a frame time taken as k ms would be ms off.
SIGNALS = [(16000, 0.20), (22050, 1.0)]


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("fricative_onsets", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def utterance(seed, rate, vowel_s):
    """A vowel (harmonics of 110 Hz below 1 kHz), then per later word a fricative (high-passed
    noise) and a vowel; returns the samples and the true onset of each fricative in seconds."""
    rng = np.random.default_rng(seed)
    vowel_n, fricative_n = int(vowel_s * rate), int(FRICATIVE_S * rate)
    t = np.arange(vowel_n) / rate
    vowel = sum(0.3 / k * np.sin(2 * np.pi * 110 * k * t) for k in range(1, 9))
    parts, onsets, at = [vowel], [], vowel_n
    for _ in WORDS[1:]:
        noise = rng.standard_normal(fricative_n + 1)
        parts += [0.2 * np.diff(noise), vowel]  # the first difference: energy at high frequencies
        onsets.append(at / rate)
        at += fricative_n + vowel_n
    return np.concatenate(parts), onsets


def write_corpus(folder, signal, utterances, reference_shift, gap_in=None):
    """wavs/ and words/ of the utterances; each reference boundary at its onset plus
    reference_shift(utterance, boundary) seconds; utterance `gap_in` has a pause in its reference
    before the second word (that boundary is not scored)."""
    os.makedirs(os.path.join(folder, "wavs"))
    os.makedirs(os.path.join(folder, "words"))
    onsets_by_id = {}
    for u in range(utterances):
        samples, onsets = utterance(u, *signal)
        uid = f"u{u}"
        onsets_by_id[uid] = onsets
        with wave.open(os.path.join(folder, "wavs", uid + ".wav"), "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(signal[0])
            w.writeframes((np.clip(samples, -1.0, 1.0) * 32767).astype("<i2").tobytes())
        edges = [0.0] + [o + reference_shift(u, b) for b, o in enumerate(onsets)] + [len(samples) / signal[0]]
        with open(os.path.join(folder, "words", uid + ".tsv"), "w") as f:
            f.write("word\tstart_s\tend_s\n")
            for i, word in enumerate(WORDS):
                end = edges[i + 1] - (0.05 if u == gap_in and i == 0 else 0.0)
                f.write(f"{word}\t{edges[i]:.6f}\t{end:.6f}\n")
    with open(os.path.join(folder, "cmudict.dict"), "w") as f:
        f.write(DICT)
    return onsets_by_id


def write_textgrids(folder, onsets_by_id):
    """align's words tier with each boundary at the true onset."""
    os.makedirs(folder)
    for uid, onsets in onsets_by_id.items():
        edges = [0.0] + onsets + [onsets[-1] + 1.0]
        lines = ['File type = "ooTextFile"', 'Object class = "TextGrid"', "item []:", "    item [1]:",
                 '        name = "words"']
        for i, word in enumerate(WORDS):
            lines += [f"        intervals [{i + 1}]:", f"            xmin = {edges[i]}",
                      f"            xmax = {edges[i + 1]}", f'            text = "{word}"']
        with open(os.path.join(folder, uid + ".TextGrid"), "w") as f:
            f.write("\n".join(lines) + "\n")


def stats(values):
    values = np.asarray(values)
    q25, q75 = np.percentile(values, [25, 75])
    return float(np.median(values)), float(q75 - q25)


def found_in(script, corpus, textgrids=None):
    found, counts = script.offsets(str(corpus), textgrids and str(textgrids),
                                   script.read_cmudict(str(corpus / "cmudict.dict")))
    assert counts["no_clear_rise"] == 0 and counts["missing_textgrids"] == 0
    return found, counts


@pytest.mark.parametrize("signal", SIGNALS)
def test_a_constant_shift_of_the_reference_moves_its_median_by_that_much(script, tmp_path, signal):
    on = tmp_path / "on"
    write_corpus(str(on), signal, 5, lambda u, b: 0.0)
    early = tmp_path / "early"
    write_corpus(str(early), signal, 5, lambda u, b: -0.015)
    (at_onset_found, counts), (shifted_found, _) = found_in(script, on), found_in(script, early)
    at_onset, shifted = at_onset_found["reference"], shifted_found["reference"]
    assert counts["candidates"] == len(at_onset) == len(shifted) == 15
    median, iqr = stats(at_onset)
    # A clean step is found ~3 ms early (the log ratio is halfway once ~3 ms of the fricative are
    # in the 8 ms window), the same for every boundary.
    assert 0.0 <= median < 4.5 and iqr < 2.0
    assert stats(shifted)[0] - median == pytest.approx(-15.0, abs=1.5)


@pytest.mark.parametrize("signal", SIGNALS)
def test_a_jittered_reference_spreads_wider_than_align_on_the_same_boundaries(script, tmp_path, signal):
    corpus = tmp_path / "corpus"
    jitter = [0.009, -0.009, 0.004, -0.004, 0.0]
    onsets = write_corpus(str(corpus), signal, 5, lambda u, b: jitter[(u + b) % 5], gap_in=0)
    write_textgrids(str(tmp_path / "grids"), onsets)
    found, _ = found_in(script, corpus, tmp_path / "grids")
    assert len(found["reference"]) == len(found["align"]) == 14  # the boundary after the pause left out
    reference, align = stats(found["reference"]), stats(found["align"])
    assert reference[1] > align[1] + 5.0
    assert stats(found["align - reference"])[0] == pytest.approx(0.0, abs=1.0)
