#!/usr/bin/env python3
"""bench/bytes_replay.py as a table: a request sequence, sizes and a budget
in; loads and bytes moved out, for least-recently-used and furthest-next-use
eviction. The churn benchmark's reading of its bytes target rests on it."""
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


if __name__ == "__main__":
    unittest.main()
