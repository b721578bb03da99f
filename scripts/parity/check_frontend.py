#!/usr/bin/env python3
"""Both trainers must see the same data: the official front-end (TextMelLoader.get_text: its
cleaners, its CMUdict when the config names one, its blanks) must give, for every utterance of
the filelists, the token ids that monoflow's training reads (tokens.tsv, written by
`preprocess --npy-out`), and the mel the official loader reads must be monoflow's (same file).

Usage: check_frontend.py --official DIR --config CONFIG.json --tokens tokens.tsv [--differ-out IDS] LIST...
Prints the count of utterances compared and exits 1 naming the first ones that differ; with
--differ-out, writes their ids there (one a line) for run.sh to leave out of both sides' lists.
One known difference: monoflow reads "£5" as "five pounds", where the official cleaners turn "£"
into "PS" before their pounds rule can fire (src/data/text/README.md).
"""
import argparse
import os
import sys

from hparams import load_hparams



def main():
    p = argparse.ArgumentParser()
    p.add_argument("--official", required=True)
    p.add_argument("--config", required=True)
    p.add_argument("--tokens", required=True)
    p.add_argument("--differ-out")
    p.add_argument("lists", nargs="+")
    args = p.parse_args()
    sys.path.insert(0, os.path.abspath(args.official))
    from data_utils import TextMelLoader

    hps = load_hparams(args.config)
    want = {}
    with open(args.tokens) as f:
        next(f)
        for line in f:
            uid, ids = line.rstrip("\n").split("\t")
            want[uid] = [int(t) for t in ids.split()]
    compared, differ, differ_ids = 0, [], []
    for path in args.lists:
        loader = TextMelLoader(path, hps.data)
        with open(path) as f:
            for n, line in enumerate(f, start=1):
                mel_path, text = line.rstrip("\n").split("|")[:2]
                uid = os.path.splitext(os.path.basename(mel_path))[0]
                if uid not in want:
                    differ.append(f"{path}:{n}: {uid} is not in {args.tokens}")
                    continue
                got = loader.get_text(text).tolist()
                compared += 1
                if got != want[uid]:
                    differ_ids.append(uid)
                    differ.append(f"{path}:{n}: {uid}: official {got} != monoflow {want[uid]}")
    print(f"check_frontend: {compared} utterances compared, {len(differ)} differ")
    for d in differ[:10]:
        print("  " + d)
    if args.differ_out:
        with open(args.differ_out, "w") as f:
            f.write("".join(uid + "\n" for uid in differ_ids))
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
