#!/usr/bin/env python3
"""The churn benchmark: more models wanted on an accelerator than fit, and
the popular ones changing. One run, three rows, the same models and the
same arrivals:

  policy            no cold start (--background-moves, the default): auto
                    runs a request where its model is ready, the move policy
                    moves models onto cuda:0 by demand, a model displaced
                    from it answers from a CPU copy (demoted:cuda:0)
  evict-and-reload  --background-moves=false: the least recently used model
                    is evicted and the next request for it waits for its load
  all resident      cuda:0's budget holds every model (the bound)

The models (tools/make_churn_models.py) are COUNT TorchScript models of
MIN_MB to MAX_MB, FP32; the simulated cuda:0's budget (and memory) is a
third of their total, behind a simulated host-to-device link (--bandwidth,
--transfer-latency), and the CPU is --cpu-slowdown times slower than it
(--simulate-cpu-slowdown: the simulated GPU computes on the same CPU).
The clients are open-loop: requests arrive at --rate per second (Poisson,
seeded: every row gets the same arrivals) whatever the server does, each
for a model drawn from a Zipf distribution (--zipf) whose ranking rotates
by a third of the models every --shift seconds, so the popular set
changes. Every model is asked for once before the clock starts (cold
starts are not measured).

Per row: p50, p99, p99.9 and max latency, failures, the requests that
waited for a load (the server's own count), the share answered on cuda:0,
bytes moved to cuda:0 (per minute), the budget's high-water mark (the
simulated device's memory peak against its budget) and the moves.

    churn.py --server BIN --proto-dir proto --models DIR [--seconds 60] [--smoke]
"""
import argparse
import os
import random
import re
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
import igtest  # noqa: E402


def metric(text, name, labels=None):
    """The sum of `name`'s series whose labels include `labels`."""
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name):
            continue
        m = re.match(r"^%s(\{[^}]*\})?\s+(\S+)$" % re.escape(name), line)
        if not m:
            continue
        got = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1) or ""))
        if all(got.get(k) == v for k, v in (labels or {}).items()):
            total += float(m.group(2))
    return total


def scrape(server):
    with urllib.request.urlopen("http://%s/metrics" % server.metrics_address, timeout=10) as r:
        return r.read().decode()


def percentile(sorted_values, q):
    if not sorted_values:
        return float("nan")
    i = min(len(sorted_values) - 1, max(0, int(round(q * (len(sorted_values) - 1)))))
    return sorted_values[i]


def arrivals(seconds, rate, models, zipf, shift, seed):
    """(time, model) pairs: Poisson arrivals, Zipf over a ranking that rotates
    by a third of the models every `shift` seconds."""
    rng = random.Random(seed)
    order = list(models)
    rng.shuffle(order)
    weights = [1.0 / (k + 1) ** zipf for k in range(len(order))]
    out = []
    t = rng.expovariate(rate)
    step = max(1, len(order) // 3)
    while t < seconds:
        phase = int(t // shift)
        rank = rng.choices(range(len(order)), weights)[0]
        out.append((t, order[(rank + phase * step) % len(order)]))
        t += rng.expovariate(rate)
    return out


def run_row(name, extra_args, opts, models, widths, budget, schedule, log_dir):
    from infergate.v1 import inference_pb2 as v1
    from infergate.v1 import inference_pb2_grpc as v1_grpc
    from infergate.v1 import tensor_pb2
    import grpc

    sim = "cuda:0=%d,bandwidth=%s,transfer_latency=%s" % (budget, opts.bandwidth, opts.transfer_latency)
    args = ["--model-repository=" + opts.models, "--simulate-devices=" + sim, "--cache-budget=cuda:0=%d" % budget,
            "--simulate-cpu-slowdown=%g" % opts.cpu_slowdown, "--repository-poll-interval=0"] + extra_args
    server = igtest.Server(opts.server, args, os.path.join(log_dir, "churn_%s.log" % name.replace(" ", "_")))
    server.wait_serving()
    channel = grpc.insecure_channel(server.address)
    stub = v1_grpc.InferenceServiceStub(channel)
    requests = {}
    for m in models:
        req = v1.InferRequest(model=m)
        t = req.inputs.add()
        t.name = "x"
        t.dtype = tensor_pb2.FLOAT32
        t.shape.extend([1, widths[m]])
        t.data = bytes(4 * widths[m])
        requests[m] = req
    # Cold starts, not measured: every model asked for once, then a pause for
    # what they set off (CPU copies of the displaced) to settle.
    for m in models:
        stub.Infer(requests[m], timeout=120)
    time.sleep(opts.settle)

    peak = [0, 0]  # cache_resident_bytes sampled, the device's memory peak
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            try:
                for d in stub.ListDevices(v1.ListDevicesRequest(), timeout=5).devices:
                    if d.id == "cuda:0":
                        peak[0] = max(peak[0], d.cache_resident_bytes)
                        peak[1] = max(peak[1], d.memory_peak_bytes)
            except grpc.RpcError:
                pass
            stop.wait(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    before = scrape(server)
    lock = threading.Lock()
    results = []  # (latency s, ok, device, fallback reason)
    pending = [0]
    all_done = threading.Condition(lock)

    def finish(future, sent):
        latency = time.monotonic() - sent
        try:
            r = future.result()
            row = (latency, True, r.placement.device, r.placement.fallback_reason)
        except grpc.RpcError as e:
            row = (latency, False, "", "%s: %s" % (e.code(), e.details()))
        with lock:
            results.append(row)
            pending[0] -= 1
            all_done.notify_all()

    start = time.monotonic()
    for t, m in schedule:
        delay = start + t - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        sent = time.monotonic()
        with lock:
            pending[0] += 1
        f = stub.Infer.future(requests[m], timeout=60)
        f.add_done_callback(lambda fut, sent=sent: finish(fut, sent))
    with lock:
        all_done.wait_for(lambda: pending[0] == 0, timeout=120)
    elapsed = time.monotonic() - start
    stop.set()
    sampler.join()
    after = scrape(server)
    channel.close()
    code = server.stop()

    lat = sorted(r[0] * 1000 for r in results if r[1])
    failures = [r for r in results if not r[1]]
    on_gpu = sum(1 for r in results if r[1] and r[2] == "cuda:0")
    moved = metric(after, "infergate_model_transfer_bytes_total", {"device": "cuda:0"}) - \
        metric(before, "infergate_model_transfer_bytes_total", {"device": "cuda:0"})
    waited = metric(after, "infergate_requests_waited_for_load_total") - \
        metric(before, "infergate_requests_waited_for_load_total")
    promoted = metric(after, "infergate_model_moves_total", {"reason": "promoted"}) - \
        metric(before, "infergate_model_moves_total", {"reason": "promoted"})
    demoted = metric(after, "infergate_model_moves_total", {"reason": "demoted"}) - \
        metric(before, "infergate_model_moves_total", {"reason": "demoted"})
    evicted = metric(after, "infergate_model_evictions_total", {"device": "cuda:0"}) - \
        metric(before, "infergate_model_evictions_total", {"device": "cuda:0"})
    return {
        "row": name, "requests": len(results), "failures": len(failures),
        "first_failure": failures[0][3] if failures else "",
        "p50": percentile(lat, 0.50), "p99": percentile(lat, 0.99), "p999": percentile(lat, 0.999),
        "max": lat[-1] if lat else float("nan"),
        "waited": int(waited), "on_gpu": on_gpu / max(1, len(results)),
        "moved_mb_per_min": moved / 1e6 / (elapsed / 60), "peak_resident": peak[0], "peak_memory": peak[1],
        "budget": budget, "promoted": int(promoted), "demoted": int(demoted), "evicted": int(evicted),
        "exit": code,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", required=True)
    ap.add_argument("--proto-dir", required=True)
    ap.add_argument("--models", required=True, help="made by tools/make_churn_models.py")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--rate", type=float, default=20, help="requests per second, open loop")
    ap.add_argument("--zipf", type=float, default=1.1)
    ap.add_argument("--shift", type=float, default=10, help="seconds between shifts of the popular set")
    ap.add_argument("--cpu-slowdown", type=float, default=4)
    ap.add_argument("--bandwidth", default="12GB/s")
    ap.add_argument("--transfer-latency", default="2ms")
    ap.add_argument("--settle", type=float, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", help="markdown file for the table (printed too)")
    ap.add_argument("--csv", help="csv file for the rows")
    ap.add_argument("--work", default="/tmp/churn_work")
    args = ap.parse_args()

    igtest.generate_stubs(args.proto_dir, os.path.join(args.work, "stubs"))
    models, widths, total = [], {}, 0
    for name in sorted(os.listdir(args.models)):
        cfg = os.path.join(args.models, name, "config.pbtxt")
        if not os.path.exists(cfg):
            continue
        width = int(re.search(r"dims: \[(\d+)\]", open(cfg).read()).group(1))
        models.append(name)
        widths[name] = width
        total += (width * width + width) * 4
    if len(models) < 3:
        igtest.fail("need at least 3 models in %s" % args.models)
    budget = total // 3
    schedule = arrivals(args.seconds, args.rate, models, args.zipf, args.shift, args.seed)
    rows = [
        ("policy", []),
        ("evict-and-reload", ["--background-moves=false"]),
        ("all resident", None),
    ]
    results = []
    for name, extra in rows:
        row_budget = budget if extra is not None else int(total * 1.5)
        r = run_row(name, extra or [], args, models, widths, row_budget, schedule, args.work)
        print("%-16s %s" % (name, r), flush=True)
        results.append(r)

    lines = [
        "Churn: %d models of %.0f-%.0f MB (%.0f MB in all), cuda:0 budget %.0f MB (a third; all resident: %.0f MB), "
        "link %s + %s per load, CPU %gx slower than cuda:0; open loop %.0f req/s for %.0f s, Zipf %.2f, popular set "
        "shifted every %.0f s; %d requests per row, the same arrivals in each." % (
            len(models), min((w * w + w) * 4 for w in widths.values()) / 1e6,
            max((w * w + w) * 4 for w in widths.values()) / 1e6, total / 1e6, budget / 1e6, total * 1.5 / 1e6,
            args.bandwidth, args.transfer_latency, args.cpu_slowdown, args.rate, args.seconds, args.zipf, args.shift,
            len(schedule)),
        "",
        "| row | p50 ms | p99 ms | p99.9 ms | max ms | failed | waited for a load | on cuda:0 | MB moved/min "
        "| cuda:0 peak / budget MB | promoted | demoted | evicted |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append("| %s | %.1f | %.1f | %.1f | %.1f | %d | %d | %.0f%% | %.0f | %.0f / %.0f | %d | %d | %d |" % (
            r["row"], r["p50"], r["p99"], r["p999"], r["max"], r["failures"], r["waited"], 100 * r["on_gpu"],
            r["moved_mb_per_min"], r["peak_memory"] / 1e6, r["budget"] / 1e6, r["promoted"], r["demoted"],
            r["evicted"]))
    policy, reload_, resident = results
    lines += [
        "",
        "policy p99 / all-resident p99: %.2f (target <= 1.5); policy p99 / evict-and-reload p99: %.2f (target <= 0.5); "
        "bytes moved, policy / evict-and-reload: %.2f (target <= 1)" % (
            policy["p99"] / resident["p99"], policy["p99"] / reload_["p99"],
            policy["moved_mb_per_min"] / max(1e-9, reload_["moved_mb_per_min"])),
    ]
    for r in results:
        if r["failures"]:
            lines.append("%s: first failure: %s" % (r["row"], r["first_failure"]))
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        open(args.out, "w").write(text)
    if args.csv:
        with open(args.csv, "w") as f:
            keys = list(results[0].keys())
            f.write(",".join(keys) + "\n")
            for r in results:
                f.write(",".join(str(r[k]) for k in keys) + "\n")
    bad = [r["row"] for r in results if r["exit"] != 0]
    if bad:
        igtest.fail("server exited uncleanly in rows %s" % bad)


if __name__ == "__main__":
    main()
