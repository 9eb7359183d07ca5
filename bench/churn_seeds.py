#!/usr/bin/env python3
"""The churn benchmark over several seeds (bench/churn.sh with CHURN_SEEDS):
reads each seed's run (churn.py's --csv and --out files) and writes one
table whose every figure is the median over the seeds with its spread
[lowest-highest], and the round's ratios computed within each seed first
(a seed's policy against the same seed's all-resident row and bounds:
the placement bound under the previous rule, no load and run, which the
row "previous rule" is held to, and the bound under the rule with
load and run, which the policy is).

    churn_seeds.py --out SUMMARY.md RUN.csv [RUN.csv ...]

Each RUN.csv has its Markdown beside it (RUN.md, for the placement bound's
line). Rows missing from a run, or a run without the bound, are reported as
such rather than left out of the spread silently.
"""
import argparse
import csv
import os
import re
import statistics
import sys

ROW_FIGURES = [  # (column, heading, format)
    ("p50", "p50 ms", "%.1f"),
    ("p99", "p99 ms", "%.1f"),
    ("p999", "p99.9 ms", "%.1f"),
    ("max", "max ms", "%.1f"),
    ("moved_mb_per_min", "MB moved/min", "%.0f"),
    ("on_gpu_percent", "on cuda:0 %", "%.0f"),
    ("regret_percent", "regret %", "%.1f"),
]
# The policy under the rule before load and run (--load-and-run=false),
# judged against that rule's bound (the placement bound's line).
PREVIOUS_RULE_ROW = "previous rule"
BOUND_LINE = re.compile(r"^The lowest p99 any placement can reach .*?: ([0-9.]+) ms", re.M)
LOAD_AND_RUN_BOUND_LINE = re.compile(r"^The lowest p99 under the rule with load and run .*?\): ([0-9.]+) ms", re.M)


def read_load_and_run_bound(csv_path):
    """The run's bound under the rule with load and run, in ms (None when its
    Markdown has none: a run from before it was computed)."""
    md = os.path.splitext(csv_path)[0] + ".md"
    if not os.path.exists(md):
        return None
    with open(md) as f:
        m = LOAD_AND_RUN_BOUND_LINE.search(f.read())
    return float(m.group(1)) if m else None


def read_run(csv_path):
    """{row name: {column: value}} of one seed's run, numbers as floats, and
    its placement bound in ms (None when its Markdown has none)."""
    rows = {}
    with open(csv_path, newline="") as f:
        for r in csv.DictReader(f):
            if None in r or any(v is None for v in r.values()):
                raise ValueError("%s: a row whose fields do not match the header: %s" % (csv_path, r))
            named = {}
            for k, v in r.items():
                try:
                    named[k] = float(v)
                except ValueError:
                    named[k] = v
            named["on_gpu_percent"] = 100 * named["on_gpu"]
            # The regret judges the requests whose path had an estimate.
            asked = named.get("ready_path_requests", 0) - named.get("unestimated", 0)
            named["regret_percent"] = 100 * named["regret"] / asked if asked else None
            rows[r["row"]] = named
    bound = None
    md = os.path.splitext(csv_path)[0] + ".md"
    if os.path.exists(md):
        with open(md) as f:
            m = BOUND_LINE.search(f.read())
        bound = float(m.group(1)) if m else None
    return rows, bound


def spread(values, fmt):
    """'median [lowest-highest]' of the values that exist, '-' for none, and
    the number that exist when some are missing."""
    present = [v for v in values if v is not None]
    if not present:
        return "-"
    text = fmt % statistics.median(present)
    if len(present) > 1:
        text += " [%s-%s]" % (fmt % min(present), fmt % max(present))
    if len(present) < len(values):
        text += " (%d of %d seeds)" % (len(present), len(values))
    return text


def ratio(a, b):
    return a / b if a is not None and b else None


def summarize(runs, seeds, load_and_run_bounds=None):
    """The summary's lines for `runs` ([(rows, bound)], one per seed, in the
    order of `seeds`), and each seed's bound under the rule with load and
    run when given."""
    names = []
    for rows, _ in runs:
        names += [n for n in rows if n not in names]
    lines = [
        "Churn over seeds %s: each figure the median over the seeds [lowest-highest]; the ratios are computed "
        "within each seed." % ", ".join(str(s) for s in seeds),
        "",
        "| row | failed | " + " | ".join(h for _, h, _ in ROW_FIGURES) + " |",
        "|---|---|" + "---|" * len(ROW_FIGURES),
    ]
    for name in names:
        got = [rows.get(name) for rows, _ in runs]
        failed = sum(int(r["failures"]) for r in got if r)
        cells = [spread([r[c] if r else None for r in got], fmt) for c, _, fmt in ROW_FIGURES]
        lines.append("| %s | %d | %s |" % (name, failed, " | ".join(cells)))

    def per_seed(f):
        out = []
        for rows, bound in runs:
            try:
                out.append(f(rows, bound))
            except KeyError:
                out.append(None)
        return out

    lines += [
        "",
        "- policy p99 / all-resident p99: %s (target at most 1.2, stretch 1.1)" % spread(
            per_seed(lambda r, b: ratio(r["policy"]["p99"], r["all resident"]["p99"])), "%.2f"),
        "- policy p99 / the bound under the previous rule (no load and run): %s (the rule it replaced; no "
        "target)" % spread(per_seed(lambda r, b: ratio(r["policy"]["p99"], b)), "%.2f"),
        "- the policy under the previous rule (row \"%s\") p99 / that rule's bound: %s (target at most 1.10)" % (
            PREVIOUS_RULE_ROW, spread(per_seed(lambda r, b: ratio(r[PREVIOUS_RULE_ROW]["p99"], b)), "%.2f")),
        "- the bound under the previous rule / all-resident p99: %s" % spread(
            per_seed(lambda r, b: ratio(b, r["all resident"]["p99"])), "%.2f"),
    ]
    if load_and_run_bounds is not None:
        lines += [
            "- policy p99 / the bound under the rule with load and run: %s (target at most 1.15); that bound / "
            "all-resident p99: %s" % (
                spread([ratio(rows["policy"]["p99"], b) if "policy" in rows else None
                        for (rows, _), b in zip(runs, load_and_run_bounds)], "%.2f"),
                spread([ratio(b, rows["all resident"]["p99"]) if "all resident" in rows else None
                        for (rows, _), b in zip(runs, load_and_run_bounds)], "%.2f")),
        ]
    lines += [
        "- policy p99 / evict-and-reload p99: %s" % spread(
            per_seed(lambda r, b: ratio(r["policy"]["p99"], r["evict-and-reload"]["p99"])), "%.2f"),
        "- bytes moved, policy / evict-and-reload: %s (target at most 1)" % spread(
            per_seed(lambda r, b: ratio(r["policy"]["moved_mb_per_min"], r["evict-and-reload"]["moved_mb_per_min"])),
            "%.2f"),
        "- the policy's requests that finished more than 20%% after their path's estimate: %s%% (target at most 1%%)"
        % spread(per_seed(lambda r, b: r["policy"]["regret_percent"]), "%.1f"),
        "- failed requests, every row and seed: %d" % sum(
            int(r["failures"]) for rows, _ in runs for r in rows.values()),
    ]
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="Markdown file for the summary (printed too)")
    ap.add_argument("--seeds", help="the seeds' names, comma-separated, in the order of the files")
    ap.add_argument("runs", nargs="+", help="churn.py --csv files, one per seed")
    args = ap.parse_args()
    seeds = args.seeds.split(",") if args.seeds else [str(i + 1) for i in range(len(args.runs))]
    if len(seeds) != len(args.runs):
        ap.error("--seeds names %d seeds for %d files" % (len(seeds), len(args.runs)))
    try:
        runs = [read_run(p) for p in args.runs]
        load_and_run_bounds = [read_load_and_run_bound(p) for p in args.runs]
    except (OSError, ValueError, KeyError) as e:
        print("churn_seeds: %s" % e, file=sys.stderr)
        return 1
    text = "\n".join(summarize(runs, seeds, load_and_run_bounds)) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
