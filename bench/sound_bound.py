#!/usr/bin/env python3
"""The sound bound on a served model's throughput, from one bench run's own
figures, and infergate's fraction of it.

A request served by infergate costs the machine at least what the hand-off
ceiling spends on a call (gRPC, the hand-off to a worker and back: 1 /
ceiling req/s of the whole machine) plus its share of the forward pass of
the batch it ran in (the in-process floor at that batch size: 1 / rows/s
per row, the best caller x thread layout measured, linear between the
measured sizes). So with f_b the fraction of requests that ran in batches of
b rows, no server on this machine and this thread model can beat

    bound req/s = 1 / (1 / ceiling + sum_b f_b / inprocess_rows_per_s(b))

  sound_bound.py CSV INPROCESS_LINES BATCH_MIXES

CSV               the run's rows (bench/run.sh's columns)
INPROCESS_LINES   inprocess-bench's "inprocess batch=..." lines, each
                  prefixed with its model name and a space
BATCH_MIXES       "suite,model,mode,concurrency,1:n,2:n,..." per row: the
                  requests answered per batch size during that row

Prints the targets table rows (Markdown) for the mlp Infer at 8 and 64
streams and the cnn Infer at 8 (all h2load), each against the faster of the
two hand-off ceilings (callback and completion-queue API) answering the same
request frame at the same stream count: infergate serves unary inference
on the completion-queue API, and no server on this machine hands off faster
than the better of the two.

Beside each, where the run has it, the model ceiling's row (the
completion-queue hand-off whose workers also run the model on the calls
queued, and nothing else): infergate's fraction of it, and its fraction of
the bound. The bound adds the forward measured alone to the hand-off
measured alone; a forward that streams its weights through a core's cache
between network work costs more than either alone, which the model ceiling
shows.
"""
import csv
import re
import sys


def read_rows(path):
    rows = {}
    with open(path) as f:
        for r in csv.DictReader(f):
            rows[(r["suite"], r["model"], r["mode"], r["concurrency"])] = r
    return rows


def read_inprocess(path):
    """model -> {batch: best rows/s over the caller x thread layouts}"""
    best = {}
    with open(path) as f:
        for line in f:
            m = re.match(r"(\S+) inprocess batch=(\d+) .*rows/s=([0-9.]+)", line)
            if m:
                per = best.setdefault(m.group(1), {})
                b, rows = int(m.group(2)), float(m.group(3))
                per[b] = max(per.get(b, 0.0), rows)
    return best


def read_mixes(path):
    mixes = {}
    with open(path) as f:
        for line in f:
            parts = line.strip().split(",")
            if len(parts) < 5:
                continue
            mix = {}
            for item in parts[4:]:
                if ":" in item:
                    b, n = item.split(":")
                    mix[int(b)] = mix.get(int(b), 0) + int(n)
            mixes[tuple(parts[:4])] = mix
    return mixes


def seconds_per_row(curve, b):
    """1 / rows/s at batch b, linear between the measured batch sizes (and
    the nearest one outside them)."""
    sizes = sorted(curve)
    if b <= sizes[0]:
        return 1.0 / curve[sizes[0]]
    if b >= sizes[-1]:
        return 1.0 / curve[sizes[-1]]
    for lo, hi in zip(sizes, sizes[1:]):
        if lo <= b <= hi:
            t = (b - lo) / (hi - lo)
            return (1 - t) / curve[lo] + t / curve[hi]
    return 1.0 / curve[sizes[-1]]


def bound(ceiling_rps, curve, mix):
    total = sum(mix.values())
    if ceiling_rps <= 0 or not curve or total == 0:
        return 0.0
    forward = sum(n / total * seconds_per_row(curve, b) for b, n in mix.items())
    return 1.0 / (1.0 / ceiling_rps + forward)


def main(csv_path, inprocess_path, mixes_path):
    rows = read_rows(csv_path)
    curves = read_inprocess(inprocess_path)
    mixes = read_mixes(mixes_path)
    # Each against the hand-off ceiling answering the same request frame:
    # the cnn's 49 KB image costs the machine far more to move than the
    # mlp's 1 KB row.
    ceilings = {"mlp": ("handoff-ceiling", "handoff-ceiling-cq"), "cnn": ("handoff-ceiling-cnn", "handoff-ceiling-cq-cnn")}
    model_ceilings = {"mlp": "model-ceiling", "cnn": "model-ceiling-cnn"}
    targets = [("1-row mlp Infer (h2load)", ("h2load", "mlp", "v1-infer"), "8", "mlp"),
               ("1-row mlp Infer (h2load)", ("h2load", "mlp", "v1-infer"), "64", "mlp"),
               ("1-image cnn Infer (h2load)", ("h2load", "cnn", "v1-infer"), "8", "cnn")]
    for what, key, c, model in targets:
        row = rows.get(key + (c,))
        ceiling_rps = 0.0
        for mode in ceilings[model]:
            ceiling = rows.get(("h2load", "none", mode, c))
            if ceiling:
                ceiling_rps = max(ceiling_rps, float(ceiling["throughput_rps"]))
        mix = mixes.get(key + (c,), {})
        b = bound(ceiling_rps, curves.get(model, {}), mix)
        measured = float(row["throughput_rps"]) if row else 0.0
        r = measured / b if b > 0 else 0.0
        total = sum(mix.values())
        mean = sum(size * n for size, n in mix.items()) / total if total else 0.0
        print("| %s at %s streams / sound bound (%.0f req/s: the faster hand-off ceiling, %.0f req/s, + in-process "
              "forward at the batches that formed, mean %.1f) | %.3f | >= 0.90 | %s |"
              % (what, c, b, ceiling_rps, mean, r, "met" if r >= 0.90 else "not met"))
        # The bound adds two costs measured apart; the model ceiling runs
        # them together (the forward between network work, on the same
        # cores and caches), with no serving work of its own.
        model_ceiling = rows.get(("h2load", "none", model_ceilings[model], c))
        if model_ceiling and b > 0:
            mc_rps = float(model_ceiling["throughput_rps"])
            print("| %s at %s streams / model ceiling (%.0f req/s: gRPC, the hand-off and the %s's forward on the "
                  "calls queued, no serving work) | %.3f | (context) | |" % (what, c, mc_rps, model, measured / mc_rps))
            print("| model ceiling / sound bound, %s at %s streams (the forward and the network work run together "
                  "against apart) | %.3f | (context) | |" % (model, c, mc_rps / b))


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
