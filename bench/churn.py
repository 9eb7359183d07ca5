#!/usr/bin/env python3
"""The churn benchmark: more models wanted on an accelerator than fit, and
the popular ones changing. One run, a row per server configuration, the
same models and the same arrivals:

  policy            no cold start (--background-moves, the default): auto
                    runs a request where its model is ready, the move policy
                    moves models onto cuda:0 by demand, a model displaced
                    from it answers from a CPU copy (demoted:cuda:0); its
                    objective the tail; half of cuda:0's budget the staging
                    share, where requests load and run (the defaults)
  policy, no host copies   (--compare-host-copies) the policy with
                    --host-copy-share=0: every load reads its file
  policy, displacing   (--compare-displacing) the policy with
                    --load-and-run-displaces: a request's load and run may
                    evict idle copies when the device has no free room
  policy, no change detection   (--compare-change-detection) the policy
                    with --demand-change-threshold=0: demand is the decaying
                    rate alone, which follows a shift in windows, not seconds
  policy, staging   (--compare-staging SHARE) the policy with
                    --staging-share=SHARE: that share of cuda:0's budget is
                    left to requests that load and run (0: none, the move
                    policy's budget the device's)
  NAME              (--compare "NAME=FLAGS", repeatable) the server with
                    those flags (space-separated) added to the policy's, e.g.
                    --compare "LRU, host copies=--background-moves=false"
  policy mean       the same with --move-objective=mean
  previous rule     the policy with --load-and-run=false: the rule before
                    load and run (never wait for a load while a copy is
                    ready; no staging share), held to that rule's bound
  evict-and-reload  --background-moves=false --host-copy-share=0: the least
                    recently used model is evicted and the next request for
                    it waits for its load, which reads its file again (the
                    policy rows start loads from host copies of the weights)
  all resident      cuda:0's budget holds every model (no staging share),
                    and every request names cuda:0 (the bound: under auto,
                    a loaded machine sent some to the CPU while cuda:0's
                    queue was long)

The models (tools/make_churn_models.py) are COUNT TorchScript models of
MIN_MB to MAX_MB, FP32, or its --mix real (ResNet-50-like conv nets and
BERT-base-like encoders beside GEMV layers; their inputs, bytes and
compute from its models.json); the simulated cuda:0's budget (and memory) is a
third of their total, behind a simulated host-to-device link (--bandwidth,
--transfer-latency), and the CPU is --cpu-slowdown times slower than it
(--simulate-cpu-slowdown: the simulated GPU computes on the same CPU). The
simulated GPU's time for a run is --compute-scale (2) times the least CPU
time such a run has taken (so what else runs on the two shared cores does
not lengthen it, as it does not a real GPU's), and the CPU's slowdown is
scaled with it;
--profile FILE takes all three from a device profile (bench/profiles/, or
one tests/gpu/calibrate.py measured on a real GPU). --real-device serves on
the machine's own cuda:0 instead (LibTorch finds it; only its budget is
set, the link and both devices' speeds are the machine's), for
tests/gpu/churn_on_gpu.sh to set beside the simulation given that
machine's profile; the bounds are then computed from the profile.
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
import csv
import json
import math
import os
import random
import re
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
import igtest  # noqa: E402
import device_profile  # noqa: E402
from placement_bound import placement_bound, slower_share, with_load_and_run  # noqa: E402
from churn_seeds import PREVIOUS_RULE_ROW  # noqa: E402


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


class Popularity:
    """The Zipf distribution over the models whose ranking rotates by a third
    of the models every `shift` seconds (seeded: the same in every row)."""

    def __init__(self, models, zipf, shift, seed):
        self.rng = random.Random(seed)
        self.order = list(models)
        self.rng.shuffle(self.order)
        self.shift = shift
        self.weights = [1.0 / (k + 1) ** zipf for k in range(len(self.order))]
        self.step = max(1, len(self.order) // 3)

    def model_at_rank(self, rank, phase):
        return self.order[(rank + phase * self.step) % len(self.order)]

    def shares(self, phase):
        """{model: the share of the requests it gets} during `phase`."""
        total = sum(self.weights)
        return {self.model_at_rank(k, phase): w / total for k, w in enumerate(self.weights)}


def arrivals(seconds, rate, popularity):
    """(time, model) pairs: Poisson arrivals at `rate`, each model drawn from
    `popularity` in the phase its time falls in."""
    rng = popularity.rng
    n = len(popularity.order)
    out = []
    t = rng.expovariate(rate)
    while t < seconds:
        rank = rng.choices(range(n), popularity.weights)[0]
        out.append((t, popularity.model_at_rank(rank, int(t // popularity.shift))))
        t += rng.expovariate(rate)
    return out


def estimated(row):
    """The row's requests whose ready path had an estimate: those the
    regret judges."""
    return row["ready_path_requests"] - row["unestimated"]


def host_cpu_slowdown(opts):
    """The server's --simulate-cpu-slowdown: the CPU --cpu-slowdown times
    slower than cuda:0, which computes in --compute-scale times a run's host
    CPU time when that is set (its own time, whatever else the two share)."""
    return opts.cpu_slowdown * (opts.compute_scale if opts.compute_scale > 0 else 1)


def read_models(folder):
    """{name: {"input": {"name", "dtype", "dims"}, "bytes", "kind", "gflop"}}
    of the repository tools/make_churn_models.py wrote: from its models.json,
    or, in a repository from before it wrote one, from each config's one
    input of width W (a W x W layer and its bias, FP32)."""
    manifest = os.path.join(folder, "models.json")
    if os.path.exists(manifest):
        with open(manifest) as f:
            return {m["name"]: m for m in json.load(f)["models"]}
    specs = {}
    for name in sorted(os.listdir(folder)):
        cfg = os.path.join(folder, name, "config.pbtxt")
        if os.path.exists(cfg):
            width = int(re.search(r"dims: \[(\d+)\]", open(cfg).read()).group(1))
            specs[name] = {"input": {"name": "x", "dtype": "FLOAT32", "dims": [width]},
                           "bytes": (width * width + width) * 4, "kind": "gemv", "gflop": 2 * width * width / 1e9}
    return specs


ELEMENT_BYTES = {"FLOAT32": 4, "INT64": 8}


def model_request(v1, tensor_pb2, name, spec, device=""):
    """An infergate.v1 InferRequest of one row of zeros for `name`, as its
    spec (read_models) says."""
    req = v1.InferRequest(model=name, device=device)
    t = req.inputs.add()
    t.name = spec["input"]["name"]
    t.dtype = getattr(tensor_pb2, spec["input"]["dtype"])
    t.shape.extend([1] + spec["input"]["dims"])
    t.data = bytes(ELEMENT_BYTES[spec["input"]["dtype"]] * math.prod(spec["input"]["dims"]))
    return req


def run_row(name, extra_args, opts, models, specs, budget, schedule, log_dir, calibrate_cpu=False, device=""):
    """One row. `calibrate_cpu`: after the clock stops, each model's CPU
    latency alone (a warm-up request on the CPU, then 5 timed ones, one at a
    time), as "cpu_alone": {model: [ms]}. `device`: the device every
    request names ("": auto)."""
    from infergate.v1 import inference_pb2 as v1
    from infergate.v1 import inference_pb2_grpc as v1_grpc
    from infergate.v1 import tensor_pb2
    import grpc

    args = ["--model-repository=" + opts.models, "--cache-budget=cuda:0=%d" % budget, "--repository-poll-interval=0"]
    if not opts.real_device:
        sim = "cuda:0=%d,bandwidth=%s,transfer_latency=%s" % (budget, opts.bandwidth, opts.transfer_latency)
        if opts.compute_scale > 0:
            sim += ",compute_scale=%g" % opts.compute_scale
        args += ["--simulate-devices=" + sim, "--simulate-cpu-slowdown=%g" % host_cpu_slowdown(opts)]
    args += extra_args
    server = igtest.Server(opts.server, args, os.path.join(log_dir, "churn_%s.log" % name.replace(" ", "_")))
    server.wait_serving()
    channel = grpc.insecure_channel(server.address)
    stub = v1_grpc.InferenceServiceStub(channel)
    requests = {m: model_request(v1, tensor_pb2, m, specs[m], device) for m in models}
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
    # (sent s from the start, model, latency s, ok, device, fallback reason, compute us, queue us, the ready
    # path auto took, that path's estimate in us, the server's own time for it in us: what the latency holds
    # beyond it is the client's and the connection's; the time held for a load on arrival and the path's
    # estimate of its load, in us)
    results = []
    pending = [0]
    all_done = threading.Condition(lock)

    def finish(future, sent, model):
        latency = time.monotonic() - sent
        try:
            r = future.result()
            row = (sent - start, model, latency, True, r.placement.device, r.placement.fallback_reason,
                   r.timing.compute_us, r.timing.queue_us, r.placement.ready_path, r.placement.ready_path_expected_us,
                   r.timing.total_us, r.timing.load_wait_us, r.placement.ready_path_load_us)
        except grpc.RpcError as e:
            row = (sent - start, model, latency, False, "", "%s: %s" % (e.code(), e.details()), 0, 0, "", 0, 0, 0, 0)
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
        f.add_done_callback(lambda fut, sent=sent, m=m: finish(fut, sent, m))
    with lock:
        all_done.wait_for(lambda: pending[0] == 0, timeout=120)
    elapsed = time.monotonic() - start
    stop.set()
    sampler.join()
    after = scrape(server)
    cpu_alone = {}
    if calibrate_cpu:
        for m in models:
            on_cpu = v1.InferRequest()
            on_cpu.CopyFrom(requests[m])
            on_cpu.device = "cpu"
            stub.Infer(on_cpu, timeout=120)
            cpu_alone[m] = []
            for _ in range(5):
                sent = time.monotonic()
                stub.Infer(on_cpu, timeout=60)
                cpu_alone[m].append((time.monotonic() - sent) * 1000)
    channel.close()
    code = server.stop()

    lat = sorted(r[2] * 1000 for r in results if r[3])
    failures = [r for r in results if not r[3]]
    on_gpu = sum(1 for r in results if r[3] and r[4] == "cuda:0")
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
    def added(series, labels=None):
        return metric(after, series, labels) - metric(before, series, labels)

    # Loads onto cuda:0 in the row (moves, load-and-run, cold starts) and
    # how long each took on average: file read (or host copy), placement,
    # the simulated transfer and warm-up.
    gpu_loads = added("infergate_model_load_duration_seconds_count", {"device": "cuda:0"})
    gpu_load_ms = 1000 * added("infergate_model_load_duration_seconds_sum", {"device": "cuda:0"}) / max(1, gpu_loads)
    return {
        "row": name, "requests": len(results), "failures": len(failures),
        "gpu_loads": int(gpu_loads), "gpu_load_ms": gpu_load_ms,
        # auto's requests counted under their ready path, those whose path
        # had no estimate (the model's latency there not yet measured), and
        # of the rest those that finished more than 20% after that path's
        # estimate (regret).
        "ready_path_requests": int(added("infergate_ready_path_requests_total")),
        "unestimated": int(added("infergate_ready_path_unestimated_total")),
        "regret": int(added("infergate_regret_total")),
        "loads_from_host_copy": int(added("infergate_model_loads_from_host_copy_total")),
        "first_failure": failures[0][5] if failures else "",
        "p50": percentile(lat, 0.50), "p99": percentile(lat, 0.99), "p999": percentile(lat, 0.999),
        "max": lat[-1] if lat else float("nan"),
        "waited": int(waited), "on_gpu": on_gpu / max(1, len(results)),
        "moved_mb_per_min": moved / 1e6 / (elapsed / 60), "peak_resident": peak[0], "peak_memory": peak[1],
        "budget": budget, "promoted": int(promoted), "demoted": int(demoted), "evicted": int(evicted),
        "exit": code, "per_request": sorted(results), "cpu_alone": cpu_alone,
    }


def transfer_ms(nbytes, bandwidth, latency):
    """Milliseconds to move `nbytes` over a link of `bandwidth` ("12GB/s",
    "7954958866/s") with a fixed `latency` ("2ms") per move."""
    rate = re.fullmatch(r"([0-9.]+)\s*([KMG]?)B?/s", bandwidth.strip())
    fixed = re.fullmatch(r"([0-9.]+)\s*(us|ms|s)", latency.strip())
    if not rate or not fixed:
        raise ValueError("cannot read the link %r + %r" % (bandwidth, latency))
    per_second = float(rate.group(1)) * {"": 1, "K": 1e3, "M": 1e6, "G": 1e9}[rate.group(2)]
    return nbytes / per_second * 1000 + float(fixed.group(1)) * {"us": 1e-3, "ms": 1, "s": 1000}[fixed.group(2)]


def mix_text(specs):
    """" (4 GEMV layers, 2 conv nets, 1 encoder)" where the mix has more
    than GEMV layers, else ""."""
    kinds = [specs[m]["kind"] for m in sorted(specs)]
    if set(kinds) <= {"gemv"}:
        return ""
    names = {"gemv": ("GEMV layer", "GEMV layers"), "conv": ("conv net", "conv nets"),
             "encoder": ("encoder", "encoders")}
    return " (%s)" % ", ".join("%d %s" % (kinds.count(k), names[k][kinds.count(k) != 1])
                               for k in ("gemv", "conv", "encoder") if k in kinds)


def median(values):
    values = sorted(values)
    return values[len(values) // 2] if values else float("nan")


def per_model_lines(models, sizes, budget, popularity, args, rows):
    """The placement bound (placement_bound) against the rows, and per model
    what the policy row did. A model's CPU latencies are those the
    all-resident row measured with nothing else running (cpu_alone), so the
    bound holds for a CPU that nothing else slows down."""
    named = {row["row"]: row for row in rows}
    policy, mean, resident = named["policy"], named["policy mean"], named["all resident"]
    ok = {row["row"]: [r for r in row["per_request"] if r[3]] for row in rows}
    on_cpu = {m: sorted(resident["cpu_alone"].get(m) or [float("inf")]) for m in models}

    def slower_than(m, threshold):
        return sum(1 for x in on_cpu[m] if x > threshold) / len(on_cpu[m])

    candidates = [0.0] + [x for m in models for x in on_cpu[m]]
    phases = [popularity.shares(p) for p in range(max(1, int(math.ceil(args.seconds / popularity.shift))))]
    bound, must_stay = placement_bound(models, sizes, slower_than, candidates, budget, phases)
    # The rule with load and run: a request not resident may load its model
    # (its bytes over the link at the full rate, plus the fixed cost) and
    # run there, taking as long as a request of that model did with every
    # model resident.
    on_gpu = {m: sorted(r[2] * 1000 for r in ok[resident["row"]] if r[1] == m) or [float("inf")] for m in models}
    load_ms = {m: transfer_ms(sizes[m], args.bandwidth, args.transfer_latency) for m in models}

    def loaded_slower_than(m, threshold):
        return sum(1 for x in on_gpu[m] if x + load_ms[m] > threshold) / len(on_gpu[m])

    bound_lr, _ = placement_bound(models, sizes, with_load_and_run(slower_than, loaded_slower_than),
                                  candidates + [x + load_ms[m] for m in models for x in on_gpu[m]], budget, phases)
    target = 1.5 * resident["p99"]
    share_at_target, _ = slower_share(models, sizes, slower_than, budget, phases, target)
    lines = [
        "",
        "The lowest p99 any placement can reach that does not know the next request's model before it arrives "
        "(even one that knows every phase's ranking and moves in no time; bench/churn.py placement_bound, from "
        "each model's CPU latency measured alone): %.1f ms, %.2fx the all-resident p99 (the target, 1.5x, is "
        "%.1f ms); the policy row's p99 is %.2fx that bound (policy mean: %.2fx). At %.1f ms at least %.2f%% of the requests are "
        "slower; for %.1f ms %s must stay on cuda:0." % (
            bound, bound / resident["p99"], target, policy["p99"] / bound, mean["p99"] / bound, target,
            100 * share_at_target, bound,
            ", ".join(sorted(must_stay)) or "no model"),
    ]
    if PREVIOUS_RULE_ROW in named:
        lines[-1] += (" Under that rule (the row \"%s\", --load-and-run=false: never wait for a load while a copy "
                      "is ready) the policy's p99 is %.2fx that bound (target at most 1.10)." % (
                          PREVIOUS_RULE_ROW, named[PREVIOUS_RULE_ROW]["p99"] / bound))
    lines += [
        "",
        "The lowest p99 under the rule with load and run (a request whose model is not on cuda:0 may load it, "
        "its bytes at the link's full rate with nothing queued, and run there as fast as with every model "
        "resident; bench/placement_bound.py with_load_and_run): %.1f ms, %.2fx the all-resident p99; the policy "
        "row's p99 is %.2fx it (target at most 1.15)." % (bound_lr, bound_lr / resident["p99"],
                                                           policy["p99"] / bound_lr),
        "",
        "| model | MB | requests | cuda:0 median ms (all resident) | CPU median ms (alone) | policy: on cuda:0 "
        "| policy: CPU median ms | policy: slower than its p99 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for m in models:
        mine = [r for r in ok[policy["row"]] if r[1] == m]
        lines.append("| %s | %.0f | %d | %.1f | %.1f | %d%% | %.1f | %d |" % (
            m, sizes[m] / 1e6, len(mine), median([r[2] * 1000 for r in ok[resident["row"]] if r[1] == m]),
            median(on_cpu[m]), 100 * sum(1 for r in mine if r[4] == "cuda:0") / max(1, len(mine)),
            median([r[2] * 1000 for r in mine if r[4] == "cpu"]),
            sum(1 for r in mine if r[2] * 1000 > policy["p99"])))
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", required=True)
    ap.add_argument("--proto-dir", required=True)
    ap.add_argument("--models", required=True, help="made by tools/make_churn_models.py")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--rate", type=float, default=20, help="requests per second, open loop")
    ap.add_argument("--zipf", type=float, default=1.1)
    ap.add_argument("--shift", type=float, default=10, help="seconds between shifts of the popular set")
    ap.add_argument("--profile", help="a device profile (bench/device_profile.py; bench/profiles/, or measured by "
                    "tests/gpu/calibrate.py): sets --bandwidth, --transfer-latency and --cpu-slowdown")
    ap.add_argument("--cpu-slowdown", type=float, default=4)
    ap.add_argument("--compute-scale", type=float, default=2,
                    help="cuda:0 holds each run to this many times the least CPU time such a run has taken the host "
                    "thread (--simulate-devices compute_scale), so its time per model stays its own while it shares "
                    "the host's cores and memory; 0: the wall time a run takes")
    ap.add_argument("--bandwidth", default="12GB/s")
    ap.add_argument("--transfer-latency", default="2ms")
    ap.add_argument("--real-device", action="store_true",
                    help="serve on the machine's real cuda:0 (budget only; no simulated link or speeds); give "
                    "--profile as measured there so the bounds use its link and CPU")
    ap.add_argument("--settle", type=float, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--compare-displacing", action="store_true",
                    help="a row more: the policy with --load-and-run-displaces")
    ap.add_argument("--compare-host-copies", action="store_true",
                    help="a row more: the policy with every load reading its file (--host-copy-share=0)")
    ap.add_argument("--compare-change-detection", action="store_true",
                    help="a row more: the policy without change detection in demand (--demand-change-threshold=0)")
    ap.add_argument("--compare-staging", type=float, metavar="SHARE",
                    help="a row more: the policy with --staging-share=SHARE")
    ap.add_argument("--compare", action="append", default=[], metavar="NAME=FLAGS",
                    help="a row more: the server with these flags (space-separated) beside the policy's; repeatable")
    ap.add_argument("--out", help="markdown file for the table (printed too)")
    ap.add_argument("--csv", help="csv file for the rows")
    ap.add_argument("--requests-csv", help="csv file for every request of every row")
    ap.add_argument("--work", default="/tmp/churn_work")
    args = ap.parse_args()
    if args.profile:
        try:
            args.bandwidth, args.transfer_latency, args.cpu_slowdown = device_profile.simulate_args(
                device_profile.load(args.profile))
        except (OSError, ValueError) as e:
            ap.error("--profile: %s" % e)

    igtest.generate_stubs(args.proto_dir, os.path.join(args.work, "stubs"))
    specs = read_models(args.models)
    models = sorted(specs)
    sizes = {m: specs[m]["bytes"] for m in models}
    total = sum(sizes.values())
    if len(models) < 3:
        igtest.fail("need at least 3 models in %s" % args.models)
    budget = total // 3
    popularity = Popularity(models, args.zipf, args.shift, args.seed)
    schedule = arrivals(args.seconds, args.rate, popularity)
    rows = [
        ("policy", []),
        ("policy mean", ["--move-objective=mean"]),
        # The rule before load and run (never wait for a load while a copy is
        # ready), held to that rule's bound, the placement bound.
        (PREVIOUS_RULE_ROW, ["--load-and-run=false"]),
        ("evict-and-reload", ["--background-moves=false", "--host-copy-share=0"]),
        ("all resident", None),
    ]
    if args.compare_displacing:
        rows.insert(1, ("policy, displacing", ["--load-and-run-displaces"]))
    if args.compare_staging is not None:
        rows.insert(1, ("policy, staging %g" % args.compare_staging, ["--staging-share=%g" % args.compare_staging]))
    if args.compare_change_detection:
        rows.insert(1, ("policy, no change detection", ["--demand-change-threshold=0"]))
    if args.compare_host_copies:
        rows.insert(1, ("policy, no host copies", ["--host-copy-share=0"]))
    for spec in reversed(args.compare):
        name, sep, flags = spec.partition("=")
        if not sep or not name.strip():
            ap.error("--compare %r: NAME=FLAGS" % spec)
        rows.insert(1, (name.strip(), flags.split()))
    results = []
    for name, extra in rows:
        row_budget = budget if extra is not None else int(total * 1.5)
        # All resident: the move policy's budget the device's (a staging
        # share would leave it part, and it would demote the rest).
        flags = extra if extra is not None else ["--staging-share=0"]
        r = run_row(name, flags, args, models, specs, row_budget, schedule, args.work,
                    calibrate_cpu=extra is None, device="cuda:0" if extra is None else "")
        print("%-16s %s" % (name, {k: v for k, v in r.items() if k not in ("per_request", "cpu_alone")}), flush=True)
        results.append(r)

    lines = [
        "Churn: %d models%s of %.0f-%.0f MB (%.0f MB in all), %scuda:0 budget %.0f MB (a third; all resident: %.0f MB), "
        "link %s + %s per load, CPU %gx slower than cuda:0%s; open loop %.0f req/s for %.0f s, Zipf %.2f, popular set "
        "shifted every %.0f s; %d requests per row, the same arrivals in each." % (
            len(models), mix_text(specs), min(sizes.values()) / 1e6, max(sizes.values()) / 1e6, total / 1e6,
            "the machine's real " if args.real_device else "", budget / 1e6, total * 1.5 / 1e6,
            args.bandwidth, args.transfer_latency, args.cpu_slowdown,
            " (the profile's, for the bounds; cuda:0's peak is the cache's count of resident bytes, the server "
            "knowing no real device's memory peak)" if args.real_device else
            (", cuda:0 computing in %gx a run's host CPU time" % args.compute_scale) if args.compute_scale > 0 else "",
            args.rate, args.seconds, args.zipf, args.shift,
            len(schedule)),
        "",
        "| row | p50 ms | p99 ms | p99.9 ms | max ms | failed | waited for a load | on cuda:0 | MB moved/min "
        "| cuda:0 peak / budget MB | promoted | demoted | evicted | loads onto cuda:0, mean ms "
        "| loads from host copies | regret |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append("| %s | %.1f | %.1f | %.1f | %.1f | %d | %d | %.0f%% | %.0f | %.0f / %.0f | %d | %d | %d "
                     "| %d, %.1f | %d | %s |" % (
                         r["row"], r["p50"], r["p99"], r["p999"], r["max"], r["failures"], r["waited"],
                         100 * r["on_gpu"], r["moved_mb_per_min"],
                         (r["peak_resident"] if args.real_device else r["peak_memory"]) / 1e6, r["budget"] / 1e6,
                         r["promoted"], r["demoted"], r["evicted"], r["gpu_loads"], r["gpu_load_ms"],
                         r["loads_from_host_copy"],
                         "%d of %d (%.1f%%), %d unestimated" % (
                             r["regret"], estimated(r), 100.0 * r["regret"] / estimated(r), r["unestimated"])
                         if estimated(r) else "-"))
    named = {r["row"]: r for r in results}
    policy, mean, reload_, resident = (named[n] for n in ("policy", "policy mean", "evict-and-reload", "all resident"))
    lines += [
        "",
        "policy p99 / all-resident p99: %.2f (target <= 1.5); policy p99 / evict-and-reload p99: %.2f (target <= 0.5); "
        "bytes moved, policy / evict-and-reload: %.2f (target <= 1)" % (
            policy["p99"] / resident["p99"], policy["p99"] / reload_["p99"],
            policy["moved_mb_per_min"] / max(1e-9, reload_["moved_mb_per_min"])),
        "policy mean (--move-objective=mean): p99 / all-resident p99 %.2f, p50 / the policy's p50 %.2f" % (
            mean["p99"] / resident["p99"], mean["p50"] / policy["p50"]),
    ]
    if "policy, no host copies" in named:
        files = named["policy, no host copies"]
        lines.append("host copies of weights: a load onto cuda:0 took %.1f ms on average from host copies, %.1f ms "
                     "reading the file (%.2fx); the policy's p99 / its p99 with every load reading its file %.2f, "
                     "max %.2f, p50 %.2f" % (
                         policy["gpu_load_ms"], files["gpu_load_ms"],
                         policy["gpu_load_ms"] / max(1e-9, files["gpu_load_ms"]), policy["p99"] / files["p99"],
                         policy["max"] / files["max"], policy["p50"] / files["p50"]))
    for r in results:
        if r["failures"]:
            lines.append("%s: first failure: %s" % (r["row"], r["first_failure"]))
    lines += per_model_lines(models, sizes, budget, popularity, args, results)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        open(args.out, "w").write(text)
    if args.requests_csv:
        with open(args.requests_csv, "w", newline="") as f:
            # Quoted where a field holds a comma (a row's name, a reason).
            out = csv.writer(f, lineterminator="\n")
            out.writerow(["row", "sent_s", "model", "latency_ms", "ok", "device", "fallback_reason", "compute_us",
                          "queue_us", "ready_path", "ready_path_expected_ms", "server_total_us", "load_wait_us",
                          "ready_path_load_ms"])
            for r in results:
                for (sent, model, latency, ok, device, reason, compute_us, queue_us, path,
                     expected_us, total_us, load_wait_us, load_expected_us) in r["per_request"]:
                    out.writerow([r["row"], "%.4f" % sent, model, "%.3f" % (latency * 1000), "%d" % ok, device,
                                  reason, "%d" % compute_us, "%d" % queue_us, path, "%.3f" % (expected_us / 1000),
                                  "%d" % total_us, "%d" % load_wait_us, "%.3f" % (load_expected_us / 1000)])
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            # Quoted where a field holds a comma (a failure's message).
            keys = [k for k in results[0].keys() if k not in ("per_request", "cpu_alone")]
            out = csv.writer(f, lineterminator="\n")
            out.writerow(keys)
            for r in results:
                out.writerow([r[k] for k in keys])
    bad = [r["row"] for r in results if r["exit"] != 0]
    if bad:
        igtest.fail("server exited uncleanly in rows %s" % bad)


if __name__ == "__main__":
    main()
