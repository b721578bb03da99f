#!/usr/bin/env python3
"""Writes two reference files under tests/data/fixtures/text/, computed with the packages the
original Glow-TTS text pipeline used (inflect for numbers, unidecode for transliteration):
  english_cleaners_reference.tsv   input<TAB>english_cleaners output
  text_to_sequence_reference.tsv   dictionary(0|1)<TAB>input<TAB>ids (the original
                                   text_to_sequence, 148 symbols, tiny_cmudict.txt when 1)
test_text compares monoflow's C++ front-end against every line.

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


ARPABET = ("AA AA0 AA1 AA2 AE AE0 AE1 AE2 AH AH0 AH1 AH2 AO AO0 AO1 AO2 AW AW0 AW1 AW2 AY AY0 "
           "AY1 AY2 B CH D DH EH EH0 EH1 EH2 ER ER0 ER1 ER2 EY EY0 EY1 EY2 F G HH IH IH0 IH1 "
           "IH2 IY IY0 IY1 IY2 JH K L M N NG OW OW0 OW1 OW2 OY OY0 OY1 OY2 P R S SH T TH UH UH0 "
           "UH1 UH2 UW UW0 UW1 UW2 V W Y Z ZH").split()
SYMBOLS = (["_", "-"] + list("!'(),.:;? ") +
           list("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz") +
           ["@" + a for a in ARPABET])
SYMBOL_ID = {s: i for i, s in enumerate(SYMBOLS)}


def read_cmudict(path):
    entries = {}
    with open(path, encoding="latin-1") as f:
        for line in f:
            if line and ("A" <= line[0] <= "Z" or line[0] == "'"):
                parts = line.split("  ")
                word = re.sub(r"\([0-9]+\)", "", parts[0])
                pron = parts[1].strip().split(" ")
                if all(p in ARPABET for p in pron):
                    entries.setdefault(word, []).append(" ".join(pron))
    return entries


def symbol_ids(text):
    return [SYMBOL_ID[c] for c in text if c in SYMBOL_ID and c not in ("_", "~")]


def arpabet_ids(text):
    return symbol_ids(["@" + p for p in text.split()])


def text_to_sequence(text, dictionary):
    seq = []
    space = symbol_ids(" ")
    while len(text):
        m = re.match(r"(.*?)\{(.+?)\}(.*)", text)
        if not m:
            clean = english_cleaners(text)
            if dictionary is not None:
                for word in clean.split(" "):
                    pron = dictionary.get(word.upper())
                    seq += arpabet_ids(pron[0]) if pron else symbol_ids(word)
                    seq += space
            else:
                seq += symbol_ids(clean)
            break
        seq += symbol_ids(english_cleaners(m.group(1)))
        seq += arpabet_ids(m.group(2))
        text = m.group(3)
    if dictionary is not None and seq and seq[-1] == space[0]:
        seq = seq[:-1]
    return seq


SENTENCES = [
    "Hello world", "Hello, world.", "hello   WORLD the cat", "The cat read the world.",
    "Turn left on {HH AW1 S T AH0 N} Street.", "{K AE1 T} and {DH AH0} hello",
    "a {HH AW1} b {XX9 K} c", "the {} cat", "no closing {brace here", "{HH AH0 L OW1}",
    "Dr. Smith read 2 books in 1999; 'tis the 21st time!", "under_score and ~tilde # hash",
    "caf\u00e9 na\u00efve \u201cquoted\u201d \u2014 the end", "  leading and trailing  ",
    "What? Really!? (Yes: really.)", "'tis the cat's hat", "HELLO hello Hello hElLo",
    "$3.50 for the cat", "It cost \u00a35, the world said.",
]


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
    dictionary = read_cmudict(os.path.join(here, "..", "data", "fixtures", "text", "tiny_cmudict.txt"))
    path = os.path.join(here, "..", "data", "fixtures", "text", "text_to_sequence_reference.tsv")
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write("# dictionary<TAB>input<TAB>ids of the original text_to_sequence; "
                "made by tests/text/make_reference.py\n")
        for use_dict in (0, 1):
            for text in SENTENCES:
                ids = text_to_sequence(text, dictionary if use_dict else None)
                f.write(f"{use_dict}\t{text}\t{','.join(map(str, ids))}\n")
    print(path)


if __name__ == "__main__":
    main()
