#!/usr/bin/env python3
"""bench/regret_causes.py as a table: requests in (as the churn benchmark's
per-request file holds them), each regret's path and cause out. The
regrets docs/benchmarks.md breaks down by cause rest on it."""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
import regret_causes  # noqa: E402


def request(model, path, expected_ms, took_ms, compute_ms, load_wait_ms=0.0, load_expected_ms=0.0, ok=1,
            device="cuda:0", row="policy"):
    return {"row": row, "model": model, "device": device, "ok": str(ok), "ready_path": path,
            "ready_path_expected_ms": "%.3f" % expected_ms, "server_total_us": "%d" % (took_ms * 1000),
            "compute_us": "%d" % (compute_ms * 1000), "load_wait_us": "%d" % (load_wait_ms * 1000),
            "ready_path_load_ms": "%.3f" % load_expected_ms}


# Model "m" runs in 10 ms on cuda:0 (the median of its runs below).
TYPICAL = [request("m", "ideal", 10, 10, 10) for _ in range(5)]


class RegretCausesTest(unittest.TestCase):
    def test_table(self):
        rows = [
            # (why, the request, the regret it is put down to or None)
            ("on time", request("m", "ideal", 10, 11.9, 10), None),
            ("20% late is not a regret", request("m", "ideal", 10, 12, 10), None),
            ("no estimate: not judged", request("m", "ideal", 0, 50, 10), None),
            ("failed: not judged", request("m", "ideal", 10, 50, 10, ok=0), None),
            ("queued 15 ms its estimate did not count", request("m", "ideal", 10, 25, 10), ("ideal", "the wait")),
            ("its run took 20 ms against its model's 10", request("m", "ideal", 10, 20, 20), ("ideal", "the run")),
            ("its load took 12 ms against 5 estimated",
             request("m", "load_and_run", 15, 22, 10, load_wait_ms=12, load_expected_ms=5),
             ("load_and_run", "the load")),
            ("loaded on time, then waited 10 ms for a thread",
             request("m", "load_and_run", 15, 25, 10, load_wait_ms=5, load_expected_ms=5),
             ("load_and_run", "the wait")),
            ("on the cpu, against its model's cpu runs",
             request("c", "resident", 40, 60, 60, device="cpu"), ("resident", "the run")),
        ]
        for why, r, expected in rows:
            others = TYPICAL + ([request("c", "resident", 40, 40, 40, device="cpu")] * 3 if r["model"] == "c" else [])
            found = [(path, cause) for path, cause, _ in regret_causes.classify(others + [r])]
            self.assertEqual(found, [expected] if expected else [], why)

    def test_how_far_past_the_margin(self):
        # 10 ms estimated: the margin ends at 12 ms.
        found = regret_causes.classify(TYPICAL + [request("m", "ideal", 10, 12.5, 10), request("m", "ideal", 10, 20, 10)])
        self.assertEqual([round(ms, 3) for _, _, ms in found], [0.5, 8.0])
        lines = regret_causes.table(TYPICAL + [request("m", "ideal", 10, 12.5, 10), request("m", "ideal", 10, 15, 10),
                                               request("m", "ideal", 10, 20, 10)], "policy")
        self.assertEqual(lines[-1], "Past the margin by under 1 / 2 / 5 ms: 1 / 1 / 2 of 3.")

    def test_table_counts_one_row_only(self):
        requests = TYPICAL + [request("m", "ideal", 10, 25, 10), request("m", "ideal", 10, 25, 10, row="other")]
        lines = regret_causes.table(requests, "policy")
        self.assertIn("1 of 6 requests with an estimate (16.7%)", lines[0])
        self.assertIn("| all | 0 | 0 | 1 | 1 |", lines)
        self.assertIn("| ideal | 0 | 0 | 1 | 1 |", lines)


if __name__ == "__main__":
    unittest.main()
