#!/usr/bin/env python3
"""Sets a churn run on a real GPU beside its simulation given that GPU's
measured profile (tests/gpu/churn_on_gpu.sh): for each row both ran, p50
and p99 on the real device and in the simulation, the simulation's over the
real device's, and whether it is within the tolerance (15%: the simulation
stands for that device for this row, or it does not). Prints a markdown
table and a last line counting the rows within; exits 0 either way (a
report, not a test), 2 on files it cannot read.

    compare_churn.py REAL.csv SIM.csv [--tolerance 0.15]

The CSVs are bench/churn.py --csv files (a header row, then one row per
server configuration, with the columns row, p50 and p99, in ms).
"""
import argparse
import csv
import sys


def read_rows(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        for k in ("row", "p50", "p99"):
            if k not in r:
                raise ValueError("%s: no column %r" % (path, k))
    return {r["row"]: (float(r["p50"]), float(r["p99"])) for r in rows}


def within(sim, real, tolerance):
    return real > 0 and abs(sim / real - 1) <= tolerance


def compare(real, sim, tolerance):
    """Markdown lines for the rows in both, in the real run's order."""
    lines = ["| row | p50 real ms | p50 sim ms | sim / real | p99 real ms | p99 sim ms | sim / real | within %d%% |"
             % round(100 * tolerance), "|---|---|---|---|---|---|---|---|"]
    good = 0
    both = [name for name in real if name in sim]
    for name in both:
        (r50, r99), (s50, s99) = real[name], sim[name]
        ok = within(s50, r50, tolerance) and within(s99, r99, tolerance)
        good += ok
        lines.append("| %s | %.2f | %.2f | %s | %.2f | %.2f | %s | %s |" % (
            name, r50, s50, "%.2f" % (s50 / r50) if r50 > 0 else "-", r99, s99,
            "%.2f" % (s99 / r99) if r99 > 0 else "-", "yes" if ok else "no"))
    missing = sorted(set(real) ^ set(sim))
    if missing:
        lines.append("")
        lines.append("rows in one run only: %s" % ", ".join(missing))
    lines.append("")
    lines.append("%d of %d rows within %d%% (p50 and p99)" % (good, len(both), round(100 * tolerance)))
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("real")
    ap.add_argument("sim")
    ap.add_argument("--tolerance", type=float, default=0.15)
    args = ap.parse_args()
    try:
        real, sim = read_rows(args.real), read_rows(args.sim)
    except (OSError, ValueError) as e:
        print("compare_churn: %s" % e, file=sys.stderr)
        return 2
    print("\n".join(compare(real, sim, args.tolerance)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
