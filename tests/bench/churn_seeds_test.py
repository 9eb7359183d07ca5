#!/usr/bin/env python3
"""bench/churn_seeds.py as tables: seeds' runs in (their CSV and the bound's
line), the summary's cells and ratios out. What a three-seed claim in the
docs reads off rests on it: medians and spreads of each row, ratios taken
within a seed, missing rows and bounds said as such."""
import csv
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
import churn_seeds  # noqa: E402

COLUMNS = ["row", "requests", "failures", "ready_path_requests", "regret", "first_failure", "p50", "p99", "p999",
           "max", "on_gpu", "moved_mb_per_min"]


def write_run(folder, name, rows, bound_ms):
    """A seed's run as churn.py writes it: NAME.csv and NAME.md (with the
    bound's line unless bound_ms is None). rows: [{column: value}]."""
    path = os.path.join(folder, name + ".csv")
    with open(path, "w", newline="") as f:
        out = csv.writer(f)  # quoted as churn.py's: row names may hold commas
        out.writerow(COLUMNS)
        for r in rows:
            out.writerow([r.get(c, 0) for c in COLUMNS])
    with open(os.path.join(folder, name + ".md"), "w") as f:
        f.write("| row | p50 ms |\n|---|---|\n\n")
        if bound_ms is not None:
            f.write("The lowest p99 any placement can reach that does not know the next request's model before it "
                    "arrives (...; bench/churn.py placement_bound, ...): %.1f ms, 0.94x the all-resident p99\n"
                    % bound_ms)
    return path


def seed(policy_p99, resident_p99, reload_p99, bound, regret=10, failures=0, moved=(100, 1000), previous=None):
    """A seed's rows; `previous`: the p99 of the row "previous rule"
    (none without it)."""
    extra = [] if previous is None else [{"row": "previous rule", "requests": 100, "p50": 10,
                                          "p99": previous, "p999": previous, "max": previous, "on_gpu": 0.4}]
    return (extra + [{"row": "policy", "requests": 100, "failures": failures, "ready_path_requests": 100, "regret": regret,
              "p50": 10, "p99": policy_p99, "p999": policy_p99 + 1, "max": policy_p99 + 2, "on_gpu": 0.4,
              "moved_mb_per_min": moved[0]},
             {"row": "evict-and-reload", "requests": 100, "p50": 20, "p99": reload_p99, "p999": reload_p99,
              "max": reload_p99, "on_gpu": 0.5, "moved_mb_per_min": moved[1]},
             {"row": "all resident", "requests": 100, "ready_path_requests": 100, "regret": 5, "p50": 5,
              "p99": resident_p99, "p999": resident_p99, "max": resident_p99, "on_gpu": 1.0}], bound)


class Summary(unittest.TestCase):
    def summary(self, seeds):
        with tempfile.TemporaryDirectory() as d:
            runs = [churn_seeds.read_run(write_run(d, "s%d" % i, rows, bound)) for i, (rows, bound) in
                    enumerate(seeds)]
        return churn_seeds.summarize(runs, [str(i + 1) for i in range(len(seeds))])

    def line(self, lines, start):
        found = [l for l in lines if l.startswith(start)]
        self.assertEqual(len(found), 1, "%r in %s" % (start, lines))
        return found[0]

    def test_table(self):
        rows = [
            # (what, seeds, line start, expected line)
            ("one seed: the figure alone, no spread",
             [seed(120, 100, 600, 80)], "| policy |",
             "| policy | 0 | 10.0 | 120.0 | 121.0 | 122.0 | 100 | 40 | 10.0 |"),
            ("three seeds: the median and [lowest-highest] of each figure",
             [seed(120, 100, 600, 80), seed(150, 100, 600, 80), seed(90, 100, 600, 80)], "| policy |",
             "| policy | 0 | 10.0 [10.0-10.0] | 120.0 [90.0-150.0] | 121.0 [91.0-151.0] | 122.0 [92.0-152.0] | 100 [100-100] "
             "| 40 [40-40] | 10.0 [10.0-10.0] |"),
            ("the ratio is taken within each seed, not of the medians",
             [seed(110, 100, 600, 80), seed(240, 200, 600, 80), seed(330, 300, 600, 80)],
             "- policy p99 / all-resident p99:",
             "- policy p99 / all-resident p99: 1.10 [1.10-1.20] (target at most 1.2, stretch 1.1)"),
            ("each seed's p99 against its own bound",
             [seed(100, 90, 600, 80), seed(100, 90, 600, 50)], "- policy p99 / the bound under the previous rule",
             "- policy p99 / the bound under the previous rule (no load and run): 1.62 [1.25-2.00] (the rule it "
             "replaced; no target)"),
            ("a run without the bound's line is counted as missing, not as a ratio",
             [seed(100, 90, 600, 80), seed(100, 90, 600, None)], "- policy p99 / the bound under the previous rule",
             "- policy p99 / the bound under the previous rule (no load and run): 1.25 (1 of 2 seeds) (the rule it "
             "replaced; no target)"),
            ("the policy under the previous rule against that rule's bound, within each seed",
             [seed(100, 90, 600, 80, previous=88), seed(100, 90, 600, 50, previous=60)],
             "- the policy under the previous rule",
             "- the policy under the previous rule (row \"previous rule\") p99 / that rule's bound: "
             "1.15 [1.10-1.20] (target at most 1.10)"),
            ("a seed without the previous rule's row is counted as missing",
             [seed(100, 90, 600, 80, previous=88), seed(100, 90, 600, 50)], "- the policy under the previous rule",
             "- the policy under the previous rule (row \"previous rule\") p99 / that rule's bound: "
             "1.10 (1 of 2 seeds) (target at most 1.10)"),
            ("regret as a share of the policy's requests",
             [seed(100, 90, 600, 80, regret=1), seed(100, 90, 600, 80, regret=3)],
             "- the policy's requests that finished",
             "- the policy's requests that finished more than 20% after their path's estimate: 2.0 [1.0-3.0]% "
             "(target at most 1%)"),
            ("failed requests summed over rows and seeds",
             [seed(100, 90, 600, 80, failures=2), seed(100, 90, 600, 80, failures=1)],
             "- failed requests", "- failed requests, every row and seed: 3"),
            ("bytes moved against evict-and-reload's",
             [seed(100, 90, 600, 80, moved=(50, 1000)), seed(100, 90, 600, 80, moved=(300, 1000))],
             "- bytes moved", "- bytes moved, policy / evict-and-reload: 0.17 [0.05-0.30] (target at most 1)"),
        ]
        for what, seeds, start, expected in rows:
            with self.subTest(what):
                self.assertEqual(self.line(self.summary(seeds), start), expected)

    def test_a_row_missing_from_a_seed_is_said(self):
        rows, bound = seed(100, 90, 600, 80)
        short = ([r for r in rows if r["row"] != "evict-and-reload"], bound)
        lines = self.summary([seed(100, 90, 600, 80), short])
        self.assertIn("(1 of 2 seeds)", self.line(lines, "| evict-and-reload |"))
        self.assertIn("(1 of 2 seeds)", self.line(lines, "- policy p99 / evict-and-reload p99:"))

    def test_the_bound_under_the_rule_with_load_and_run_is_read_from_each_seed(self):
        with tempfile.TemporaryDirectory() as d:
            paths = []
            for i, lr_bound in enumerate((40, 50, None)):
                rows, bound = seed(100, 20, 600, 80)
                paths.append(write_run(d, "s%d" % i, rows, bound))
                if lr_bound is not None:
                    with open(os.path.splitext(paths[-1])[0] + ".md", "a") as f:
                        f.write("The lowest p99 under the rule with load and run (a request ... resident; "
                                "bench/placement_bound.py with_load_and_run): %.1f ms, 2.00x the all-resident "
                                "p99; the policy row's p99 is 2.50x it.\n" % lr_bound)
            runs = [churn_seeds.read_run(p) for p in paths]
            bounds = [churn_seeds.read_load_and_run_bound(p) for p in paths]
        self.assertEqual(bounds, [40, 50, None])
        lines = churn_seeds.summarize(runs, ["1", "2", "3"], bounds)
        self.assertEqual(self.line(lines, "- policy p99 / the bound under the rule with load and run:"),
                         "- policy p99 / the bound under the rule with load and run: 2.25 [2.00-2.50] (2 of 3 seeds) "
                         "(target at most 1.15); that bound / all-resident p99: 2.25 [2.00-2.50] (2 of 3 seeds)")

    def test_a_row_whose_fields_do_not_match_the_header_is_refused(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "bad.csv")
            with open(path, "w") as f:
                f.write("row,p50,p99\npolicy,1,2,a stray field\n")
            proc = subprocess.run([sys.executable, os.path.join(HERE, "..", "..", "bench", "churn_seeds.py"), path],
                                  capture_output=True, text=True)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("do not match the header", proc.stderr)


if __name__ == "__main__":
    unittest.main()
