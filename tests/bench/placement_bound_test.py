#!/usr/bin/env python3
"""bench/placement_bound.py as a table: models, sizes, CPU slowness and
each phase's demand in; the least slow share, what stays resident and the
bound out. The churn benchmark's claim of what no placement can beat rests
on it."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from placement_bound import MIB, placement_bound, slower_share, with_load_and_run  # noqa: E402


def always_slow_above(cpu_ms):
    """Every CPU request of model m takes cpu_ms[m]."""
    return lambda m, t: 1.0 if cpu_ms[m] > t else 0.0


class SlowerShare(unittest.TestCase):
    def test_table(self):
        rows = [
            # (what, sizes MiB, cpu ms, phases, budget MiB, threshold, share, resident)
            ("everything fits: nothing slow", {"a": 100, "b": 100}, {"a": 80, "b": 80},
             [{"a": 0.5, "b": 0.5}], 200, 50, 0.0, {"a", "b"}),
            ("room for one of two slow ones: the one with less demand is left to the CPU",
             {"a": 100, "b": 100}, {"a": 80, "b": 80}, [{"a": 0.7, "b": 0.3}], 100, 50, 0.3, {"a"}),
            ("models quick enough on the CPU need no room", {"a": 100, "b": 100}, {"a": 80, "b": 20},
             [{"a": 0.3, "b": 0.7}], 100, 50, 0.0, {"a"}),
            ("a knapsack, not greedy by demand: two 50s beat one 60",
             {"big": 60, "s1": 50, "s2": 50}, {"big": 80, "s1": 80, "s2": 80},
             [{"big": 0.4, "s1": 0.3, "s2": 0.3}], 100, 50, 0.4, {"s1", "s2"}),
            ("phases of equal length: the mean of each phase's best",
             {"a": 100, "b": 100}, {"a": 80, "b": 80}, [{"a": 0.9, "b": 0.1}, {"a": 0.2, "b": 0.8}], 100, 50,
             (0.1 + 0.2) / 2, {"a", "b"}),
            ("no room at all: every slow request is slow", {"a": 100}, {"a": 80}, [{"a": 1.0}], 50, 50, 1.0, set()),
            ("a size of a byte over a MiB takes two", {"a": 1}, {"a": 80}, [{"a": 1.0}], 1, 50, 0.0, {"a"}),
        ]
        for what, sizes_mib, cpu_ms, phases, budget_mib, threshold, share, resident in rows:
            sizes = {m: mib * MIB for m, mib in sizes_mib.items()}
            got_share, got_resident = slower_share(sorted(sizes), sizes, always_slow_above(cpu_ms),
                                                   budget_mib * MIB, phases, threshold)
            self.assertAlmostEqual(got_share, share, msg=what)
            self.assertEqual(got_resident, resident, msg=what)

    def test_sizes_round_up_to_whole_mib(self):
        sizes = {"a": MIB + 1}
        share, _ = slower_share(["a"], sizes, always_slow_above({"a": 80}), MIB, [{"a": 1.0}], 50)
        self.assertEqual(share, 1.0)

    def test_a_model_slow_on_some_of_its_cpu_requests_counts_that_share(self):
        # 40% of b's CPU requests exceed the threshold; a takes the room.
        share, resident = slower_share(["a", "b"], {"a": 100 * MIB, "b": 100 * MIB},
                                       lambda m, t: 1.0 if m == "a" else 0.4, 100 * MIB,
                                       [{"a": 0.5, "b": 0.5}], 50)
        self.assertAlmostEqual(share, 0.5 * 0.4)
        self.assertEqual(resident, {"a"})


class PlacementBound(unittest.TestCase):
    def test_the_smallest_latency_that_leaves_at_most_one_percent_slower(self):
        # Room for one of three models; c is the least asked for (0.5%) and
        # the slowest on the CPU. At 20 ms all three are slow on the CPU, and
        # keeping a leaves 5.5% slower; at 40 only b and c are, and keeping
        # b leaves c's 0.5%: the bound.
        sizes = {m: 100 * MIB for m in "abc"}
        cpu_ms = {"a": 40, "b": 60, "c": 90}
        phases = [{"a": 0.945, "b": 0.05, "c": 0.005}]
        bound, resident = placement_bound("abc", sizes, always_slow_above(cpu_ms), [0, 20, 40, 60, 90],
                                          100 * MIB, phases)
        self.assertEqual(bound, 40)
        self.assertEqual(resident, {"b"})
        # The median is lower: half may be slower.
        median, _ = placement_bound("abc", sizes, always_slow_above(cpu_ms), [0, 20, 40, 60, 90], 100 * MIB,
                                    phases, quantile=0.5)
        self.assertEqual(median, 0)

    def test_no_candidate_is_enough(self):
        bound, resident = placement_bound(["a"], {"a": 100 * MIB}, always_slow_above({"a": 80}), [10, 20], 0,
                                          [{"a": 1.0}])
        self.assertEqual(bound, float("inf"))
        self.assertEqual(resident, set())


class WithLoadAndRun(unittest.TestCase):
    def test_a_request_is_slow_only_when_the_cpu_and_load_and_run_both_are(self):
        # No room on the accelerator at all: without load and run every
        # request takes its CPU time; with it, the sooner of that and its
        # load and run (a: 30 ms, b: 120 ms, slower than its CPU's 60).
        sizes = {"a": 100 * MIB, "b": 100 * MIB}
        cpu = always_slow_above({"a": 80, "b": 60})
        loaded = always_slow_above({"a": 30, "b": 120})
        phases = [{"a": 0.5, "b": 0.5}]
        candidates = [0, 30, 60, 80, 120]
        self.assertEqual(placement_bound("ab", sizes, cpu, candidates, 0, phases)[0], 80)
        self.assertEqual(placement_bound("ab", sizes, with_load_and_run(cpu, loaded), candidates, 0, phases)[0], 60)
        # Shares multiply: 40% of a's CPU runs and half its loads are slow.
        both = with_load_and_run(lambda m, t: 0.4, lambda m, t: 0.5)
        self.assertAlmostEqual(both("a", 10), 0.2)

    def test_the_search_by_halves_finds_what_a_scan_would(self):
        sizes = {m: 100 * MIB for m in "abcd"}
        cpu_ms = {"a": 40, "b": 60, "c": 90, "d": 15}
        phases = [{"a": 0.6, "b": 0.2, "c": 0.15, "d": 0.05}, {"a": 0.1, "b": 0.1, "c": 0.1, "d": 0.7}]
        candidates = list(range(0, 100, 5))
        for budget in (0, 100, 200, 400):
            for quantile in (0.5, 0.9, 0.99):
                scan = next((t for t in candidates
                             if slower_share("abcd", sizes, always_slow_above(cpu_ms), budget * MIB, phases, t)[0]
                             <= 1 - quantile + 1e-12), float("inf"))
                got, _ = placement_bound("abcd", sizes, always_slow_above(cpu_ms), candidates, budget * MIB, phases,
                                         quantile=quantile)
                self.assertEqual(got, scan, msg="budget %d, quantile %g" % (budget, quantile))


if __name__ == "__main__":
    unittest.main()
