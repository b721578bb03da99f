#!/usr/bin/env python3
"""The parity report from what scripts/parity/run.sh leaves in WORK:

  runs/<corpus>/<side>-s<seed>/   official: progress.jsonl (step, train_s); monoflow: metrics.jsonl
                                  (time/step_ms per log line, summed into the time at each step)
  evals.jsonl                     evaluate.py's measures per run and checkpoint step
  aligns.jsonl                    per run and step, the score_alignment.py JSON of align's output
  recipe/<corpus>/<name>/score.json  the alignment recipe: each run's checkpoints alone
                                  (s<seed>-ckpt_<step>) and the runs together (final; its
                                  seeds.txt names them, where run.sh wrote it), and again
                                  with RECIPE_COMPARE's align arguments (final-compare; its
                                  args.txt and seeds.txt name them)

Tables per corpus (mean over seeds, min..max beside it):
1. Equal steps (the last): validation MLE / duration / total, the fixed sentence's mel L1 and
   frames, alignment median |error| and share within 25 ms; then each run's total and alignment.
2. Equal wall-clock: at the time monoflow's default side (--default-side: bf16 on a GPU, float32
   on a CPU) took for its last step, each
   official run's last checkpoint saved by then.
3. Time to target: the official runs' mean validation total at the last step is the target; the
   training time each run needs to reach it (linear between checkpoints), and the ratio.

4. The alignment recipe, where it ran: per corpus, each scored checkpoint and the runs together,
   median |error|, median signed error and the shares within 10 / 25 / 50 ms.

--list-align prints "run step checkpoint" for the checkpoints the tables need aligned.
"""
import argparse
import glob
import json
import os
import statistics
import sys

def read_jsonl(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def run_times(run_dir):
    """{step: training seconds so far} at each saved step."""
    progress = read_jsonl(os.path.join(run_dir, "progress.jsonl"))
    if progress:
        return {p["step"]: p["train_s"] for p in progress}
    times, total, last = {}, 0.0, 0
    for m in read_jsonl(os.path.join(run_dir, "metrics.jsonl")):
        if "time/step_ms" not in m:
            continue
        total += m["time/step_ms"] * (m["step"] - last) / 1000.0
        last = m["step"]
        times[m["step"]] = total
    return times


def time_at(times, step):
    """Training seconds at `step`, linear between the steps that have a time."""
    if step in times:
        return times[step]
    known = sorted(times)
    below = [s for s in known if s < step]
    above = [s for s in known if s > step]
    if not below or not above:
        return times[below[-1]] if below else None
    a, b = below[-1], above[0]
    return times[a] + (times[b] - times[a]) * (step - a) / (b - a)


def checkpoint_path(work, run, step):
    d = os.path.join(work, "runs", run)
    for pattern in (f"official/ckpt_{step:09d}.pth", f"G_{step}.pth"):
        found = glob.glob(os.path.join(d, pattern))
        if found:
            return found[0]

    return None


def spread(values, fmt="{:.3f}"):
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    mean = statistics.mean(values)
    if len(values) == 1:
        return fmt.format(mean)
    return f"{fmt.format(mean)} ({fmt.format(min(values))}..{fmt.format(max(values))})"


def recipe_tables(work):
    """The alignment recipe's scores, one table per corpus (nothing where the recipe did not run)."""
    out = []
    for corpus_dir in sorted(glob.glob(os.path.join(work, "recipe", "*", ""))):
        corpus = os.path.basename(os.path.dirname(corpus_dir))
        scores = []
        for path in sorted(glob.glob(os.path.join(corpus_dir, "*", "score.json"))):
            folder = os.path.dirname(path)
            name = os.path.basename(folder)
            if name in ("final", "final-compare"):
                name = "runs together"
                args = os.path.join(folder, "args.txt")
                if os.path.exists(args):  # final-compare: the same runs, RECIPE_COMPARE's align arguments
                    with open(args) as f:
                        name += f", align {f.read().strip()}"
                seeds = os.path.join(folder, "seeds.txt")
                if os.path.exists(seeds):  # which runs (run.sh leaves failed ones out)
                    with open(seeds) as f:
                        name += f" (seeds {', '.join(f.read().split())})"
            with open(path) as f:
                scores.append((name, json.load(f)))
        # The recipe's figure last, and after it the same runs with the compared align arguments.
        scores.sort(key=lambda item: (item[0].startswith("runs together"), item[0].startswith("runs together, align")))
        if not scores:
            continue
        out.append(f"## {corpus}: alignment recipe\n\n| checkpoints | median abs. ms | median signed ms "
                   f"| within 10 ms | 25 ms | 50 ms |\n|---|---|---|---|---|---|")
        for name, a in scores:
            out.append(f"| {name} | {a['median_abs_ms']:.1f} | {a['median_signed_ms']:+.1f} | "
                       f"{100 * a['within_10ms']:.1f}% | {100 * a['within_25ms']:.1f}% | {100 * a['within_50ms']:.1f}% |")
        out.append("")
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--work", required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--list-align", action="store_true")
    p.add_argument("--default-side", default="monoflow-bf16", help="the side the equal-wall-clock table measures against")
    args = p.parse_args()
    work = args.work

    evals = {}
    for e in read_jsonl(os.path.join(work, "evals.jsonl")):
        evals.setdefault(e["run"], {})[e["step"]] = e
    runs = sorted(evals)
    times = {r: run_times(os.path.join(work, "runs", r)) for r in runs}
    corpora = sorted({r.split("/")[0] for r in runs})

    def side_of(run):
        return run.split("/")[1].rsplit("-s", 1)[0]

    def runs_of(corpus, side):
        return [r for r in runs if r.startswith(corpus + "/") and side_of(r) == side]

    # The equal-wall-clock budget per corpus and each official run's checkpoint within it.
    budget, at_budget = {}, {}
    for corpus in corpora:
        ref = [times[r].get(args.steps) for r in runs_of(corpus, args.default_side)]
        ref = [t for t in ref if t is not None]
        if not ref:
            continue
        budget[corpus] = statistics.mean(ref)
        for r in runs:
            if r.startswith(corpus + "/") and side_of(r).startswith("official"):
                within = [s for s, t in times[r].items() if t <= budget[corpus] and s in evals[r]]
                at_budget[r] = max(within) if within else None

    if args.list_align:
        for r in runs:
            steps = {args.steps}
            if at_budget.get(r):
                steps.add(at_budget[r])
            for s in sorted(steps):
                c = checkpoint_path(work, r, s)
                if c:
                    print(r, s, c)
        return

    aligns = {}
    for a in read_jsonl(os.path.join(work, "aligns.jsonl")):
        if os.path.exists(a["score"]):
            with open(a["score"]) as f:
                aligns[(a["run"], a["step"])] = json.load(f)

    def measures(run, step):
        e = evals.get(run, {}).get(step)
        a = aligns.get((run, step), {})
        if not e:
            return None
        return {"mle": e["val_mle"], "dur": e["val_duration"], "total": e["val_total"], "l1": e["sent_l1"],
                "frames": e["sent_frames"] / e["sent_true_frames"], "time": times[run].get(step),
                "align_med": a.get("median_abs_ms"),
                "align_25": 100 * a["within_25ms"] if "within_25ms" in a else None,
                "align_signed": a.get("median_signed_ms"), "step": step}

    header = ("| side | runs | val MLE | val duration | val total | sentence mel L1 | frames / recording's "
              "| align median ms | within 25 ms % | train s |")
    rule = "|" + "---|" * 10
    recipe = recipe_tables(work)
    if runs:
        print(f"# Parity with the official trainer ({args.steps} steps)\n")
    elif recipe:
        print("# Alignment recipe\n")
    for corpus in corpora:
        sides = sorted({side_of(r) for r in runs if r.startswith(corpus + "/")})
        left_out = os.path.join(work, "data", corpus, "left_out.txt")
        ids = open(left_out).read().split() if os.path.exists(left_out) else []
        note = (f"Left out of both sides' lists, their front-ends' tokens differing: {', '.join(ids)}.\n\n"
                if ids else "")
        print(f"## {corpus}\n\n{note}Equal steps ({args.steps}):\n\n{header}\n{rule}")
        for side in sides:
            ms = [m for m in (measures(r, args.steps) for r in runs_of(corpus, side)) if m]
            print(f"| {side} | {len(ms)} | " + " | ".join(
                spread([m[k] for m in ms], f) for k, f in (("mle", "{:.3f}"), ("dur", "{:.3f}"), ("total", "{:.3f}"),
                                                           ("l1", "{:.3f}"), ("frames", "{:.2f}"),
                                                           ("align_med", "{:.1f}"), ("align_25", "{:.1f}"),
                                                           ("time", "{:.1f}"))) + " |")
        # Each run on its own: a mean over three seeds hides which seed collapsed.
        print(f"\nBy run at step {args.steps}: validation total, within 25 ms (median signed error):\n")
        for side in sides:
            cells = []
            for r in sorted(runs_of(corpus, side), key=lambda r: int(r.rsplit("-s", 1)[1])):
                m = measures(r, args.steps)
                if not m:
                    continue
                cell = f"s{r.rsplit('-s', 1)[1]} {m['total']:.3f}"
                if m["align_25"] is not None:
                    cell += f", {m['align_25']:.1f}% ({m['align_signed']:+.1f} ms)"
                cells.append(cell)
            print(f"- {side}: " + "; ".join(cells))
        # The reference: the official in TF32 where it ran, else its fp16 (the ljspeech.yaml-size pair).
        reference = next((s for s in ("official-tf32", "official-fp16", "official-fp32") if runs_of(corpus, s)),
                         "official-tf32")
        official = [measures(r, args.steps) for r in runs_of(corpus, reference)]
        official = [m for m in official if m]
        if official:
            totals = [m["total"] for m in official]
            print(f"\n{reference} seed-to-seed spread of the validation total: {min(totals):.3f}..{max(totals):.3f} "
                  f"({max(totals) - min(totals):.3f}).")
        if corpus in budget:
            print(f"\nEqual wall-clock ({budget[corpus]:.1f} s of training, {args.default_side}'s mean for "
                  f"{args.steps} steps):\n\n{header.replace('| runs |', '| runs (step) |')}\n{rule}")
            for side in sides:
                rs = runs_of(corpus, side)
                if side.startswith("official"):
                    ms = [m for m in (measures(r, at_budget.get(r)) for r in rs) if m]
                else:
                    ms = [m for m in (measures(r, args.steps) for r in rs) if m]
                steps = "/".join(str(m["step"]) for m in ms)
                print(f"| {side} | {len(ms)} ({steps}) | " + " | ".join(
                    spread([m[k] for m in ms], f) for k, f in (("mle", "{:.3f}"), ("dur", "{:.3f}"),
                                                               ("total", "{:.3f}"), ("l1", "{:.3f}"),
                                                               ("frames", "{:.2f}"), ("align_med", "{:.1f}"),
                                                               ("align_25", "{:.1f}"), ("time", "{:.1f}"))) + " |")
        if official:
            target = statistics.mean(m["total"] for m in official)
            official_s = statistics.mean(m["time"] for m in official)
            print(f"\nTime to target (validation total {target:.3f}, {reference}'s mean at step {args.steps}, "
                  f"reached by them in {official_s:.1f} s):\n\n| side | seconds to target | official / this |\n|---|---|---|")
            for side in sides:
                reached = []
                for r in runs_of(corpus, side):
                    pts = sorted((s, e["val_total"]) for s, e in evals[r].items())
                    t = None
                    for (s0, v0), (s1, v1) in zip([(0, float("inf"))] + pts, pts):
                        if v1 <= target:
                            frac = 1.0 if v0 == float("inf") or v0 == v1 else (v0 - target) / (v0 - v1)
                            t = time_at(times[r], s0 + frac * (s1 - s0)) if s0 else time_at(times[r], s1)
                            break
                    reached.append(t)
                got = [t for t in reached if t is not None]
                ratio = f"{official_s / statistics.mean(got):.1f}x" if got else "-"
                print(f"| {side} | {spread(got, '{:.1f}')} ({len(got)} of {len(reached)} reached) | {ratio} |")
        print()
    if recipe:
        print("\n".join(recipe))


if __name__ == "__main__":
    sys.exit(main())
