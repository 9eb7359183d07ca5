#!/usr/bin/env python3
"""tests/gpu/calibrate.py where no GPU is: its dry run (no CUDA: it says so,
exits 0 and writes nothing), the whole measurement with the CPU standing in
for the device (a profile in the format bench/device_profile.py reads, with
every field), the line fitted through the copy times as a table, the
profile checker's refusals as a table, the nominal profiles in
bench/profiles/, and churn.py refusing a bad --profile by name."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "bench"))
import calibrate  # noqa: E402
import device_profile  # noqa: E402

failures = []


def check(ok, what):
    print("%s: %s" % ("ok" if ok else "FAIL", what))
    if not ok:
        failures.append(what)


def run(*args):
    return subprocess.run([sys.executable] + list(args), capture_output=True, text=True, timeout=600)


def main():
    work = tempfile.mkdtemp(prefix="calibrate_test_")
    try:
        return checks(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def checks(work):

    # No CUDA here: a dry run.
    import torch
    check(not torch.cuda.is_available(), "this machine has no CUDA device (the dry run's premise)")
    dry = os.path.join(work, "dry.json")
    r = run(os.path.join(HERE, "calibrate.py"), "--out", dry)
    check(r.returncode == 0 and "dry run, no profile written" in r.stdout and not os.path.exists(dry),
          "without CUDA: exit 0, says it is a dry run, writes nothing (rc %d, %r)" % (r.returncode, r.stdout[-200:]))

    # The CPU standing in for the device: every step, a profile that loads.
    out = os.path.join(work, "cpu.json")
    r = run(os.path.join(HERE, "calibrate.py"), "--out", out, "--device", "cpu", "--repeat", "2", "--warmup", "1",
            "--count", "3")
    check(r.returncode == 0, "--device cpu runs (rc %d: %s)" % (r.returncode, (r.stdout + r.stderr)[-500:]))
    if r.returncode == 0:
        profile = device_profile.load(out)
        check("CPU standing in" in profile["device"], "the profile says the CPU stood in")
        check(len(profile["models"]) == 3 and all(set(m) == {"device_fp32_ms", "device_bf16_ms", "cpu_fp32_ms"}
                                                  for m in profile["models"].values()),
              "three churn models, each with its three latencies: %s" % profile["models"])
        samples = profile["link"]["samples"]
        check(sorted((s["kind"], s["bytes"]) for s in samples) ==
              sorted((k, mb * 1000000) for k in ("pageable", "pinned") for mb in calibrate.LINK_SIZES_MB),
              "link samples at 20, 100 and 200 MB, pageable and pinned")
        bandwidth, latency, slowdown = device_profile.simulate_args(profile)
        check(re.fullmatch(r"[1-9][0-9]*/s", bandwidth) and re.fullmatch(r"[0-9]+ms", latency) and slowdown > 0,
              "the simulation's forms: %s, %s, %g" % (bandwidth, latency, slowdown))
        check("churn with it: bench/churn.sh" in r.stdout, "it says how to run the churn benchmark with it")

    # The fitted line, as a table: (points, rate, latency) or an error.
    table = [
        ([(1e6, 0.002 + 1e6 / 12e9), (1e8, 0.002 + 1e8 / 12e9), (2e8, 0.002 + 2e8 / 12e9)], 12e9, 0.002),
        ([(2e7, 2e7 / 50e9), (2e8, 2e8 / 50e9)], 50e9, 0.0),
        ([(1e6, 0.0), (2e8, 0.004 - 1e-4)], None, 0.0),  # an intercept below 0 is 0
        ([(1e6, 0.01), (2e8, 0.005)], "error", None),  # falls with size
        ([(1e6, 0.01)], "error", None),
    ]
    for points, rate, latency in table:
        try:
            got_rate, got_latency = calibrate.fit_line(points)
        except ValueError:
            check(rate == "error", "fit_line%s refused" % (points,))
            continue
        check(rate != "error", "fit_line%s fits" % (points,))
        if rate not in (None, "error"):
            check(abs(got_rate / rate - 1) < 1e-6, "fit_line rate %g (want %g)" % (got_rate, rate))
        check(abs(got_latency - latency) < 1e-9, "fit_line latency %g (want %g)" % (got_latency, latency))

    # The checker's refusals name the field.
    good = device_profile.load(os.path.join(ROOT, "bench", "profiles", "pcie4-gpu.json"))
    refusals = [
        (lambda p: p.pop("format"), "format"),
        (lambda p: p.update(format="infergate-device-profile/0"), "format"),
        (lambda p: p.update(device=""), "device"),
        (lambda p: p["link"]["pageable"].update(bytes_per_second=0), "link.pageable.bytes_per_second"),
        (lambda p: p["link"]["pinned"].update(bytes_per_second="fast"), "link.pinned.bytes_per_second"),
        (lambda p: p["link"]["pinned"].update(latency_ms=True), "link.pinned.latency_ms"),
        (lambda p: p["link"]["pageable"].update(latency_ms=-1), "link.pageable.latency_ms"),
        (lambda p: p["link"].pop("pinned"), "link.pinned"),
        (lambda p: p.update(cpu_slowdown=float("nan")), "cpu_slowdown"),
        (lambda p: p.update(models={"m": {"gpu_ms": 1}}), "models.m.gpu_ms"),
        (lambda p: p.update(models={"m": {"cpu_fp32_ms": 0}}), "models.m.cpu_fp32_ms"),
    ]
    for change, field in refusals:
        bad = json.loads(json.dumps(good))
        change(bad)
        try:
            device_profile.check(bad)
            check(False, "a profile with a bad %s refused" % field)
        except ValueError as e:
            check(str(e).startswith(field + ":"), "a bad %s refused naming it: %s" % (field, e))

    # The nominal profiles load, and churn.py refuses a bad one by name.
    for name in sorted(os.listdir(os.path.join(ROOT, "bench", "profiles"))):
        try:
            device_profile.load(os.path.join(ROOT, "bench", "profiles", name))
            check(True, "bench/profiles/%s loads" % name)
        except ValueError as e:
            check(False, "bench/profiles/%s loads: %s" % (name, e))
    broken = os.path.join(work, "broken.json")
    with open(broken, "w") as f:
        json.dump(dict(good, cpu_slowdown=-2), f)
    r = run(os.path.join(ROOT, "bench", "churn.py"), "--server", "/nonexistent", "--proto-dir", "/nonexistent",
            "--models", "/nonexistent", "--profile", broken)
    check(r.returncode == 2 and "--profile" in r.stderr and "cpu_slowdown" in r.stderr,
          "churn.py --profile with a bad profile: usage error naming it (rc %d: %s)" % (r.returncode, r.stderr[-300:]))

    print("calibrate_test: %d failed" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
