#!/usr/bin/env python3
"""tests/gpu/compare_churn.py, the real GPU's churn rows against the
simulation's, as a table: which rows are within the tolerance (p50 and p99
both), the ratios printed, rows in one run only named, and files it cannot
read refused with exit 2."""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compare_churn  # noqa: E402

failures = []


def check(ok, what):
    print("%s: %s" % ("ok" if ok else "FAIL", what))
    if not ok:
        failures.append(what)


def write(path, rows):
    with open(path, "w") as f:
        f.write("row,requests,p50,p99,failures\n")
        for name, p50, p99 in rows:
            f.write('"%s",300,%g,%g,0\n' % (name, p50, p99))


def main():
    # (sim p50, real p50, sim p99, real p99) -> within 15%?
    table = [
        ((10.0, 10.0, 50.0, 50.0), True),
        ((11.5, 10.0, 50.0, 50.0), True),    # +15%: at the edge, in
        ((11.6, 10.0, 50.0, 50.0), False),   # p50 16% over
        ((10.0, 10.0, 42.0, 50.0), False),   # p99 16% under
        ((8.6, 10.0, 57.0, 50.0), True),     # both inside, either way
        ((1.0, 0.0, 1.0, 1.0), False),       # a real p50 of 0 compares to nothing
    ]
    for (s50, r50, s99, r99), want in table:
        got = compare_churn.within(s50, r50, 0.15) and compare_churn.within(s99, r99, 0.15)
        check(got == want, "sim p50 %g / real %g, p99 %g / %g: within %s" % (s50, r50, s99, r99, want))

    work = tempfile.mkdtemp(prefix="compare_churn_test_")
    try:
        files(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if failures:
        print("%d failed" % len(failures))
        return 1
    print("all passed")
    return 0


def files(work):
    real, sim = os.path.join(work, "real.csv"), os.path.join(work, "sim.csv")
    write(real, [("policy", 10, 50), ("evict-and-reload", 20, 300), ("all resident", 5, 9)])
    write(sim, [("policy", 11, 52), ("evict-and-reload", 20, 200), ("policy mean", 9, 40)])
    out = subprocess.run([sys.executable, os.path.join(HERE, "compare_churn.py"), real, sim],
                         capture_output=True, text=True, timeout=60)
    check(out.returncode == 0, "exit 0 on two readable runs (%d: %s)" % (out.returncode, out.stderr))
    lines = out.stdout.splitlines()
    policy = [l for l in lines if l.startswith("| policy |")]
    check(policy == ["| policy | 10.00 | 11.00 | 1.10 | 50.00 | 52.00 | 1.04 | yes |"], "policy's line: %s" % policy)
    reload_ = [l for l in lines if l.startswith("| evict-and-reload |")]
    check(len(reload_) == 1 and reload_[0].endswith("| 0.67 | no |"), "evict-and-reload's p99 off by 33%%: %s" % reload_)
    check("rows in one run only: all resident, policy mean" in lines, "rows in one run only named")
    check(lines[-1] == "1 of 2 rows within 15% (p50 and p99)", "the count: %r" % lines[-1])

    bad = os.path.join(work, "bad.csv")
    with open(bad, "w") as f:
        f.write("row,p50\npolicy,1\n")
    out = subprocess.run([sys.executable, os.path.join(HERE, "compare_churn.py"), real, bad],
                         capture_output=True, text=True, timeout=60)
    check(out.returncode == 2 and "no column 'p99'" in out.stderr, "a CSV without p99 refused: %r" % out.stderr)
    out = subprocess.run([sys.executable, os.path.join(HERE, "compare_churn.py"), real, os.path.join(work, "none")],
                         capture_output=True, text=True, timeout=60)
    check(out.returncode == 2, "a missing file refused")


if __name__ == "__main__":
    sys.exit(main())
