"""dev/py/error_triangle.py: two aligners' errors against one reference split into the shared part
and each one's own, on errors of known spreads and on files of known boundaries."""

import importlib.util
import os
import random
import subprocess
import sys

import pytest

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "dev", "py", "error_triangle.py")


def load():
    spec = importlib.util.spec_from_file_location("error_triangle", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_split_recovers_the_spreads_errors_were_drawn_with():
    t = load()
    rng = random.Random(1)
    n = 20000
    reference = [rng.gauss(0, 15) for _ in range(n)]
    a = [rng.gauss(2, 7) + r for r in reference]
    b = [rng.gauss(-5, 8) + r for r in reference]
    for spread in (t.robust_sd, t.plain_sd):
        s = t.split(a, b, spread)
        assert s["shared"] == pytest.approx(15, abs=0.6)
        assert s["a_own"] == pytest.approx(7, abs=0.8)
        assert s["b_own"] == pytest.approx(8, abs=0.8)
        assert s["a_vs_b"] == pytest.approx((7 ** 2 + 8 ** 2) ** 0.5, abs=0.5)


def test_independent_aligners_with_an_exact_reference_share_nothing():
    t = load()
    rng = random.Random(2)
    a = [rng.gauss(0, 5) for _ in range(20000)]
    b = [rng.gauss(0, 9) for _ in range(20000)]
    s = t.split(a, b, t.plain_sd)
    assert s["shared"] < 1.0
    assert s["a_own"] == pytest.approx(5, abs=0.3)
    assert s["b_own"] == pytest.approx(9, abs=0.3)


def write_textgrid(path, words):
    lines = ['File type = "ooTextFile"', 'Object class = "TextGrid"', "item []:", "    item [1]:",
             '        class = "IntervalTier"', '        name = "words"']
    for i, (text, start, end) in enumerate(words, start=1):
        lines += [f"        intervals [{i}]:", f"            xmin = {start}", f"            xmax = {end}",
                  f'            text = "{text}"']
    path.write_text("\n".join(lines) + "\n")


def test_the_tool_pairs_the_same_boundaries_for_both_aligners(tmp_path):
    # Reference: one utterance of four words; A pairs all of them, B has another word in place of
    # "three", so its boundaries are left out: both pair one's end, two's start and end and four's
    # start (the utterance's first onset and last offset are never scored), four boundaries.
    ref, a, b = tmp_path / "ref", tmp_path / "a", tmp_path / "b"
    for d in (ref, a, b):
        d.mkdir()
    (ref / "u1.tsv").write_text("word\tstart_s\tend_s\none\t0.1\t0.5\ntwo\t0.5\t0.9\nthree\t0.9\t1.3\n"
                                "four\t1.3\t1.7\n")
    write_textgrid(a / "u1.TextGrid", [("one", 0.1, 0.51), ("two", 0.51, 0.92), ("three", 0.92, 1.31),
                                       ("four", 1.31, 1.7)])
    write_textgrid(b / "u1.TextGrid", [("one", 0.1, 0.48), ("two", 0.48, 0.93), ("tree", 0.93, 1.33),
                                       ("four", 1.33, 1.7)])
    # A second utterance only A has: left out.
    (ref / "u2.tsv").write_text("word\tstart_s\tend_s\nfive\t0.1\t0.5\nsix\t0.5\t0.9\n")
    write_textgrid(a / "u2.TextGrid", [("five", 0.1, 0.5), ("six", 0.5, 0.9)])
    out = subprocess.run([sys.executable, SCRIPT, "--reference", str(ref), "--a", str(a), "--b", str(b)],
                         capture_output=True, text=True, check=True).stdout
    assert out.startswith("4 boundaries; beyond 50 ms: A 0.0%, B 0.0%"), out
    assert "robust:" in out and "plain:" in out and "core (4 within 50 ms)" in out
