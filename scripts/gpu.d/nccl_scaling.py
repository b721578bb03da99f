#!/usr/bin/env python3
"""Tables and CSV of scripts/gpu.d/nccl.sh (data-parallel scaling over 1, 2, 4, 8 GPUs).

  nccl_scaling.py synthetic --csv OUT.csv 1=bench_1.csv 2=bench_2.csv ...
      bench_train_step's CSV per GPU count (columns of train::csv_header(): backend, precision,
      mode, B, step_ms, step_ms_p90, ranks, nonfinite_steps, ...); rows of a run that was
      stopped part-way are used as far as they go.
  nccl_scaling.py corpus --csv OUT.csv --steps S --batch B [--mode graph] [--no-weights] PREC:N=RUN_DIR:LOG ...
      `train`'s metrics.jsonl per run ({"step":..,"epoch":..,"loss/mle":..,"time/step_ms":..}, one
      line per log interval); its log's start line gives the epoch arithmetic; with N > 1, rank 0's
      last checkpoint is compared with every rank<r>_final.pt (MONOFLOW_DEBUG_RANK_CHECKPOINTS),
      through Python torch.

Per workload, precision and mode, one table: step ms per GPU count, throughput N x batch / step
ms, its ratio to one GPU's (speed-up) and speed-up / N (efficiency). Rows are appended to --csv
(header written when the file is new): workload, precision, mode, gpus, step_ms, step_ms_p90,
speedup, efficiency, batch_per_gpu. Exit status 1 when a run is missing or failed, a loss is not
finite, or a rank's weights differ from rank 0's.
"""
import argparse
import csv
import glob
import json
import math
import os
import re
import statistics
import sys

CSV_COLUMNS = ["workload", "precision", "mode", "gpus", "step_ms", "step_ms_p90", "speedup", "efficiency",
               "batch_per_gpu"]


def append_csv(path, rows):
    new = not os.path.exists(path) or os.path.getsize(path) == 0
    with open(path, "a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        if new:
            w.writeheader()
        for r in rows:
            w.writerow(r)


def fmt(x, spec):
    return "" if x is None else format(x, spec)


def scaling(points):
    """points: {gpus: (step_ms, p90 or None, batch_per_gpu)} -> {gpus: (speedup, efficiency)} against 1 GPU."""
    if 1 not in points:
        return {}
    one = points[1][2] / points[1][0]
    return {n: ((n * b / ms) / one, (n * b / ms) / one / n) for n, (ms, _, b) in points.items()}


def print_table(title, points, notes, missing):
    """points as scaling(); notes: {gpus: text}; missing: {gpus: why}. Returns the CSV-ready figures."""
    print("== " + title)
    print("| GPUs | step ms (p90) | utterances/s | speed-up vs 1 GPU | efficiency | |")
    print("|---|---|---|---|---|---|")
    ratios = scaling(points)
    for n in sorted(set(points) | set(missing)):
        if n in missing:
            print("| %d | %s | | | | |" % (n, missing[n]))
            continue
        ms, p90, b = points[n]
        ratio, eff = ratios.get(n, (None, None))
        print("| %d | %.1f%s | %.0f | %s | %s | %s |" % (
            n, ms, "" if p90 is None else " (%.1f)" % p90, 1000.0 * n * b / ms,
            "baseline" if n == 1 else ("%.2fx" % ratio if ratio is not None else "no 1-GPU run"),
            "" if n == 1 or eff is None else "%.0f%%" % (100 * eff), notes.get(n, "")))
    return ratios


def read_bench_csv(path):
    """bench_train_step's CSV (its stdout or --csv file); lines that are not rows are skipped."""
    rows = []
    if not os.path.exists(path):
        return rows
    with open(path) as f:
        lines = [l for l in f if l.strip()]
    header = None
    for line in lines:
        if line.startswith("backend,precision,mode,"):
            header = line.strip().split(",")
            continue
        if header is None:
            continue
        fields = line.strip().split(",")
        if len(fields) != len(header):
            continue
        rows.append(dict(zip(header, fields)))
    return rows


def cmd_synthetic(args):
    runs = {}
    for spec in args.runs:
        n, path = spec.split("=", 1)
        runs[int(n)] = read_bench_csv(path)
    keys = []  # (backend, precision, mode) in the order of the 1-GPU run, then any others
    for n in sorted(runs):
        for r in runs[n]:
            k = (r["backend"], r["precision"], r["mode"])
            if k not in keys:
                keys.append(k)
    ok = True
    out = []
    if not keys:
        print("synthetic: no benchmark rows in any run")
        return 1
    for backend, precision, mode in keys:
        points, notes, missing = {}, {}, {}
        for n in sorted(runs):
            row = next((r for r in runs[n] if (r["backend"], r["precision"], r["mode"]) == (backend, precision, mode)),
                       None)
            if row is None:
                missing[n] = "no row (run failed or stopped; see nccl_bench_%d.log)" % n
                ok = False
                continue
            ranks = int(row.get("ranks", n))
            if ranks != n:
                notes[n] = "ran %d rank(s), not %d" % (ranks, n)
                ok = False
            points[n] = (float(row["step_ms"]), float(row["step_ms_p90"]), int(row["B"]))
            extra = []
            if int(row.get("nonfinite_steps", 0)):
                extra.append("%s non-finite steps!" % row["nonfinite_steps"])
                ok = False
            if n > 1 and row.get("grad_buckets"):
                extra.append("%s of %s buckets summed during backward" % (row.get("buckets_in_backward", "?"),
                                                                         row["grad_buckets"]))
            if extra:
                notes[n] = "; ".join(filter(None, [notes.get(n, "")] + extra))
        ratios = print_table("synthetic batches (bench_train_step, %s), %s, %s, %s per GPU" % (
            backend, precision, mode, "/".join(sorted({str(b) for _, _, b in points.values()})) or "?"),
            points, notes, missing)
        for n in sorted(points):
            ms, p90, b = points[n]
            ratio, eff = ratios.get(n, (None, None))
            out.append({"workload": "synthetic", "precision": precision, "mode": mode, "gpus": n,
                        "step_ms": "%.2f" % ms, "step_ms_p90": "%.2f" % p90, "speedup": fmt(ratio, ".3f"),
                        "efficiency": fmt(eff, ".3f"), "batch_per_gpu": b})
    if args.csv:
        append_csv(args.csv, out)
    return 0 if ok else 1


START = re.compile(r"(\d+) training utterances, (\d+) batches per epoch")


def epoch_note(log_path, n, batch):
    """What an epoch of the corpus is with n ranks of `batch` (BucketBatchSampler, drop_last off):
    the length-sorted list of G batches is padded by repeating its first ones to a multiple of n,
    and each step deals n neighbours in length to the ranks, which all pad to the longest."""
    if not log_path or not os.path.exists(log_path):
        return None
    with open(log_path, errors="replace") as f:
        m = START.search(f.read())
    if not m:
        return None
    utts, per_rank = int(m.group(1)), int(m.group(2))
    g = -(-utts // batch)
    repeated = per_rank * n - g
    text = "%d steps/epoch" % per_rank
    if n > 1:
        text += ", %d of %d batches repeated" % (repeated, g) if repeated else ", no batch repeated"
        text += ", each step pads %d of the %d length-sorted batches to the longest" % (n, g)
    return text, utts, per_rank, repeated


def corpus_run(run_dir, steps):
    """The median logged step time after the first quarter, its range, the last losses."""
    path = os.path.join(run_dir, "metrics.jsonl")
    if not os.path.exists(path):
        return None, "no metrics.jsonl"
    rows = []
    with open(path) as f:
        for line in f:
            try:
                rows.append(json.loads(line))
            except ValueError:
                pass  # a line cut by a killed run
    train = [r for r in rows if "loss/mle" in r and "time/step_ms" in r]
    timed = [r for r in train if r["step"] > steps // 4 and r.get("time/step_ms")]
    if len(timed) < 3:
        return None, "%d logged interval(s) after step %d (last step %s)" % (
            len(timed), steps // 4, train[-1]["step"] if train else "none")
    last = train[-1]
    finite = all(isinstance(last.get(k), (int, float)) and math.isfinite(last[k]) for k in ("loss/mle", "loss/dur"))
    return {"ms": statistics.median(r["time/step_ms"] for r in timed), "first": timed[0]["step"],
            "last": timed[-1]["step"], "final": last["step"], "mle": last.get("loss/mle"),
            "dur": last.get("loss/dur"), "finite": finite}, None


def compare_weights(run_dir, n):
    """Rank 0's last checkpoint against rank r's final weights, r = 1..n-1: (ok, text)."""
    try:
        import torch
    except ImportError:
        return False, "weights not compared: no Python torch here"
    ckpts = sorted(glob.glob(os.path.join(run_dir, "checkpoints", "ckpt_*.pt")))
    if not ckpts:
        return False, "weights not compared: rank 0 wrote no checkpoint"
    def load(path):
        try:
            return torch.jit.load(path, map_location="cpu").state_dict(), None
        except Exception as e:  # a damaged file is a finding, not the end of the tables
            return None, "%s: %s" % (os.path.basename(path), (str(e).splitlines() or [type(e).__name__])[0][:160])

    a, err = load(ckpts[-1])
    if a is None:
        return False, "weights not compared: cannot read " + err
    keys = [k for k in a if k.startswith("model.")]
    if not keys:
        return False, "no model.* tensors in %s; its keys start: %s" % (ckpts[-1], list(a)[:5])
    differ, absent = [], []
    for r in range(1, n):
        p = os.path.join(run_dir, "rank%d_final.pt" % r)
        if not os.path.exists(p):
            absent.append(r)
            continue
        b, err = load(p)
        if b is None:
            differ.append("rank %d: cannot read %s" % (r, err))
            continue
        bad = sum(1 for k in keys if k not in b or not torch.equal(a[k], b[k]))
        if bad:
            differ.append("rank %d: %d tensor(s) differ" % (r, bad))
    text = "rank 0's %s against ranks 1-%d's final weights, %d tensors each: " % (
        os.path.basename(ckpts[-1]), n - 1, len(keys))
    if absent:
        text += "rank(s) %s wrote no rank<r>_final.pt; " % ", ".join(map(str, absent))
    text += "; ".join(differ) if differ else ("identical" if not absent else "the others identical")
    return not differ and not absent, text


def cmd_corpus(args):
    ok = True
    runs = {}  # precision -> {n: (run_dir, log)}
    for spec in args.runs:
        head, rest = spec.split("=", 1)
        precision, n = head.split(":")
        run_dir, _, log = rest.partition(":")
        runs.setdefault(precision, {})[int(n)] = (run_dir, log)
    out = []
    for precision, by_n in runs.items():
        points, notes, missing, checks = {}, {}, {}, []
        for n in sorted(by_n):
            run_dir, log = by_n[n]
            epoch = epoch_note(log, n, args.batch)
            r, why = corpus_run(run_dir, args.steps)
            if r is None:
                missing[n] = why
                ok = False
                continue
            points[n] = (r["ms"], None, args.batch)
            note = "steps %d-%d; step %d mle %.4f dur %.4f" % (r["first"] - args.log_interval + 1, r["last"], r["final"],
                                                                r["mle"] if r["finite"] else float("nan"),
                                                                r["dur"] if r["finite"] else float("nan"))
            if not r["finite"]:
                ok = False
            if r["final"] < args.steps:
                note += " (stopped at step %d of %d)" % (r["final"], args.steps)
            if epoch:
                note += "; " + epoch[0]
            notes[n] = note
            if n > 1 and not args.no_weights:
                same, text = compare_weights(run_dir, n)
                checks.append("%d GPUs: %s" % (n, text))
                ok = ok and same
        ratios = print_table("default corpus (train, ljspeech.yaml model), %s, %s, %d per GPU, %d steps" % (
            precision, args.mode, args.batch, args.steps), points, notes, missing)
        for line in checks:
            print(line)
        for n in sorted(points):
            ms, _, b = points[n]
            ratio, eff = ratios.get(n, (None, None))
            out.append({"workload": "corpus", "precision": precision, "mode": args.mode, "gpus": n,
                        "step_ms": "%.2f" % ms, "step_ms_p90": "", "speedup": fmt(ratio, ".3f"),
                        "efficiency": fmt(eff, ".3f"), "batch_per_gpu": b})
    if args.csv:
        append_csv(args.csv, out)
    return 0 if ok else 1


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="workload", required=True)
    s = sub.add_parser("synthetic")
    s.add_argument("--csv")
    s.add_argument("runs", nargs="+", help="N=bench.csv")
    c = sub.add_parser("corpus")
    c.add_argument("--csv")
    c.add_argument("--steps", type=int, required=True)
    c.add_argument("--batch", type=int, required=True)
    c.add_argument("--log-interval", type=int, default=10)
    c.add_argument("--mode", default="graph")
    c.add_argument("--no-weights", action="store_true", help="skip the checkpoint comparison (tests without torch)")
    c.add_argument("runs", nargs="+", help="PRECISION:N=RUN_DIR:LOG")
    args = p.parse_args()
    return cmd_synthetic(args) if args.workload == "synthetic" else cmd_corpus(args)


if __name__ == "__main__":
    sys.exit(main())
