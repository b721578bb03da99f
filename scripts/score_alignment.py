#!/usr/bin/env python3
"""Score `align`'s word boundaries against reference word timings.

The reference is what scripts/make_corpus.sh writes beside each wav of the default corpus:
words/<id>.tsv (word, start s, end s; a header line), espeak-ng's own word timings of that
synthesis. The hypothesis is align's textgrids/<id>.TextGrid, its "words" tier (pauses, the
empty intervals, are not words).

    python3 scripts/score_alignment.py --textgrids aligned/textgrids \
        --reference data/monoflow-corpus/words [--json scores.json]

Standard library only, so that it runs wherever align does (the GPU machine included).

Words are paired per utterance after normalisation (lower case, letters and digits only) by a
longest-matching-blocks alignment of the two word sequences (difflib). Inside a run of differing
words, a reference entry that espeak-ng spoke as one word ("was the") pairs with the aligned
words it joins, and the rest pairs one to one when both sides have as many words left ("7", "15"
against "seven", "fifteen"; "Dr" against "doctor"); what remains ("1,250" against "one thousand
two hundred fifty") is left out and counted.

Only pairs whose words are the same text (after normalisation; joined for "was the") are scored:
a pair made by position alone cannot be checked. espeak-ng labels the words it speaks for
numbers and symbols with shifted pieces of the written text ("$12.75" gives "$", "12.75",
"2.75,", "2.75,", "2.75,"), and its reading may differ from the cleaners' ("four dollars fifty
cents for a" against "$", "4.50", ".50", ".50", ".50", "for a"), so such pairs are often a word
or two apart; their errors are reported on a line of their own, not mixed into the figures.

Each scored pair gives its start and its end boundary (of the first and last aligned word of a
joined pair), except each utterance's first onset and last offset: the silence before the first
and after the last word has no token. The error is hypothesis minus reference.
Printed: utterances, words, boundaries scored, median and mean absolute error in ms, the
share within 10, 25 and 50 ms, and the median signed error (a constant offset shows there);
then the same figures with that median taken off every error (JSON: less_offset), which tells
an offset between the two sources from the spread of their boundaries about each other;
with --row, the same figures as one CSV line after the given labels (for tables over runs).
"""
import argparse
import difflib
import json
import os
import re
import signal
import statistics
import sys

THRESHOLDS_MS = (10, 25, 50)


def read_reference(path):
    words = []
    with open(path, encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split("\t")
        if header[:3] != ["word", "start_s", "end_s"]:
            sys.exit(f"{path}:1: expected the header word<TAB>start_s<TAB>end_s, found {header}")
        for n, line in enumerate(f, start=2):
            fields = line.rstrip("\n").split("\t")
            if len(fields) != 3:
                sys.exit(f"{path}:{n}: expected 3 tab-separated fields, found {len(fields)}")
            words.append((fields[0], float(fields[1]), float(fields[2])))
    return words


def _quoted(value, path, n):
    value = value.strip()
    if len(value) < 2 or value[0] != '"' or value[-1] != '"':
        sys.exit(f"{path}:{n}: expected a quoted string, found {value}")
    return value[1:-1].replace('""', '"')


def read_textgrid_tier(path, tier_name):
    """The (text, xmin, xmax) intervals of one interval tier of a long-format TextGrid."""
    tiers = {}
    name = None
    current = None
    with open(path, encoding="utf-8") as f:
        for n, raw in enumerate(f, start=1):
            line = raw.strip()
            key, _, value = line.partition("=")
            key = key.strip()
            if re.fullmatch(r"item \[\d+\]:", line):
                name, current = None, None
            elif key == "name" and name is None:
                name = _quoted(value, path, n)
                tiers[name] = []
            elif re.fullmatch(r"intervals \[\d+\]:", line):
                current = {}
                tiers[name].append(current)
            elif current is not None and key in ("xmin", "xmax"):
                current[key] = float(value)
            elif current is not None and key == "text":
                current["text"] = _quoted(value, path, n)
    if tier_name not in tiers:
        sys.exit(f"{path}: no tier named '{tier_name}' (tiers: {', '.join(tiers) or 'none'})")
    return [(i["text"], i["xmin"], i["xmax"]) for i in tiers[tier_name]]


def normalise(word):
    return re.sub(r"[^0-9a-z]", "", word.lower())


def joined_at(word, hyp, h, h1):
    """The end k of the earliest run hyp[j:k], h <= j, whose words joined are `word`: (j, k) or None."""
    for j in range(h, h1):
        joined, k = "", j
        while k < h1 and len(joined) < len(word):
            joined += hyp[k]
            k += 1
        if joined == word:
            return j, k
    return None


def pair_replaced(ref, hyp, r0, r1, h0, h1):
    """Pairs inside a run of differing words: one for one where both sides have as many words left,
    else a reference entry with the consecutive aligned words it joins ("was the" = "was" +
    "the"); a reference entry that is neither is left out."""
    pairs = []
    r, h = r0, h0
    while r < r1 and h < h1:
        if r1 - r == h1 - h:
            pairs.extend(((i, j, j) for i, j in zip(range(r, r1), range(h, h1))))
            break
        run = joined_at(ref[r], hyp, h, h1)
        if run is not None:
            pairs.append((r, run[0], run[1] - 1))
            h = run[1]
        r += 1
    return pairs


def pair_words(reference, hypothesis):
    """(r, first h, last h) for each reference word paired with aligned words, as the module
    docstring says."""
    ref = [normalise(w) for w, _, _ in reference]
    hyp = [normalise(w) for w, _, _ in hypothesis]
    pairs = []
    matcher = difflib.SequenceMatcher(None, ref, hyp, autojunk=False)
    for op, r0, r1, h0, h1 in matcher.get_opcodes():
        if op == "equal":
            pairs.extend(((i, j, j) for i, j in zip(range(r0, r1), range(h0, h1))))
        elif op == "replace":
            pairs.extend(pair_replaced(ref, hyp, r0, r1, h0, h1))
    return pairs


def figures(errors):
    """Median, mean and signed median in ms and the shares within THRESHOLDS_MS of errors in seconds."""
    e_ms = [1000.0 * e for e in errors]
    a_ms = [abs(e) for e in e_ms]
    out = {"boundaries": len(e_ms)}
    if not e_ms:
        return out
    out["median_abs_ms"] = statistics.median(a_ms)
    out["mean_abs_ms"] = statistics.fmean(a_ms)
    out["median_signed_ms"] = statistics.median(e_ms)
    for t in THRESHOLDS_MS:
        out[f"within_{t}ms"] = sum(a <= t for a in a_ms) / len(a_ms)
    return out


def paired_boundaries(reference, hypothesis):
    """(r, same text?, boundaries) for each reference word r paired with aligned words, as the
    module docstring says; boundaries: (0 for its start or 1 for its end, hypothesis - reference
    in seconds), without the utterance's first onset and last offset."""
    for r, first, last in pair_words(reference, hypothesis):
        same_text = normalise(reference[r][0]) == "".join(normalise(w) for w, _, _ in hypothesis[first:last + 1])
        boundaries = []
        if r > 0:  # the utterance's first onset is not scored
            boundaries.append((0, hypothesis[first][1] - reference[r][1]))
        if r < len(reference) - 1:  # nor its last offset
            boundaries.append((1, hypothesis[last][2] - reference[r][2]))
        yield r, same_text, boundaries


def boundary_errors(reference, hypothesis, matched, by_position):
    """Appends one utterance's boundary errors (seconds, hypothesis - reference) to `matched` (pairs
    of the same text) and `by_position` (the others), as the module docstring says; returns the
    number of pairs of each kind."""
    same, other = 0, 0
    for _, same_text, boundaries in paired_boundaries(reference, hypothesis):
        same, other = (same + 1, other) if same_text else (same, other + 1)
        (matched if same_text else by_position).extend(error for _, error in boundaries)
    return same, other


def score(textgrid_dir, reference_dir, tier, transform=None):
    """The figures of every TextGrid in textgrid_dir against its reference in reference_dir.
    transform(utterance, words), where given, returns the aligned words to score in place of the
    tier's (a probe's altered boundaries)."""
    matched, by_position = [], []  # errors in seconds, hypothesis - reference
    counts = {"utterances": 0, "reference_words": 0, "aligned_words": 0, "paired_words": 0,
              "paired_by_position": 0, "missing_textgrids": 0}
    for name in sorted(os.listdir(reference_dir)):
        if not name.endswith(".tsv"):
            continue
        utterance = name[:-4]
        tg = os.path.join(textgrid_dir, utterance + ".TextGrid")
        reference = read_reference(os.path.join(reference_dir, name))
        if not os.path.exists(tg):
            counts["missing_textgrids"] += 1
            continue
        hypothesis = [w for w in read_textgrid_tier(tg, tier) if w[0] != ""]
        if transform is not None:
            hypothesis = transform(utterance, hypothesis)
        counts["utterances"] += 1
        counts["reference_words"] += len(reference)
        counts["aligned_words"] += len(hypothesis)
        same, other = boundary_errors(reference, hypothesis, matched, by_position)
        counts["paired_words"] += same
        counts["paired_by_position"] += other
    if not matched:
        sys.exit(f"no boundary to score: no TextGrid in {textgrid_dir} matches a reference in {reference_dir}")
    result = dict(counts)
    result.update(figures(matched))
    result["by_position"] = figures(by_position)
    # The same boundaries with their median signed error taken off each: what is left once a
    # constant offset between the two sources is removed, the spread alone.
    offset = statistics.median(matched)
    result["less_offset"] = figures([e - offset for e in matched])
    return result


def summary_line(f, signed=True):
    return (f"median |error| {f['median_abs_ms']:.1f} ms, mean {f['mean_abs_ms']:.1f} ms" +
            (f", median signed {f['median_signed_ms']:+.1f} ms" if signed else "") + "; within " +
            ", ".join(f"{t} ms {100 * f[f'within_{t}ms']:.1f}%" for t in THRESHOLDS_MS))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--textgrids", required=True, help="align's textgrids/ folder")
    ap.add_argument("--reference", required=True, help="the corpus's words/ folder (<id>.tsv)")
    ap.add_argument("--tier", default="words", help="TextGrid tier to score (words)")
    ap.add_argument("--json", help="also write the figures as JSON here")
    ap.add_argument("--row", metavar="LABELS",
                    help="print one CSV line instead: LABELS (comma-separated), then the median and "
                         "median signed error in ms and the shares within 10/25/50 ms in percent")
    args = ap.parse_args()
    r = score(args.textgrids, args.reference, args.tier)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(r, f, indent=1)
            f.write("\n")
    if args.row is not None:
        print(",".join([args.row, f"{r['median_abs_ms']:.1f}", f"{r['median_signed_ms']:.1f}"] +
                       [f"{100 * r[f'within_{t}ms']:.1f}" for t in THRESHOLDS_MS]))
        return
    print(f"utterances {r['utterances']} (no TextGrid: {r['missing_textgrids']}); words: reference "
          f"{r['reference_words']}, aligned {r['aligned_words']}, paired {r['paired_words']} "
          f"(+{r['paired_by_position']} by position only, not scored); boundaries {r['boundaries']}")
    print(summary_line(r))
    print(f"  less its median signed error ({r['median_signed_ms']:+.1f} ms, a constant offset): " +
          summary_line(r["less_offset"], signed=False))
    if r["by_position"]["boundaries"]:
        print(f"  not scored, the {r['by_position']['boundaries']} boundaries of the words paired by position: " +
              summary_line(r["by_position"]))


if __name__ == "__main__":
    if hasattr(signal, "SIGPIPE"):  # `... | head -1` ends quietly, as other commands do
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    main()
