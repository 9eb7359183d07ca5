#!/usr/bin/env python3
"""Measures a real accelerator as the churn benchmark's simulation charges
one, and writes it as a device profile (bench/device_profile.py) for
bench/churn.py --profile: run it when a GPU machine is lent, beside
tests/gpu/cuda_check.sh (about 5 minutes; the machine's own python3 with
torch built for CUDA).

  - The host-to-device link: weights of 20, 100 and 200 MB copied onto the
    device from pageable and from pinned (page-locked) memory, each the
    median of --repeat copies after one untimed; a line fitted through
    them gives the rate (its slope) and the fixed cost per copy (its
    intercept, not below 0).
  - Compute: the churn benchmark's models (tools/make_churn_models.py, the
    smallest, a middle and the largest of --count), one row each, on the
    device in FP32 and BF16 and on the CPU in FP32, each the median of
    --repeat runs after --warmup; cpu_slowdown is the median over the
    models of CPU / device (FP32).

    calibrate.py --out PROFILE.json [--device cuda:0|cpu] [--repeat 7]

With no CUDA device (CI, this project's machines) it says so and exits 0
without writing a profile: a dry run. --device cpu runs every step with the
CPU standing in for the device (a host copy for the link), so the script
and its profile's format are tested where no GPU is
(tests/gpu/calibrate_test.py); such a profile says so in its "device".
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "bench"))
import device_profile  # noqa: E402

LINK_SIZES_MB = (20, 100, 200)


def fit_line(points):
    """Least squares through (bytes, seconds) points: (bytes_per_second,
    latency_seconds), the latency not below 0. ValueError when the points
    do not rise with size."""
    n = len(points)
    if n < 2:
        raise ValueError("need at least two sizes")
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    sxy = sum((x - mx) * (y - my) for x, y in points)
    if sxx <= 0 or sxy <= 0:
        raise ValueError("copy times do not grow with size: %s" % points)
    slope = sxy / sxx
    return 1.0 / slope, max(0.0, my - slope * mx)


def timed(run, sync, repeat):
    """The median seconds of `repeat` calls of run() after one untimed."""
    run()
    sync()
    times = []
    for _ in range(repeat):
        sync()
        start = time.perf_counter()
        run()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure_link(torch, device, repeat):
    """{"pageable": {...}, "pinned": {...}, "samples": [...]} for `device`."""
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
    out, samples = {}, []
    for kind in ("pageable", "pinned"):
        points = []
        for mb in LINK_SIZES_MB:
            host = torch.ones(int(mb * 1e6), dtype=torch.uint8)
            if kind == "pinned" and device.type == "cuda":
                host = host.pin_memory()
            if device.type == "cuda":
                seconds = timed(lambda: host.to(device, non_blocking=(kind == "pinned")), sync, repeat)
            else:  # the CPU standing in: a copy in host memory
                seconds = timed(lambda: host.clone(), sync, repeat)
            points.append((host.numel(), seconds))
            samples.append({"kind": kind, "bytes": host.numel(), "ms": round(seconds * 1e3, 4)})
            del host
        rate, latency = fit_line(points)
        out[kind] = {"bytes_per_second": round(rate), "latency_ms": round(latency * 1e3, 4)}
    out["samples"] = samples
    return out


def measure_models(torch, device, models, repeat, warmup):
    """{name: {"device_fp32_ms", "device_bf16_ms", "cpu_fp32_ms"}} for the
    churn models at `models` ([(name, path, width)])."""
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
    out = {}
    for name, path, width in models:
        times = {}
        for key, where, dtype in (("device_fp32_ms", device, torch.float32),
                                  ("device_bf16_ms", device, torch.bfloat16),
                                  ("cpu_fp32_ms", torch.device("cpu"), torch.float32)):
            module = torch.jit.load(path, map_location=where).to(dtype).eval()
            x = torch.rand(1, width, dtype=dtype, device=where)
            with torch.inference_mode():
                for _ in range(warmup):
                    module(x)
                seconds = timed(lambda: module(x), sync if where.type == "cuda" else (lambda: None), repeat)
            times[key] = round(seconds * 1e3, 4)
            del module, x
        out[name] = times
    return out


def churn_models(work, count):
    """The churn benchmark's models, made here: the smallest, a middle one
    and the largest, as [(name, path, width)]."""
    subprocess.run([sys.executable, os.path.join(ROOT, "tools", "make_churn_models.py"), work, "--count", str(count)],
                   check=True, stdout=subprocess.DEVNULL)
    names = sorted(n for n in os.listdir(work) if os.path.exists(os.path.join(work, n, "config.pbtxt")))
    picked = sorted({names[0], names[len(names) // 2], names[-1]})
    out = []
    for name in picked:
        config = open(os.path.join(work, name, "config.pbtxt")).read()
        width = int(config.split("dims: [", 1)[1].split("]", 1)[0])
        out.append((name, os.path.join(work, name, "1", "model.pt"), width))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="the profile to write (JSON)")
    ap.add_argument("--device", default="cuda:0", help="cuda:N (default cuda:0), or cpu to test the script")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--count", type=int, default=24, help="churn models made (three of them measured)")
    args = ap.parse_args()
    if args.repeat < 1 or args.warmup < 0 or args.count < 1:
        ap.error("--repeat must be at least 1, --warmup at least 0, --count at least 1")
    try:
        import torch
    except ImportError:
        print("calibrate: no torch in this Python (%s): dry run, no profile written" % sys.executable)
        return 0
    if args.device != "cpu":
        if not args.device.startswith("cuda"):
            ap.error("--device: cuda:N or cpu, got %r" % args.device)
        if not torch.cuda.is_available():
            print("calibrate: no CUDA device here (torch %s, built for CUDA %s): dry run, no profile written" %
                  (torch.__version__, torch.version.cuda))
            return 0
    device = torch.device(args.device)
    torch.set_num_threads(os.cpu_count() or 1)
    started = time.time()
    link = measure_link(torch, device, args.repeat)
    with tempfile.TemporaryDirectory(prefix="calibrate_") as work:
        models = measure_models(torch, device, churn_models(work, args.count), args.repeat, args.warmup)
    slowdowns = [m["cpu_fp32_ms"] / m["device_fp32_ms"] for m in models.values()]
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "the CPU standing in for a device (a test)"
    profile = {
        "format": device_profile.FORMAT,
        "device": name,
        "source": "measured on %s by tests/gpu/calibrate.py, torch %s, %s UTC, %d repeats, %.0f s" % (
            args.device, torch.__version__, datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"),
            args.repeat, time.time() - started),
        "link": link,
        "cpu_slowdown": round(statistics.median(slowdowns), 3),
        "models": models,
    }
    device_profile.check(profile)
    with open(args.out, "w") as f:
        json.dump(profile, f, indent=2)
        f.write("\n")
    bandwidth, latency, slowdown = device_profile.simulate_args(profile)
    print("calibrate: wrote %s: pageable %s + %s per copy, pinned %.1f GB/s, CPU %.2fx slower (%s)" % (
        args.out, bandwidth, latency, link["pinned"]["bytes_per_second"] / 1e9, slowdown,
        ", ".join("%s %s" % (n, m) for n, m in sorted(models.items()))))
    print("calibrate: churn with it: bench/churn.sh (CHURN_ARGS=\"--profile %s\")" % os.path.abspath(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
