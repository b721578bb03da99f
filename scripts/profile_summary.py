#!/usr/bin/env python3
"""Summarise a Kineto Chrome trace written by `bench_train_step --profile PREFIX` (or by
`bench_inference --device cuda --profile trace.json` with `--range monoflow_call`).

Each profiled step sits inside a "monoflow_step" range (an inference call: "monoflow_call"; the
device is synchronised at its end). Per step: wall time, GPU busy time (union of kernel, memcpy and memset intervals) and
its share of the wall time, kernel count, ATen op count, and the CUDA runtime calls that
matter for host-boundness (launches, graph launches, synchronisations, copies). Then the
kernels that take the most GPU time, grouped by a short name.

    python3 scripts/profile_summary.py trace.json [--top 15]

Eager traces also get the GPU time by launching op: each kernel is tied to its launch through
the CUPTI correlation id, and the launch to the ATen ops around it on the host thread, named
"outer / inner" (outer: the autograd node for backward work, else the outermost op). And by
part of the model: the model and the step name their parts with "monoflow::..." scopes (text
encoder, each flow kind, MAS and prior, loss, clip and optimizer); a forward kernel belongs to
the innermost scope around its launch, a backward kernel to the scope of the forward op its
autograd node differentiates (their common "Sequence number"; a node of monoflow's own
autograd functions, which has no forward op of its number, that of the forward op made just
before it), and each part is split into
kernel classes (matrix/convolution, element-wise, reduction, copy, monoflow's own kernels).

A CUDA graph's replay launches its kernels with no ops around them. `--names-from EAGER` gives
each kernel of the trace that has none the part and op that kernels of the same name, grid and
block have most often in an eager trace of the same step (`bench_train_step --modes
eager-padded`, which runs the graphs' padded shapes), or failing that those of every kernel of
its name where they are all one; kernels with no such twin stay unnamed.
"""
import argparse
import bisect
import collections
import json
import re
import statistics

GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
SYNC_CALLS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy ")


def short_kernel_name(name):
    name = name.replace("(anonymous namespace)::", "")
    name = re.sub(r"^void ", "", name)       # a return type, where the name has one
    name = re.sub(r"<.*", "", name)          # drop template arguments
    name = re.sub(r"\(.*", "", name)         # and the argument list
    return name.split("::")[-1][:60]


def union_length(intervals):
    total, end = 0.0, None
    for start, stop in sorted(intervals):
        if end is None or start > end:
            total += stop - start
            end = stop
        elif stop > end:
            total += stop - end
            end = stop
    return total


def host_stacks(events, cats):
    """Each host event of the categories `cats` ("cpu_op", "user_annotation", ...; launches are
    "cuda_runtime"/"cuda_driver") with the cpu_op and user_annotation events around it on its
    thread, outermost first, in time order per thread."""
    by_tid = collections.defaultdict(list)
    for e in events:
        if e.get("cat") in cats:
            by_tid[e.get("tid")].append(e)
    for items in by_tid.values():
        items.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []
        for e in items:
            while stack and stack[-1]["ts"] + stack[-1]["dur"] < e["ts"]:
                stack.pop()
            yield e, stack
            if e["cat"] in ("cpu_op", "user_annotation"):
                stack.append(e)


def launching_ops(events):
    """correlation id -> "outer / inner" op names of the host ops around each kernel launch."""
    names = {}
    for e, stack in host_stacks(events, ("cpu_op", "cuda_runtime", "cuda_driver")):
        corr = e.get("args", {}).get("correlation")
        if e["cat"] == "cpu_op" or corr is None or not stack:
            continue
        nodes = [s["name"] for s in stack if s["name"].startswith("autograd::engine::evaluate_function")]
        outer = nodes[-1].split(": ")[-1] if nodes else stack[0]["name"]
        names[corr] = "%s / %s" % (outer, stack[-1]["name"])
    return names


def kernel_class(name):
    """A coarse class of a kernel, from its (full) name."""
    n = name.lower()
    if any(k in n for k in ("gemm", "conv", "xmma", "cutlass", "sm90_", "cudnn", "implicit", "wgrad", "dgrad", "winograd")):
        return "matrix/conv"
    if "monoflow" in n:
        return "monoflow kernel"
    if any(k in n for k in ("reduce", "norm_kernel", "softmax", "welford", "layer_norm")):
        return "reduction"
    if any(k in n for k in ("copy", "cat", "index", "gather", "scatter", "memcpy", "memset", "fill", "transpose")):
        return "copy/fill"
    if "elementwise" in n or "vectorized" in n or "foreach" in n or "multi_tensor" in n:
        return "element-wise"
    return "other"


def model_parts(events):
    """correlation id -> model part ("fwd monoflow::flow::CouplingBlock", "bwd monoflow::text_encoder",
    ...) from the monoflow:: scopes around each launch (see the module docstring)."""
    seq_scope, launches = {}, []
    for e, stack in host_stacks(events, ("cpu_op", "user_annotation", "cuda_runtime", "cuda_driver")):
        if e["cat"] == "cpu_op":
            scopes = [x["name"] for x in stack + [e] if x["name"].startswith("monoflow::")]
            seq = e.get("args", {}).get("Sequence number")
            backward = any(x["name"].startswith("autograd::engine::evaluate_function") for x in stack)
            if seq is not None and scopes and not backward:
                seq_scope.setdefault(seq, scopes[-1])
        elif e["cat"] != "user_annotation":
            corr = e.get("args", {}).get("correlation")
            if corr is not None and stack:
                launches.append((corr, list(stack)))
    # A node of monoflow's own autograd functions (CppNode) has no forward op of its number in the
    # trace; numbers rise in the order the forward made the nodes, so it takes the scope of the
    # closest forward op made before it.
    known = sorted(seq_scope)

    def scope_of(q):
        if q in seq_scope:
            return seq_scope[q]
        i = bisect.bisect_left(known, q)
        return seq_scope[known[i - 1]] if i > 0 else None

    parts = {}
    for corr, stack in launches:
        if any(x["name"].startswith("autograd::engine::evaluate_function") for x in stack):
            seqs = [x.get("args", {}).get("Sequence number") for x in stack]
            seqs = [q for q in seqs if q is not None]
            scope = next((s for s in map(scope_of, reversed(seqs)) if s), None)
            parts[corr] = "bwd " + (scope or "(no scope)")
        else:
            scopes = [x["name"] for x in stack if x["name"].startswith("monoflow::")]
            parts[corr] = ("fwd " + scopes[-1]) if scopes else "(no scope)"
        if parts[corr].endswith("monoflow::clip_and_optimizer"):
            parts[corr] = "monoflow::clip_and_optimizer"
    return parts


def kernel_key(e):
    args = e.get("args", {})
    return (e["name"], str(args.get("grid")), str(args.get("block")))


def kernel_twins(path):
    """(name, grid, block) -> (part, op) that kernels so keyed have most often in the eager trace
    at `path` (None where they have none); and a kernel name alone -> the same, for names that
    run in one part and under one op only there (whatever their grid)."""
    events = [e for e in json.load(open(path))["traceEvents"] if e.get("ph") == "X" and "dur" in e]
    ops, parts = launching_ops(events), model_parts(events)
    seen, by_name = collections.defaultdict(collections.Counter), collections.defaultdict(collections.Counter)
    for e in events:
        if e.get("cat") == "kernel":
            correlation = e.get("args", {}).get("correlation")
            named = (parts.get(correlation), ops.get(correlation))
            seen[kernel_key(e)][named] += 1
            by_name[e["name"]][named] += 1
    twins = {key: counts.most_common(1)[0][0] for key, counts in seen.items()}
    twins.update({name: next(iter(counts)) for name, counts in by_name.items() if len(counts) == 1})
    return twins


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--range", default="monoflow_step",
                    help="the user range around each profiled call (bench_inference: monoflow_call)")
    ap.add_argument("--names-from", metavar="EAGER",
                    help="an eager trace of the same step: its parts and ops name this trace's unnamed kernels")
    args = ap.parse_args()
    events = json.load(open(args.trace))["traceEvents"]
    events = [e for e in events if e.get("ph") == "X" and "dur" in e]
    twins = kernel_twins(args.names_from) if args.names_from else {}
    steps = sorted((e["ts"], e["ts"] + e["dur"]) for e in events
                   if e.get("name") == args.range and e.get("cat") == "user_annotation")
    if not steps:
        raise SystemExit("no %s ranges in %s" % (args.range, args.trace))

    op_names = launching_ops(events)
    part_names = model_parts(events)
    part_time, part_class_time, part_calls = collections.Counter(), collections.Counter(), collections.Counter()
    rows, kernel_time, op_time = [], collections.Counter(), collections.Counter()
    op_kernel_time, op_kernel_calls = collections.Counter(), collections.Counter()
    for start, stop in steps:
        inside = [e for e in events if start <= e["ts"] <= stop]
        gpu = [e for e in inside if e.get("cat") in GPU_CATS]
        runtime = collections.Counter(e["name"] for e in inside if e.get("cat") == "cuda_runtime")
        busy = union_length([(e["ts"], e["ts"] + e["dur"]) for e in gpu]) / 1000.0
        wall = (stop - start) / 1000.0
        for e in gpu:
            if e.get("cat") == "kernel":
                kernel_time[short_kernel_name(e["name"])] += e["dur"] / 1000.0
                correlation = e.get("args", {}).get("correlation")
                part = part_names.get(correlation)
                op = op_names.get(correlation)
                twin = twins.get(kernel_key(e)) or twins.get(e["name"])
                if op is None and twin:  # launched by a graph: no op of its own
                    part, op = twin[0] or part, twin[1]
                if part:
                    part_time[part] += e["dur"] / 1000.0
                    part_class_time[(part, kernel_class(e["name"]))] += e["dur"] / 1000.0
                    part_calls[part] += 1
                if op:
                    op_time[op] += e["dur"] / 1000.0
                    pair = "%s | %s" % (op, short_kernel_name(e["name"]))
                    op_kernel_time[pair] += e["dur"] / 1000.0
                    op_kernel_calls[pair] += 1
        rows.append({
            "wall_ms": wall,
            "gpu_busy_ms": busy,
            "busy_pct": 100.0 * busy / wall if wall else 0.0,
            "kernels": sum(1 for e in gpu if e.get("cat") == "kernel"),
            "aten_ops": sum(1 for e in inside if e.get("cat") == "cpu_op"),
            "launches": runtime.get("cudaLaunchKernel", 0) + runtime.get("cudaLaunchKernelExC", 0),
            "graph_launches": runtime.get("cudaGraphLaunch", 0),
            "syncs": sum(n for name, n in runtime.items() if name.startswith(SYNC_CALLS)),
            "memcpys": sum(n for name, n in runtime.items() if name.startswith("cudaMemcpy")),
        })

    keys = list(rows[0])
    print("profile of %d steps (%s)" % (len(rows), args.trace))
    print("  ".join("%14s" % k for k in keys))
    for r in rows:
        print("  ".join("%14.2f" % r[k] if isinstance(r[k], float) else "%14d" % r[k] for k in keys))
    print("median: " + ", ".join("%s %.2f" % (k, statistics.median(r[k] for r in rows)) for k in keys))
    total = sum(kernel_time.values())
    print("GPU kernel time per step by kernel (%.1f ms per step):" % (total / len(rows)))
    for name, ms in kernel_time.most_common(args.top):
        print("  %6.2f ms %5.1f%%  %s" % (ms / len(rows), 100.0 * ms / total, name))
    if part_time:
        print("GPU kernel time per step by part of the model (kernels per step; then by kernel class):")
        for part, ms in part_time.most_common():
            classes = sorted(((c, t) for (p_, c), t in part_class_time.items() if p_ == part), key=lambda x: -x[1])
            print("  %6.2f ms %5.1f%% %5.0f  %-40s %s" % (ms / len(rows), 100.0 * ms / total, part_calls[part] / len(rows),
                  part, ", ".join("%s %.2f" % (c, t / len(rows)) for c, t in classes)))
    if op_time:
        print("GPU kernel time by launching op (outer / inner):")
        for name, ms in op_time.most_common(args.top):
            print("  %6.2f ms %5.1f%%  %s" % (ms / len(rows), 100.0 * ms / total, name[:110]))
        print("GPU kernel time per step by launching op and kernel (calls per step):")
        for name, ms in op_kernel_time.most_common(args.top * 2):
            calls = op_kernel_calls[name] / len(rows)
            print("  %6.2f ms %5.1f%% %5.0f  %s" % (ms / len(rows), 100.0 * ms / total, calls, name[:140]))


if __name__ == "__main__":
    main()
