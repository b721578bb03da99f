#!/usr/bin/env python3
"""Split two aligners' boundary errors against one reference into the part they share and their own.

When two unrelated aligners A and B are scored against the same reference R, each error is
A - R = a - r and B - R = b - r, where a and b are each aligner's own error about the spoken
boundary and r is the reference's. If a, b and r are independent, var(A - R) = var(a) + var(r),
var(B - R) = var(b) + var(r) and var(A - B) = var(a) + var(b), so

    var(r) = (var(A - R) + var(B - R) - var(A - B)) / 2

and each aligner's own part follows. A reference that scatters about the words as heard shows as
a large shared part, the same for both aligners; an aligner that errs shows as its own part. The
shared part is the reference's only as far as the two aligners err independently of each other
(both may, for instance, hear a stop's closure as silence). Three estimates of the spreads, since
they weigh the few gross errors differently: robust (1.4826 times the median absolute deviation,
a standard deviation for normal errors; the split is then exact only for roughly normal errors),
plain variances (every error, the gross ones dominating), and plain variances of the boundaries
both aligners put within 50 ms of the reference (the core). The same boundaries are used for both
aligners (scripts/score_alignment.py's pairing: same words only, each utterance's first onset
and last offset left out).

    python3 dev/py/error_triangle.py --reference .parity/corpora/kal/words \\
        --a runs/aligned/textgrids --b /tmp/sphinx/kal

(dev/py/sphinx_align_probe.py writes B's TextGrids.)
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import score_alignment as sa  # noqa: E402


def boundary_errors_ms(textgrid, reference):
    """{(reference word, 0 start / 1 end): hypothesis - reference in ms} for same-text pairs."""
    hyp = [w for w in sa.read_textgrid_tier(textgrid, "words") if w[0]]
    return {(r, edge): 1000.0 * error
            for r, same_text, boundaries in sa.paired_boundaries(reference, hyp) if same_text
            for edge, error in boundaries}


def robust_sd(values):
    centre = statistics.median(values)
    return 1.4826 * statistics.median(abs(v - centre) for v in values)


def plain_sd(values):
    return statistics.pstdev(values)


def split(errors_a, errors_b, spread=robust_sd):
    """The spreads of A - R, B - R, A - B and the shared and own parts, in ms."""
    sd_a, sd_b = spread(errors_a), spread(errors_b)
    sd_ab = spread([x - y for x, y in zip(errors_a, errors_b)])
    shared = max((sd_a ** 2 + sd_b ** 2 - sd_ab ** 2) / 2, 0.0)
    return {"a_vs_reference": sd_a, "b_vs_reference": sd_b, "a_vs_b": sd_ab, "shared": shared ** 0.5,
            "a_own": max(sd_a ** 2 - shared, 0.0) ** 0.5, "b_own": max(sd_b ** 2 - shared, 0.0) ** 0.5}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reference", required=True, help="folder of <id>.tsv reference word timings")
    ap.add_argument("--a", required=True, help="aligner A's TextGrids (a 'words' tier)")
    ap.add_argument("--b", required=True, help="aligner B's TextGrids")
    args = ap.parse_args()
    errors_a, errors_b = [], []
    for name in sorted(os.listdir(args.reference)):
        utterance = name[:-4]
        paths = [os.path.join(d, utterance + ".TextGrid") for d in (args.a, args.b)]
        if not name.endswith(".tsv") or not all(os.path.exists(p) for p in paths):
            continue
        reference = sa.read_reference(os.path.join(args.reference, name))
        a, b = (boundary_errors_ms(p, reference) for p in paths)
        for key in sorted(a.keys() & b.keys()):
            errors_a.append(a[key])
            errors_b.append(b[key])
    if len(errors_a) < 2:
        sys.exit("fewer than two boundaries that both aligners pair with the reference")
    core = [(a, b) for a, b in zip(errors_a, errors_b) if abs(a) <= 50 and abs(b) <= 50]
    beyond = [100.0 * sum(abs(e) > 50 for e in errors) / len(errors) for errors in (errors_a, errors_b)]
    print(f"{len(errors_a)} boundaries; beyond 50 ms: A {beyond[0]:.1f}%, B {beyond[1]:.1f}%")
    for name, a, b, spread in (("robust", errors_a, errors_b, robust_sd), ("plain", errors_a, errors_b, plain_sd),
                               (f"core ({len(core)} within 50 ms)", [a for a, _ in core], [b for _, b in core],
                                plain_sd)):
        s = split(a, b, spread)
        print(f"{name}: spread (ms) A - R {s['a_vs_reference']:.1f}, B - R {s['b_vs_reference']:.1f}, "
              f"A - B {s['a_vs_b']:.1f}; shared {s['shared']:.1f}, A's own {s['a_own']:.1f}, "
              f"B's own {s['b_own']:.1f}")


if __name__ == "__main__":
    main()
