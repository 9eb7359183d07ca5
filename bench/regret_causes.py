#!/usr/bin/env python3
"""Why the churn benchmark's late requests were late.

A regret is a request that finished more than 20% after the estimate of the
ready path it took (scheduler/routing/ready_path.h, IsRegret). From the
per-request file bench/churn.py writes (--requests-csv), each regret of a
row is put down to the part of it that ran over its share of the estimate
the most:
  - the load (load and run only): it waited for its load longer than the
    load's estimate (ready_path_load_ms);
  - the run: its compute took longer than the median of its model's runs
    on that device in the same row (the estimate's run is the model's
    learned latency there, which follows that median);
  - the wait: the rest of its time beyond the rest of the estimate (the
    queue, work that started ahead of it, a thread slow to take it).
The file does not carry the run's part of the estimate, so the median
stands in for it; a request whose path had no estimate (0) is not judged.
Below the table, how far past the margin the regrets finished (under 1, 2
and 5 ms): on 5-30 ms requests a host's scheduling noise of a few ms is
enough for one.

  bench/regret_causes.py [--row policy] REQUESTS.csv...   one table per file
"""
import argparse
import csv
import statistics
import sys

REGRET_MARGIN = 0.2  # kRegretMargin
CAUSES = ("the load", "the run", "the wait")


def classify(requests):
    """requests: dicts with the per-request file's fields (strings or
    numbers). Returns [(path, cause, ms past the margin)] for each regret,
    in order."""
    runs = {}
    for r in requests:
        if int(r["ok"]):
            runs.setdefault((r["model"], r["device"]), []).append(float(r["compute_us"]) / 1000)
    # The upper median, as bench/churn.py's median takes it.
    typical = {key: statistics.median_high(values) for key, values in runs.items()}
    found = []
    for r in requests:
        expected = float(r["ready_path_expected_ms"])
        took = float(r["server_total_us"]) / 1000
        margin_ends = (1 + REGRET_MARGIN) * expected
        if not int(r["ok"]) or expected <= 0 or took <= margin_ends:
            continue
        compute = float(r["compute_us"]) / 1000
        load_over = 0.0
        if r["ready_path"] == "load_and_run":
            load_over = float(r["load_wait_us"]) / 1000 - float(r["ready_path_load_ms"])
        run_over = compute - typical[(r["model"], r["device"])]
        wait_over = (took - expected) - load_over - run_over
        over = {"the load": load_over, "the run": run_over, "the wait": wait_over}
        found.append((r["ready_path"], max(CAUSES, key=lambda c: over[c]), took - margin_ends))
    return found


def table(requests, row):
    """The markdown lines for one row's regrets by path and cause."""
    mine = [r for r in requests if r["row"] == row]
    estimated = sum(1 for r in mine if int(r["ok"]) and float(r["ready_path_expected_ms"]) > 0)
    found = classify(mine)
    paths = sorted({p for p, _, _ in found})
    lines = ["Regrets of row \"%s\": %d of %d requests with an estimate (%.1f%%), by path and the part that ran "
             "over its share of the estimate most (bench/regret_causes.py):" % (
                 row, len(found), estimated, 100.0 * len(found) / estimated if estimated else 0.0),
             "",
             "| path | " + " | ".join(CAUSES) + " | all |",
             "|---" * (len(CAUSES) + 2) + "|"]
    for p in paths + ["all"]:
        counts = [sum(1 for q, c, _ in found if (p == "all" or q == p) and c == cause) for cause in CAUSES]
        lines.append("| %s | %s | %d |" % (p, " | ".join(str(n) for n in counts), sum(counts)))
    past = [ms for _, _, ms in found]
    lines += ["", "Past the margin by under 1 / 2 / 5 ms: %s of %d." % (
        " / ".join(str(sum(1 for ms in past if ms < limit)) for limit in (1, 2, 5)), len(past))]
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--row", default="policy")
    ap.add_argument("files", nargs="+", help="per-request files of bench/churn.py (--requests-csv)")
    args = ap.parse_args()
    for path in args.files:
        with open(path, newline="") as f:
            requests = list(csv.DictReader(f))
        print(path)
        print("\n".join(table(requests, args.row)))
        print()


if __name__ == "__main__":
    sys.exit(main())
