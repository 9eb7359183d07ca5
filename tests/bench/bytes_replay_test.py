#!/usr/bin/env python3
"""bench/bytes_replay.py as a table: a request sequence, sizes and a budget
in; loads and bytes moved out, for least-recently-used, furthest-next-use
and least-recent-demand eviction. The churn benchmark's reading of its bytes target rests on it."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from bytes_replay import replay  # noqa: E402


class Replay(unittest.TestCase):
    def test_table(self):
        one = {"a": 1, "b": 1, "c": 1}
        rows = [
            # (what, sequence, sizes, budget, order, on accelerator, loads, bytes)
            ("everything fits: each model once", "abcabc", one, 3, "lru", None, 3, 3),
            ("a cycle one larger than the cache: LRU misses every time", "abcabc", one, 2, "lru", None, 6, 6),
            ("the same cycle, furthest next use keeps one", "abcabc", one, 2, "belady", None, 4, 4),
            ("a repeat is a hit", "aaaa", one, 1, "lru", None, 1, 1),
            ("sizes: a large model evicts two small ones", "abca", {"a": 1, "b": 1, "c": 2}, 2, "lru", None, 4, 5),
            ("models left to the CPU move nothing", "abcabc", one, 2, "lru", {"a", "b"}, 2, 2),
            ("a model over the budget loads for its request alone", "aba", {"a": 3, "b": 1}, 2, "lru", None, 3, 7),
        ]
        for what, sequence, sizes, budget, order, subset, loads, moved in rows:
            self.assertEqual(replay(list(sequence), sizes, budget, order, subset), (loads, moved), what)

    def test_demand_order(self):
        one = {"a": 1, "b": 1, "c": 1}
        rows = [
            # (what, sequence, times, window, budget, loads, bytes)
            # "a" asked for three times, "b" once, then "c": LRU would evict
            # "a" (used before "b"); by demand "b" goes, and "a" is a hit.
            ("the least asked for goes, not the least recently used", "aaabca", [0, 1, 2, 3, 4, 5], 10, 2, 3, 3),
            # The same, with "a"'s requests long past: its rate has decayed
            # below "b"'s, so it goes, and its next request loads it again.
            ("demand long past has decayed", "aaabca", [0, 1, 2, 60, 61, 62], 2, 2, 4, 4),
            ("equal demand: the least recently used goes", "abcab", [0, 0, 0, 0, 0], 2, 2, 5, 5),
        ]
        for what, sequence, times, window, budget, loads, moved in rows:
            got = replay(list(sequence), one, budget, "demand", None, times, window)
            self.assertEqual(got, (loads, moved), what)


if __name__ == "__main__":
    unittest.main()
