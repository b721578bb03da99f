#!/usr/bin/env python3
"""A third synthesizer's voice for the alignment benchmark: the project's sentences spoken by
Festival (Debian's festival with festvox-kallpc16k: kal_diphone, an American English male
diphone voice) as an LJSpeech-format folder with Festival's own word timings, the layout
scripts/make_corpus.sh writes for espeak-ng and flite_corpus.c for flite:

    <out>/metadata.csv    id|text|text
    <out>/wavs/<id>.wav   Festival's rate (16 kHz for kal_diphone), 16-bit mono; monoflow resamples
    <out>/words/<id>.tsv  word<TAB>start_s<TAB>end_s per word of Festival's Word relation, from
                          the start of its first segment to the end of its last (SylStructure)

    python3 scripts/parity/festival_corpus.py scripts/corpus/sentences.txt data/kal-corpus [fst] \
        [--voice kal_diphone]

Festival's cmu_us_slt_arctic_hts voice is kept for checks made outside this project: do not
render it here. One Festival process renders every sentence (a Scheme program written beside the
corpus, render.scm). Words are Festival's after its own text normalisation ("7:15" gives "seven",
"fifteen"), which score_alignment.py pairs with the text's words as it does for the other voices.
"""
import argparse
import os
import shutil
import subprocess
import sys

RENDER = r"""
(define (write_word fd w)
  (let ((syllables (item.relation w 'SylStructure)))
    (if (and syllables (item.daughter1 syllables) (item.daughter1 (item.daughter1 syllables)))
        (format fd "%s\t%f\t%f\n" (item.name w)
                (item.feat (item.daughter1 (item.daughter1 syllables)) 'segment_start)
                (item.feat (item.daughtern (item.daughtern syllables)) 'end)))))
(define (render text wav tsv)
  (let ((utt (utt.synth (eval (list 'Utterance 'Text text)))) (fd (fopen tsv "w")))
    (utt.save.wave utt wav 'riff)
    (format fd "word\tstart_s\tend_s\n")
    (mapcar (lambda (w) (write_word fd w)) (utt.relation.items utt 'Word))
    (fclose fd)))
"""


def scheme_string(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def written(out, uid):
    tsv = os.path.join(out, "words", uid + ".tsv")
    return os.path.exists(os.path.join(out, "wavs", uid + ".wav")) and os.path.exists(tsv) and os.path.getsize(tsv) > 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sentences", help="one sentence per line (scripts/corpus/sentences.txt)")
    ap.add_argument("out", help="output folder")
    ap.add_argument("prefix", nargs="?", default="fst", help="utterance id prefix (fst: fst-0001, ...)")
    ap.add_argument("--voice", default="kal_diphone", help="Festival voice, as voice_<name> names it")
    a = ap.parse_args()
    if a.voice == "cmu_us_slt_arctic_hts":
        sys.exit("festival_corpus: cmu_us_slt_arctic_hts is reserved for checks made outside this project")
    if shutil.which("festival") is None:
        sys.exit("festival_corpus: no festival on PATH (apt-get install festival festvox-kallpc16k)")
    with open(a.sentences, encoding="utf-8") as f:
        sentences = [line.strip() for line in f if line.strip()]
    for sub in ("wavs", "words"):
        os.makedirs(os.path.join(a.out, sub), exist_ok=True)
    ids = [f"{a.prefix}-{n:04d}" for n in range(1, len(sentences) + 1)]
    program = [f"(voice_{a.voice})", RENDER]
    for uid, text in zip(ids, sentences):
        wav = os.path.join(a.out, "wavs", uid + ".wav")
        tsv = os.path.join(a.out, "words", uid + ".tsv")
        program.append(f"(render {scheme_string(text)} {scheme_string(wav)} {scheme_string(tsv)})")
    script = os.path.join(a.out, "render.scm")
    with open(script, "w", encoding="utf-8") as f:
        f.write("\n".join(program) + "\n")
    # festival -b exits 0 after a Scheme error too: check that every file was written.
    subprocess.run(["festival", "-b", script], check=True)
    missing = [uid for uid in ids if not written(a.out, uid)]
    if missing:
        sys.exit(f"festival_corpus: Festival wrote no wav or word timings for {len(missing)} sentence(s), "
                 f"first {missing[0]} (see the messages above; the program is {script})")
    with open(os.path.join(a.out, "metadata.csv"), "w", encoding="utf-8") as f:
        f.writelines(f"{uid}|{text}|{text}\n" for uid, text in zip(ids, sentences))
    print(f"festival_corpus: {len(ids)} utterances of voice {a.voice} in {a.out}")


if __name__ == "__main__":
    main()
