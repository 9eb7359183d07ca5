#!/usr/bin/env python3
"""infergate beside the servers users pick instead, on the same model, the
same machine and the same load generator, in one run (bench/peers.sh sets
up the peers and calls this).

Model: make-demo-models' mlp (TorchScript, 256 -> 512 -> 512 -> 10), one
row per request, the same 256 floats to every server. Every server runs it
on Debian's LibTorch 2.6 (infergate's default build; the peers' Python
torch is Debian's python3-torch 2.6), one LibTorch thread per worker, as
many workers as the machine has cores, batching on with the same largest
batch (64) and about the same wait (infergate 0.5 ms, LitServe 0.5 ms,
TorchServe 1 ms, its smallest: maxBatchDelay is in whole milliseconds).

Load: h2load for every row (the same tool for all). REST rows: N HTTP/1.1
connections, one request in flight on each (-c N -m 1), the body each
server's API takes (Open Inference JSON for infergate; {"x": [...]} for
TorchServe's /predictions and LitServe's /predict). The gRPC row (infergate
only: Open Inference ModelInfer, one pre-encoded request) uses N streams of
one connection. Rows are interleaved A B C C B A per client count, so the
machine's drift falls on every server alike; each figure is the mean of
the two rounds (percentiles from both rounds' requests together).

CPU per request: the user and system time of the server's whole process
tree (TorchServe's Java front end and its Python workers; LitServe's API
server and workers) over the row, divided by the requests answered.

  peers.py --build-dir build --out bench/results [--seconds 5] [--clients 1,8,64]
"""
import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
TICKS = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tree_cpu_seconds(root_pid):
    """User + system CPU seconds of root_pid and every live descendant."""
    parent, cpu = {}, {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent[int(name)] = int(fields[1])
        cpu[int(name)] = (int(fields[11]) + int(fields[12])) / TICKS
    total, frontier = 0.0, {root_pid}
    while frontier:
        total += sum(cpu.get(p, 0.0) for p in frontier)
        frontier = {p for p, pp in parent.items() if pp in frontier}
    return total


def wait_http(url, timeout, ok=lambda body: True):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                body = r.read()
                if r.status == 200 and ok(body):
                    return True
        except Exception:
            pass
        time.sleep(0.5)
    return False


def post_json(url, body):
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


class Peer:
    """A started server: its name, process, and how a request reaches it."""

    def __init__(self, name, proc, url, body_file, grpc=None):
        self.name, self.proc, self.url, self.body_file, self.grpc = name, proc, url, body_file, grpc


def start_infergate(args, work, models):
    log = open(os.path.join(work, "infergate.log"), "w")
    proc = subprocess.Popen([os.path.join(args.build_dir, "service", "infergate"), "--address=127.0.0.1:0",
                             "--http-address=127.0.0.1:0", "--metrics-address=", "--model-repository=" + models],
                            stdout=subprocess.PIPE, stderr=log, text=True)
    grpc_address = http_address = None
    while grpc_address is None or http_address is None:
        line = proc.stdout.readline()
        if not line:
            sys.exit("infergate exited before it listened (log: %s)" % log.name)
        m = re.match(r"infergate listening on (\S+)", line)
        grpc_address = m.group(1) if m else grpc_address
        m = re.match(r"infergate http on (\S+)", line)
        http_address = m.group(1) if m else http_address
    if not wait_http("http://%s/v2/health/ready" % http_address, 120):
        sys.exit("infergate did not become ready")
    frame = os.path.join(work, "v2.frame")
    out = subprocess.run([os.path.join(args.build_dir, "tools", "infergate-cli"), "--address", grpc_address, "frame",
                          "--rpc", "v2", "--model", "mlp", "--rows", "1", "--out", frame],
                         capture_output=True, text=True, check=True).stdout
    path = re.search(r"path=(\S+)", out).group(1)
    body = os.path.join(work, "infergate.json")
    with open(body, "w") as f:
        json.dump({"inputs": [{"name": "x", "shape": [1, 256], "datatype": "FP32", "data": ROW}]}, f)
    url = "http://%s/v2/models/mlp/infer" % http_address
    assert len(post_json(url, open(body, "rb").read())["outputs"][0]["data"]) == 10
    return Peer("infergate", proc, url, body, grpc=("http://%s%s" % (grpc_address, path), frame))


def start_torchserve(args, work, models):
    store = os.path.join(work, "ts-store")
    os.makedirs(store)
    subprocess.run([os.path.join(args.venv, "bin", "torch-model-archiver"), "--model-name", "mlp", "--version", "1.0",
                    "--serialized-file", os.path.join(models, "mlp", "1", "model.pt"),
                    "--handler", os.path.join(HERE, "peers", "torchserve_mlp_handler.py"), "--export-path", store],
                   check=True)
    ports = [free_port() for _ in range(5)]
    config = os.path.join(work, "ts-config.properties")
    model = {"mlp": {"1.0": {"defaultVersion": True, "marName": "mlp.mar", "minWorkers": args.workers,
                             "maxWorkers": args.workers, "batchSize": 64, "maxBatchDelay": 1,
                             "responseTimeout": 120}}}
    with open(config, "w") as f:
        f.write("inference_address=http://127.0.0.1:%d\nmanagement_address=http://127.0.0.1:%d\n"
                "metrics_address=http://127.0.0.1:%d\ngrpc_inference_port=%d\ngrpc_management_port=%d\n"
                "grpc_inference_address=127.0.0.1\ngrpc_management_address=127.0.0.1\n"
                "default_workers_per_model=%d\ninstall_py_dep_per_model=false\ndisable_token_authorization=true\n"
                "enable_model_api=false\nload_models=mlp.mar\nmodels=%s\n"
                % (ports[0], ports[1], ports[2], ports[3], ports[4], args.workers, json.dumps(model)))
    log = open(os.path.join(work, "torchserve.log"), "w")
    env = dict(os.environ, PATH=os.path.join(args.venv, "bin") + ":" + os.environ["PATH"],
               LOG_LOCATION=os.path.join(work, "ts-logs"), METRICS_LOCATION=os.path.join(work, "ts-logs"))
    proc = subprocess.Popen([os.path.join(args.venv, "bin", "torchserve"), "--start", "--foreground", "--ncs",
                             "--disable-token-auth", "--model-store", store, "--ts-config", config],
                            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=work, start_new_session=True)
    management = "http://127.0.0.1:%d/models/mlp" % ports[1]
    ready = wait_http(management, 180, lambda body: sum(w.get("status") == "READY" for m in json.loads(body)
                                                        for w in m.get("workers", [])) >= args.workers)
    if not ready:
        print(open(log.name).read()[-4000:])
        sys.exit("TorchServe did not start %d workers for mlp" % args.workers)
    body = os.path.join(work, "peer.json")
    url = "http://127.0.0.1:%d/predictions/mlp" % ports[0]
    assert len(post_json(url, open(body, "rb").read())["logits"]) == 10
    return Peer("TorchServe 0.12", proc, url, body)


def start_litserve(args, work, models):
    port = free_port()
    log = open(os.path.join(work, "litserve.log"), "w")
    proc = subprocess.Popen([os.path.join(args.venv, "bin", "python3"), os.path.join(HERE, "peers", "litserve_mlp.py"),
                             os.path.join(models, "mlp", "1", "model.pt"), str(port), str(args.workers), "64", "0.0005"],
                            stdout=log, stderr=subprocess.STDOUT, cwd=work, start_new_session=True)
    if not wait_http("http://127.0.0.1:%d/health" % port, 180):
        print(open(log.name).read()[-4000:])
        sys.exit("LitServe did not become healthy")
    body = os.path.join(work, "peer.json")
    url = "http://127.0.0.1:%d/predict" % port
    assert len(post_json(url, open(body, "rb").read())["logits"]) == 10
    return Peer("LitServe 0.2", proc, url, body)


def h2load(peer, clients, seconds, log, grpc):
    if os.path.exists(log):
        os.remove(log)  # h2load appends to its log
    if grpc:
        url, frame = peer.grpc
        cmd = ["h2load", "-c", "1", "-m", str(clients), "-d", frame, "-H", "content-type: application/grpc",
               "-H", "te: trailers", url]
    else:
        url, frame = peer.url, peer.body_file
        cmd = ["h2load", "--h1", "-c", str(clients), "-m", "1", "-d", frame, "-H", "Content-Type: application/json",
               url]
    cpu0 = tree_cpu_seconds(peer.proc.pid)
    out = subprocess.run(cmd[:1] + ["-D", "%dms" % (seconds * 1000), "--warm-up-time=1000ms",
                                    "--log-file=" + log] + cmd[1:], capture_output=True, text=True).stdout
    cpu = tree_cpu_seconds(peer.proc.pid) - cpu0
    ok = int((re.search(r"status codes: (\d+) 2xx", out) or [0, 0])[1])
    total = int((re.search(r"requests: (\d+) total", out) or [0, 0])[1])
    rps = float((re.search(r"finished in [^,]*, ([0-9.]+) req/s", out) or [0, 0])[1])
    times = []
    with open(log) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3 and parts[1].startswith("2"):
                times.append(int(parts[2]) / 1000.0)  # ms
    # The warm-up's requests are in the log too; the CPU window covers them.
    return {"rps": rps, "ok": ok, "errors": total - ok, "times": times, "cpu_s": cpu, "answered": len(times)}


def perf_analyzer_report(args, grpc_address, http_address, work):
    """Triton's perf_analyzer against infergate's Open Inference endpoints
    (gRPC and HTTP, shared memory off): concurrency 1, 8 and 64, then a
    request-rate sweep. Returns its own output (the report) and table rows."""
    pa = os.path.join(args.venv, "bin", "perf_analyzer")
    cudart = [os.path.join(root, "") for root, _, files in os.walk(args.venv) if "libcudart.so.12" in files]
    env = dict(os.environ, LD_LIBRARY_PATH=":".join(cudart))
    report, rows = [], []
    for protocol, url in (("grpc", grpc_address), ("http", http_address)):
        for mode, values in (("concurrency", [1, 8, 64]), ("request-rate", [250, 500, 1000])):
            for v in values:
                csv_file = os.path.join(work, "pa.csv")
                cmd = [pa, "-m", "mlp", "-u", url, "-i", protocol, "--service-kind=triton", "--shared-memory=none",
                       "-p", str(args.seconds * 1000), "-s", "20", "-r", "6", "-f", csv_file,
                       "--concurrency-range" if mode == "concurrency" else "--request-rate-range", "%d:%d" % (v, v)]
                run = subprocess.run(cmd, capture_output=True, text=True, env=env)
                report.append("$ %s\n%s%s" % (" ".join(["perf_analyzer"] + cmd[1:]), run.stdout, run.stderr))
                if run.returncode != 0 or not os.path.exists(csv_file):
                    rows.append((protocol, mode, v, None))
                    continue
                with open(csv_file) as f:
                    header, values_line = f.read().splitlines()[:2]
                rows.append((protocol, mode, v, dict(zip(header.split(","), values_line.split(",")))))
                os.remove(csv_file)
    return "\n".join(report), rows


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * (len(values) - 1) + 0.5))] if values else float("nan")


ROW = [round((i % 17) / 17.0, 4) for i in range(256)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", default="build")
    ap.add_argument("--venv", required=True)
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--seconds", type=int, default=int(os.environ.get("BENCH_SECONDS", "5")))
    ap.add_argument("--clients", default="1,8,64")
    ap.add_argument("--workers", type=int, default=os.cpu_count())
    args = ap.parse_args()
    clients = [int(c) for c in args.clients.split(",")]

    work = tempfile.mkdtemp(prefix="ig_peers_")
    models = os.path.join(work, "models")
    subprocess.run([os.path.join(args.build_dir, "tools", "make-demo-models"), models], check=True,
                   stdout=subprocess.DEVNULL)
    with open(os.path.join(work, "peer.json"), "w") as f:
        json.dump({"x": ROW}, f)
    peers = []
    try:
        peers.append(start_infergate(args, work, models))
        peers.append(start_torchserve(args, work, models))
        peers.append(start_litserve(args, work, models))
        versions = subprocess.run([os.path.join(args.venv, "bin", "python3"), "-c",
                                   "import importlib.metadata as m, torch; print('torchserve', m.version('torchserve'), "
                                   "'litserve', m.version('litserve'), 'torch', torch.__version__)"],
                                  capture_output=True, text=True).stdout.strip()
        java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0]
        pa_report, pa_rows = perf_analyzer_report(args, peers[0].grpc[0].split("/")[2],
                                                  peers[0].url.split("/")[2], work)
        rows = [(p, False) for p in peers] + [(peers[0], True)]
        results = {}
        for c in clients:
            order = rows + rows[::-1]  # A B C D D C B A
            for peer, grpc in order:
                key = (peer.name, grpc, c)
                r = h2load(peer, c, args.seconds, os.path.join(work, "h2load.log"), grpc)
                print("%-16s %-5s c=%-3d %8.1f req/s  errors %d" % (peer.name, "gRPC" if grpc else "REST", c, r["rps"],
                                                                    r["errors"]), flush=True)
                results.setdefault(key, []).append(r)
    finally:
        for p in peers:
            try:
                os.killpg(p.proc.pid, signal.SIGTERM) if p.name != "infergate" else p.proc.terminate()
            except ProcessLookupError:
                pass
        for p in peers:
            try:
                p.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.proc.pid, signal.SIGKILL)

    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=HERE).stdout.strip()
    lines = ["# Peers: infergate beside TorchServe and LitServe, %s" % stamp, "",
             "Commit %s, this machine (%d cores), bench/peers.sh. %s; %s. Model: the demo mlp (TorchScript, "
             "256-512-512-10), one row per request, batching on in every server (largest batch 64; wait 0.5 ms "
             "infergate and LitServe, 1 ms TorchServe), %d workers of one LibTorch thread each, every server on "
             "Debian's LibTorch 2.6. Load: h2load, %d s per row after 1 s of warm-up, rows interleaved A B C D D C B A "
             "per client count; each figure the mean of two rounds. REST: N HTTP/1.1 connections, one request each "
             "in flight; gRPC (infergate's Open Inference ModelInfer): N streams on one connection. CPU ms per "
             "request: the server's process tree over the row (warm-up included) per request answered. Ratio: "
             "req/s against infergate's REST row at the same client count."
             % (commit, os.cpu_count(), versions, java, args.workers, args.seconds), "",
             "| server | protocol | clients | req/s | ratio to infergate REST | p50 ms | p99 ms | p99.9 ms | CPU ms/req | errors |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for c in clients:
        base = None
        for peer, grpc in rows:
            rounds = results[(peer.name, grpc, c)]
            rps = sum(r["rps"] for r in rounds) / len(rounds)
            times = [t for r in rounds for t in r["times"]]
            cpu = sum(r["cpu_s"] for r in rounds) / max(1, sum(r["answered"] for r in rounds)) * 1000
            errors = sum(r["errors"] for r in rounds)
            if peer.name == "infergate" and not grpc:
                base = rps
            lines.append("| %s | %s | %d | %.0f | %s | %.2f | %.2f | %.2f | %.3f | %d |" % (
                peer.name, "gRPC (Open Inference)" if grpc else ("REST (Open Inference)" if peer.name == "infergate"
                                                                 else "REST"),
                c, rps, "%.2f" % (rps / base) if base else "-", pct(times, 0.5), pct(times, 0.99), pct(times, 0.999),
                cpu, errors))
    lines += ["", "## Triton's perf_analyzer against infergate", "",
              "perf_analyzer %s (the binary in NVIDIA's tritonclient 2.41.0 wheel; later wheels carry none, and PyPI's "
              "perf-analyzer package is a placeholder), --service-kind=triton, shared memory off, the mlp with one row "
              "per request (its random input), %d ms windows until stable within 20%%. Its own report: "
              "perf_analyzer-%s.txt beside this file." % ("2.41.0", args.seconds * 1000, stamp), "",
              "| protocol | load | inferences/s | p50 ms | p90 ms | p99 ms |", "|---|---|---|---|---|---|"]
    for protocol, mode, v, row in pa_rows:
        load = ("concurrency %d" if mode == "concurrency" else "%d req/s offered") % v
        if row is None:
            lines.append("| %s | %s | failed (see the report) | | | |" % (protocol, load))
            continue
        us = lambda k: float(row.get(k, "nan")) / 1000.0  # noqa: E731  microseconds in its csv
        lines.append("| %s | %s | %.0f | %.2f | %.2f | %.2f |" % (protocol, load, float(row["Inferences/Second"]),
                                                                   us("p50 latency"), us("p90 latency"),
                                                                   us("p99 latency")))
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "perf_analyzer-%s.txt" % stamp), "w") as f:
        f.write(pa_report)
    path = os.path.join(args.out, "peers-%s.md" % stamp)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    print("written: " + path)


if __name__ == "__main__":
    main()
