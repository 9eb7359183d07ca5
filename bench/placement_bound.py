"""The lowest tail latency any placement of models on one accelerator can
reach when the accelerator holds only some of them, no request waits for
a model to move, and the placement does not know the next request's model
before it arrives (bench/churn.py reports it beside its rows).

A request whose model is on the accelerator is counted as fast; one whose
model is not runs on the CPU, where `slower_than(model, t)` of its requests
take longer than t. At each moment at most `budget` bytes are on the
accelerator. Requests draw their model independently from the phase's
demand (a dict model -> share, one per phase of equal length), so whatever
the placement does within a phase, the share of its requests slower than t
is at least, in expectation, what the best set of resident models (a
knapsack on the budget) leaves to the CPU. That holds even for a placement
that knows every phase's demand and moves in no time: it is a bound, not a
policy. Sizes are in bytes and counted in MiB, rounded up."""

MIB = 1 << 20


def slower_share(models, sizes, slower_than, budget, phases, threshold):
    """The smallest expected share of requests slower than `threshold`, over
    `phases`. Returns (share, the models the best choice keeps on the
    accelerator in some phase)."""
    cap = budget // MIB
    slow = {m: slower_than(m, threshold) for m in models}
    share, resident = 0.0, set()
    for demand in phases:
        lost = {m: demand.get(m, 0.0) * slow[m] for m in models if slow[m] > 0}
        best = [(0.0, frozenset())] * (cap + 1)  # per MiB used: the most slow demand kept off the CPU, and by which
        for m, weight in sorted(lost.items()):
            mib = -(-sizes[m] // MIB)
            for b in range(cap, mib - 1, -1):
                kept = best[b - mib][0] + weight
                if kept > best[b][0]:
                    best[b] = (kept, best[b - mib][1] | {m})
        share += (sum(lost.values()) - best[cap][0]) / len(phases)
        resident |= best[cap][1]
    return share, resident


def placement_bound(models, sizes, slower_than, candidates, budget, phases, quantile=0.99):
    """The lowest `quantile` latency slower_share allows: the smallest of
    `candidates` (latencies) that leaves at most 1 - quantile of the
    requests slower. Returns (that latency, the models that must stay on
    the accelerator for it); (inf, set()) when no candidate does. The share
    falls as the latency grows (slower_than does), so the candidates are
    searched by halves."""
    ordered = sorted(set(candidates))
    found = float("inf"), set()
    low, high = 0, len(ordered) - 1
    while low <= high:
        mid = (low + high) // 2
        share, resident = slower_share(models, sizes, slower_than, budget, phases, ordered[mid])
        if share <= 1 - quantile + 1e-12:
            found = ordered[mid], resident
            high = mid - 1
        else:
            low = mid + 1
    return found


def with_load_and_run(cpu_slower_than, loaded_slower_than):
    """The rule with load and run: a request whose model is not on the
    accelerator runs on the CPU or loads its model there and runs, whichever
    is sooner, so it is slower than t only when both would be (the two
    drawn independently). `loaded_slower_than(m, t)`: the share of loads
    and runs of m longer than t. With each load at the link's full rate
    (no queue on the link or the device, no room to make) it is a lower
    bound for that rule too."""
    return lambda m, t: cpu_slower_than(m, t) * loaded_slower_than(m, t)
