#!/usr/bin/env python3
"""Writes tests/data/fixtures/text/english_cleaners_reference.tsv: inputs and what the original
Glow-TTS english_cleaners makes of them, computed with the packages the original used
(inflect for numbers, unidecode for transliteration). test_text compares monoflow's C++
cleaners against every line.

Run once by hand (not part of the build):
    python3 -m venv /tmp/ref && /tmp/ref/bin/pip install inflect unidecode
    /tmp/ref/bin/python tests/text/make_reference.py

The pipeline below restates the steps of the original cleaners (transliterate, lower-case,
numbers, abbreviations, whitespace), with one documented difference: "£<number>" is expanded
before transliteration, because unidecode turns "£" into "PS" and the original pounds rule
never fired (monoflow's english_cleaners does the same).
"""
import os
import random
import re

import inflect
from unidecode import unidecode

ENGINE = inflect.engine()


def pounds(text):
    return re.sub(r"£([0-9,]*[0-9]+)", r"\1 pounds", text)


def dollars(m):
    parts = m.group(1).split(".")
    if len(parts) > 2:
        return m.group(1) + " dollars"
    d = int(parts[0]) if parts[0] else 0
    c = int(parts[1]) if len(parts) > 1 and parts[1] else 0
    du = "dollar" if d == 1 else "dollars"
    cu = "cent" if c == 1 else "cents"
    if d and c:
        return f"{d} {du}, {c} {cu}"
    if d:
        return f"{d} {du}"
    if c:
        return f"{c} {cu}"
    return "zero dollars"


def number(m):
    n = int(m.group(0))
    if 1000 < n < 3000:
        if n == 2000:
            return "two thousand"
        if 2000 < n < 2010:
            return "two thousand " + ENGINE.number_to_words(n % 100)
        if n % 100 == 0:
            return ENGINE.number_to_words(n // 100) + " hundred"
        return ENGINE.number_to_words(n, andword="", zero="oh", group=2).replace(", ", " ")
    return ENGINE.number_to_words(n, andword="")


def numbers(text):
    text = re.sub(r"([0-9][0-9,]+[0-9])", lambda m: m.group(1).replace(",", ""), text)
    text = pounds(text)
    text = re.sub(r"\$([0-9.,]*[0-9]+)", dollars, text)
    text = re.sub(r"([0-9]+\.[0-9]+)", lambda m: m.group(1).replace(".", " point "), text)
    text = re.sub(r"[0-9]+(st|nd|rd|th)", lambda m: ENGINE.number_to_words(m.group(0)), text)
    return re.sub(r"[0-9]+", number, text)


ABBREVIATIONS = [("mrs", "misess"), ("mr", "mister"), ("dr", "doctor"), ("st", "saint"),
                 ("co", "company"), ("jr", "junior"), ("maj", "major"), ("gen", "general"),
                 ("drs", "doctors"), ("rev", "reverend"), ("lt", "lieutenant"),
                 ("hon", "honorable"), ("sgt", "sergeant"), ("capt", "captain"),
                 ("esq", "esquire"), ("ltd", "limited"), ("col", "colonel"), ("ft", "fort")]


def english_cleaners(text):
    text = unidecode(pounds(text)).lower()
    text = numbers(text)
    for short, full in ABBREVIATIONS:
        text = re.sub(r"\b%s\." % short, full, text, flags=re.IGNORECASE)
    return re.sub(r"\s+", " ", text)


def inputs():
    rng = random.Random(1234)
    out = [str(n) for n in range(0, 130)]
    out += [str(n) for n in range(990, 3020)]
    out += [str(rng.randrange(10 ** k)) for k in range(3, 37) for _ in range(6)]
    out += ["{:,}".format(rng.randrange(10 ** k)) for k in range(4, 16) for _ in range(4)]
    out += [f"{n}{s}" for n in list(range(0, 125)) + [1000, 1005, 1999, 2000, 100000, 1000001]
            for s in ("st", "nd", "rd", "th")][::3]
    out += [f"{rng.randrange(1000)}.{rng.randrange(1000)}" for _ in range(20)]
    out += [f"${rng.randrange(100)}.{rng.randrange(100):02d}" for _ in range(20)]
    out += ["$0", "$1", "$1.00", "$0.01", "$0.99", "$1,000", "$2,500", "$1.2.3", "$5.",
            "£5", "£1,000", "£0", "£ 5"]
    out += [chr(c) for c in range(0xA0, 0x180) if c != 0xAD]
    out += ["\u2013", "\u2014", "\u2018", "\u2019", "\u201c", "\u201d", "\u2026", "\u2022",
            "\u20ac", "\u2122", "\u00e9t\u00e9", "e\u0301"]
    out += [
        "In 1999, Dr. Smith paid $3.50 for 2 tickets.",
        "Mr. and Mrs. Jones met Gen. Lee at Ft. Worth on the 4th of July, 1863.",
        "The 21st Century Co. Ltd. earned $1,234,567.89 in 2009.",
        "It cost \u00a35 \u2014 \u201ccheap\u201d, said the na\u00efve caf\u00e9 owner.",
        "Printing, in the only sense with which we are at present concerned,",
        "  Sgt. Capt. Esq. Hon. Rev. Lt. Col. Maj. Jr. Drs. St.  ",
        "Call 555 1234 at 10.30 or 3rd floor, room 101.",
        "Over 3,000,000 people, i.e. 42.5 percent, voted in 1905 and 2015.",
    ]
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "..", "data", "fixtures", "text", "english_cleaners_reference.tsv")
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write("# input<TAB>original english_cleaners output; made by tests/text/make_reference.py\n")
        for text in inputs():
            f.write(f"{text}\t{english_cleaners(text)}\n")
    print(path)


if __name__ == "__main__":
    main()
