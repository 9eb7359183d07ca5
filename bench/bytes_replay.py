#!/usr/bin/env python3
"""What serving every request of a churn run on the accelerator would move
over the link: the run's arrivals (a `-requests.csv` of bench/churn.py,
each request's model in the order sent) replayed through a cache of the
accelerator's budget, in which every request's model must be resident when
it runs (a miss loads it, evicting until it fits). Two eviction orders:

- least recently used: what an order that knows nothing ahead moves (it is
  what evict-and-reload does, but evict-and-reload also sends requests to
  the CPU while the accelerator's queue is long, which moves nothing);
- furthest next use (Belady's order, knowing every later request): with
  models of unequal sizes it is not the least possible, but a strong
  offline reference no online order is expected to beat.

Optionally only the models whose CPU run is slower than a threshold are
served on the accelerator (the rest stay on the CPU and move nothing).
The churn benchmark's bytes target (at most evict-and-reload's bytes) is
read against these: a policy that serves nearly every request on the
accelerator cannot move less than LRU's bytes without knowing more ahead.

usage: bytes_replay.py --requests RUN-requests.csv --models DIR [--row NAME]
                       [--cpu-ms-over MS]
"""
import argparse
import csv
import os
import sys


def replay(sequence, sizes, budget, order="lru", on_accelerator=None):
    """(loads, bytes moved) serving `sequence` (model names, in order) on an
    accelerator of `budget` bytes, evicting by `order` ("lru" or "belady").
    Requests for models outside `on_accelerator` (a set; None: all) move
    nothing. A model larger than the budget is loaded for its request alone."""
    if on_accelerator is None:
        on_accelerator = set(sequence)
    served = [m for m in sequence if m in on_accelerator]
    next_use = [0] * len(served)  # index of the next request for the same model
    upcoming = {}
    for i in range(len(served) - 1, -1, -1):
        next_use[i] = upcoming.get(served[i], len(served))
        upcoming[served[i]] = i
    resident = {}  # model -> last use (lru) or next use (belady)
    used = loads = moved = 0
    for i, m in enumerate(served):
        if m not in resident:
            while resident and used + sizes[m] > budget:
                victim = (min(resident, key=resident.get) if order == "lru"
                          else max(resident, key=resident.get))
                used -= sizes[victim]
                del resident[victim]
            loads += 1
            moved += sizes[m]
            used += sizes[m]
        resident[m] = i if order == "lru" else next_use[i]
    return loads, moved


def read_sequence(path, row=None):
    """The models of one row of a churn -requests.csv, in the order sent
    (every row of a run has the same arrivals; the first row by default)."""
    with open(path) as f:
        rows = list(csv.DictReader(f))
    if not rows:
        return []
    row = row or rows[0]["row"]
    chosen = [(float(r["sent_s"]), r["model"]) for r in rows if r["row"] == row]
    return [m for _, m in sorted(chosen)]


def main():
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from churn import read_models

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", required=True)
    ap.add_argument("--models", required=True, help="the churn models' folder (tools/make_churn_models.py)")
    ap.add_argument("--row", default=None)
    ap.add_argument("--budget-fraction", type=float, default=1 / 3, help="as bench/churn.py: a third")
    ap.add_argument("--cpu-ms", default=None,
                    help="a -requests.csv whose CPU runs give each model's CPU time (median compute)")
    ap.add_argument("--cpu-ms-over", type=float, default=None,
                    help="serve on the accelerator only the models whose CPU run takes longer")
    a = ap.parse_args()
    specs = read_models(a.models)
    sizes = {m: s["bytes"] for m, s in specs.items()}
    budget = int(sum(sizes.values()) * a.budget_fraction)
    sequence = read_sequence(a.requests, a.row)
    subset = None
    if a.cpu_ms_over is not None:
        times = {}
        with open(a.cpu_ms or a.requests) as f:
            for r in csv.DictReader(f):
                if r["device"] == "cpu" and r["compute_us"]:
                    times.setdefault(r["model"], []).append(float(r["compute_us"]) / 1000)
        median = {m: sorted(v)[len(v) // 2] for m, v in times.items()}
        # A model never run on the CPU is taken as slow (served on the accelerator).
        subset = {m for m in sizes if median.get(m, float("inf")) > a.cpu_ms_over}
    print(f"{len(sequence)} requests, budget {budget / 1e6:.0f} MB"
          + (f", {len(subset)} models slower than {a.cpu_ms_over:g} ms on the CPU served on the accelerator"
             if subset is not None else ", every model on the accelerator"))
    for order in ("lru", "belady"):
        loads, moved = replay(sequence, sizes, budget, order, subset)
        print(f"{order}: {loads} loads, {moved / 1e6:.0f} MB")


if __name__ == "__main__":
    main()
