#!/usr/bin/env python3
"""What serving every request of a churn run on the accelerator would move
over the link: the run's arrivals (a `-requests.csv` of bench/churn.py,
each request's model in the order sent) replayed through a cache of the
accelerator's budget, in which every request's model must be resident when
it runs (a miss loads it, evicting until it fits). Three eviction orders:

- least recently used: what an order that knows nothing ahead moves (it is
  what evict-and-reload does, but evict-and-reload also sends requests to
  the CPU while the accelerator's queue is long, which moves nothing);
- furthest next use (Belady's order, knowing every later request): with
  models of unequal sizes it is not the least possible, but a strong
  offline reference no online order is expected to beat;
- the least recent demand (the server's order for staged copies,
  scheduler/routing/staging_eviction.h): the model whose rate, decaying
  with a time constant of --demand-window seconds, is lowest goes first,
  the least recently used of equals; the server's change detection is left
  out here.

Optionally only the models whose CPU run is slower than a threshold are
served on the accelerator (the rest stay on the CPU and move nothing).
The churn benchmark's bytes target (at most evict-and-reload's bytes) is
read against these: a policy that serves nearly every request on the
accelerator cannot move less than LRU's bytes without knowing more ahead.

usage: bytes_replay.py --requests RUN-requests.csv --models DIR [--row NAME]
                       [--cpu-ms-over MS] [--demand-window S]
"""
import argparse
import csv
import math
import os
import sys


def replay(sequence, sizes, budget, order="lru", on_accelerator=None, times=None, demand_window=2.0):
    """(loads, bytes moved) serving `sequence` (model names, in order) on an
    accelerator of `budget` bytes, evicting by `order` ("lru", "belady" or
    "demand": the lowest rate decaying over `demand_window` seconds first,
    at `times`, each request's second, the request's index when None).
    Requests for models outside `on_accelerator` (a set; None: all) move
    nothing. A model larger than the budget is loaded for its request alone."""
    if on_accelerator is None:
        on_accelerator = set(sequence)
    if times is None:
        times = list(range(len(sequence)))
    served = [(t, m) for t, m in zip(times, sequence) if m in on_accelerator]
    next_use = [0] * len(served)  # index of the next request for the same model
    upcoming = {}
    for i in range(len(served) - 1, -1, -1):
        next_use[i] = upcoming.get(served[i][1], len(served))
        upcoming[served[i][1]] = i
    rate = {}  # model -> (its rate, when it was counted)
    last_use = {}

    def rate_at(model, t):
        r, at = rate.get(model, (0.0, t))
        return r * math.exp(-(t - at) / demand_window)

    def victim_of(resident, t):
        if order == "lru":
            return min(resident, key=last_use.get)
        if order == "belady":
            return max(resident, key=resident.get)
        return min(resident, key=lambda k: (rate_at(k, t), last_use[k]))

    resident = {}  # model -> its next use (belady's key)
    used = loads = moved = 0
    for i, (t, m) in enumerate(served):
        rate[m] = (rate_at(m, t) + 1 / demand_window, t)
        if m not in resident:
            while resident and used + sizes[m] > budget:
                victim = victim_of(resident, t)
                used -= sizes[victim]
                del resident[victim]
            loads += 1
            moved += sizes[m]
            used += sizes[m]
        resident[m] = next_use[i]
        last_use[m] = i
    return loads, moved


def read_sequence(path, row=None):
    """The (second sent, model) of one row of a churn -requests.csv, in the
    order sent (every row of a run has the same arrivals; the first row by
    default)."""
    with open(path) as f:
        rows = list(csv.DictReader(f))
    if not rows:
        return []
    row = row or rows[0]["row"]
    return sorted((float(r["sent_s"]), r["model"]) for r in rows if r["row"] == row)


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
    ap.add_argument("--demand-window", type=float, default=2.0,
                    help="seconds: the demand order's time constant (as the server's --staging-demand-window)")
    a = ap.parse_args()
    specs = read_models(a.models)
    sizes = {m: s["bytes"] for m, s in specs.items()}
    budget = int(sum(sizes.values()) * a.budget_fraction)
    timed = read_sequence(a.requests, a.row)
    sent = [t for t, _ in timed]
    sequence = [m for _, m in timed]
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
    for order in ("lru", "belady", "demand"):
        loads, moved = replay(sequence, sizes, budget, order, subset, sent, a.demand_window)
        label = f"demand ({a.demand_window:g} s)" if order == "demand" else order
        print(f"{label}: {loads} loads, {moved / 1e6:.0f} MB")


if __name__ == "__main__":
    main()
