#!/usr/bin/env python3
"""Sum a CPU Kineto trace (`bench_inference --device cpu --profile trace.json`, or
`bench_train_step --device cpu --profile PREFIX`) by ATen op.

Per op name: self time (its own duration less that of the ops it called), calls, and the
share of the wall time of the "monoflow_call" (inference) or "monoflow_step" (training)
ranges. Ops run on the calling thread; the intra-op worker threads' time shows up inside the op
that waited for them. With --shapes, per op name and input shapes (the benchmarks record them
on the CPU), which tells one call site from another. A custom autograd function's forward is no
ATen op: monoflow's CPU ones name theirs to the profiler (RECORD_FUNCTION, rows "monoflow::..."),
their backwards are the "torch::autograd::CppNode<...>" rows.

    python3 scripts/profile_cpu_ops.py trace.json [--top 25] [--shapes]
"""
import argparse
import collections
import json


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--shapes", action="store_true", help="one row per op and input shapes")
    args = ap.parse_args()
    events = json.load(open(args.trace))["traceEvents"]
    calls = [e for e in events if e.get("ph") == "X" and e.get("name") in ("monoflow_call", "monoflow_step")]
    ops = [e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    wall = sum(c["dur"] for c in calls)
    self_us = collections.Counter()
    count = collections.Counter()
    by_thread = collections.defaultdict(list)

    def key(e):  # what a row sums: the op, or the op and its input shapes
        if not args.shapes:
            return e["name"]
        return f'{e["name"]} {e.get("args", {}).get("Input Dims", "")}'

    for e in ops:
        by_thread[e["tid"]].append(e)
    for evs in by_thread.values():
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []  # [event, child time]
        for e in evs:
            while stack and stack[-1][0]["ts"] + stack[-1][0]["dur"] <= e["ts"]:
                done, child = stack.pop()
                self_us[key(done)] += done["dur"] - child
            if stack:
                stack[-1][1] += e["dur"]
            stack.append([e, 0])
            count[key(e)] += 1
        while stack:
            done, child = stack.pop()
            self_us[key(done)] += done["dur"] - child
    n = max(len(calls), 1)
    total = sum(self_us.values())
    print(f"{len(calls)} calls, {wall / n / 1000:.1f} ms per call; ops' self time {total / n / 1000:.1f} ms per call")
    width = 100 if args.shapes else 44
    print(f"{'op':{width}s} {'ms/call':>8s} {'share':>6s} {'calls/call':>10s}")
    for name, us in self_us.most_common(args.top):
        print(f"{name[:width]:{width}s} {us / n / 1000:8.2f} {100 * us / max(wall, 1):5.1f}% {count[name] / n:10.0f}")


if __name__ == "__main__":
    main()
