#!/usr/bin/env python3
"""infergate beside the servers users pick instead, on the same model, the
same machine and the same load generator, in one run (bench/peers.sh sets
up the peers and calls this).

Models: make-demo-models' (TorchScript) demo mlp (256 -> 512 -> 512 ->
10) and cnn (3x64x64 images, two conv layers), and, so that no result
rests on one model's shape, its two bench models: small (128 -> 64 -> 5,
where serving work outweighs the arithmetic) and heavy (512 -> 1536 ->
1536 -> 512 with layer norm, where the arithmetic outweighs it). One row
per request, the same values to every server. Every server runs them on
Debian's LibTorch 2.6 (infergate's default build; the peers' Python torch
is Debian's python3-torch 2.6), one LibTorch thread per worker, as many
workers as the machine has cores, batching on with the same largest batch
(MODELS below) and about the same wait (infergate and LitServe the
model's own, TorchServe 1 ms, its smallest: maxBatchDelay is in whole
milliseconds).

Load: h2load for every row (the same tool for all). REST rows: N HTTP/1.1
connections, one request in flight on each (-c N -m 1), the body each
server's API takes (Open Inference JSON for infergate; {"x": [...]} for
TorchServe's /predictions and LitServe's /predict). gRPC rows (infergate's
Open Inference ModelInfer with the row as raw bytes; TorchServe's
Predictions with the same JSON body as its REST row; LitServe has no gRPC
API) replay one pre-encoded request on N streams of one connection. Rows run in one order and then the reverse (A B ... B A) per client count, so the
machine's drift falls on every server alike; each figure is the mean of
the two rounds (percentiles from both rounds' requests together). Every
server stays up throughout: an idle one's threads take some CPU from the
measured one on this 2-core machine, alike for all. LitServe's servers are
the exception: idle, each (its API process and its workers) keeps about a
quarter of a core busy polling, so with one per model they took some 95%
of a core from every row; each is stopped (SIGSTOP) while a row other than
its own runs, and continued (SIGCONT) before its own row's warm-up.
(Stopping TorchServe the same way was tried: it answered a third to two
thirds less after each resume, so it stays up; idle, its Java front end
and workers take about 3% of a core.)

CPU per request: the user and system time of the server's whole process
tree (TorchServe's Java front end and its Python workers; LitServe's API
server and workers) over the row, divided by the requests answered.

Summary: per model at the largest client count, infergate's requests per
second and p99 against TorchServe's over REST and over gRPC, and
infergate's REST CPU per request against its gRPC CPU per request.

  peers.py --build-dir build --out bench/results [--seconds 5] [--clients 1,8,64]
           [--models mlp,cnn,small,heavy]
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
    """A started server: its name, processes, and per model how a request
    reaches it ({model: (url, body file)}; gRPC: {model: (url, frame)}).
    `paused_when_idle`: {model: process} of servers stopped while a row
    other than their model's runs (LitServe's)."""

    def __init__(self, name, procs, rest, grpc=None, paused_when_idle=None):
        self.name, self.procs, self.rest, self.grpc = name, procs, rest, grpc or {}
        self.paused_when_idle = paused_when_idle or {}


def pause_idle(peers, active=None, model=None):
    """Stops every server that polls when idle, but `active`'s for `model`,
    which is continued; with no `active`, continues them all."""
    for peer in peers:
        for served, proc in peer.paused_when_idle.items():
            run = active is None or (peer is active and served == model)
            try:
                os.killpg(proc.pid, signal.SIGCONT if run else signal.SIGSTOP)
            except ProcessLookupError:
                pass


class Model:
    """A served model: its input's name, one row's shape, the floats one
    row's answer holds, the largest batch and the batching wait (seconds)
    its config.pbtxt sets (LitServe is given the same; TorchServe 1 ms)."""

    def __init__(self, input_name, shape, outputs, max_batch, wait_s):
        self.input_name, self.shape, self.outputs = input_name, shape, outputs
        self.max_batch, self.wait_s = max_batch, wait_s


# The same values go to every server: (i % 17) / 17 for element i.
MODELS = {"mlp": Model("x", [256], 10, 64, 0.0005), "cnn": Model("image", [3, 64, 64], 10, 32, 0.001),
          "small": Model("x", [128], 5, 64, 0.0005), "heavy": Model("x", [512], 512, 64, 0.0005)}


# Each model in the report's words, given its largest batch and wait (ms).
MODEL_WORDS = {"mlp": "the demo mlp (256-512-512-10; largest batch %d, wait %g ms)",
               "cnn": "the demo cnn (3x64x64 images, two conv layers; largest batch %d, wait %g ms)",
               "small": "small (128-64-5; largest batch %d, wait %g ms)",
               "heavy": "heavy (512-1536-1536-512, layer norm; largest batch %d, wait %g ms)"}


def row_values(shape):
    n = 1
    for d in shape:
        n *= d
    return [round((i % 17) / 17.0, 4) for i in range(n)]


def nested(values, shape):
    if len(shape) == 1:
        return values
    step = len(values) // shape[0]
    return [nested(values[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]


def peer_body(work, model):
    """The body TorchServe's handler and LitServe's API take: {"x": row}."""
    path = os.path.join(work, "peer-%s.json" % model)
    if not os.path.exists(path):
        shape = MODELS[model].shape
        with open(path, "w") as f:
            json.dump({"x": nested(row_values(shape), shape)}, f)
    return path


def start_infergate(args, work, models, served):
    log = open(os.path.join(work, "infergate.log"), "w")
    proc = subprocess.Popen([os.path.join(args.build_dir, "service", "infergate"), "--address=127.0.0.1:0",
                             "--http-address=127.0.0.1:0", "--metrics-address=", "--model-repository=" + models],
                            stdout=subprocess.PIPE, stderr=log, text=True, start_new_session=True)
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
    rest, grpc = {}, {}
    for model in served + (["mlp_pt2"] if "mlp" in served else []):
        spec = MODELS[model.replace("_pt2", "")]
        frame = os.path.join(work, "%s.frame" % model)
        out = subprocess.run([os.path.join(args.build_dir, "tools", "infergate-cli"), "--address", grpc_address,
                              "frame", "--rpc", "v2", "--model", model, "--rows", "1", "--out", frame],
                             capture_output=True, text=True, check=True).stdout
        grpc[model] = ("http://%s%s" % (grpc_address, re.search(r"path=(\S+)", out).group(1)), frame)
        body = os.path.join(work, "infergate-%s.json" % model)
        with open(body, "w") as f:
            json.dump({"inputs": [{"name": spec.input_name, "shape": [1] + spec.shape, "datatype": "FP32",
                                   "data": row_values(spec.shape)}]}, f)
        url = "http://%s/v2/models/%s/infer" % (http_address, model)
        assert len(post_json(url, open(body, "rb").read())["outputs"][0]["data"]) == spec.outputs
        rest[model] = (url, body)
    return Peer("infergate", [proc], rest, grpc)


def start_torchserve(args, work, models, served):
    store = os.path.join(work, "ts-store")
    os.makedirs(store)
    for model in served:
        subprocess.run([os.path.join(args.venv, "bin", "torch-model-archiver"), "--model-name", model,
                        "--version", "1.0", "--serialized-file", os.path.join(models, model, "1", "model.pt"),
                        "--handler", os.path.join(HERE, "peers", "torchserve_handler.py"), "--export-path", store],
                       check=True)
    ports = [free_port() for _ in range(5)]
    config = os.path.join(work, "ts-config.properties")
    model = {m: {"1.0": {"defaultVersion": True, "marName": "%s.mar" % m, "minWorkers": args.workers,
                         "maxWorkers": args.workers, "batchSize": batch, "maxBatchDelay": 1,
                         "responseTimeout": 120}} for m, batch in ((m, MODELS[m].max_batch) for m in served)}
    with open(config, "w") as f:
        f.write("inference_address=http://127.0.0.1:%d\nmanagement_address=http://127.0.0.1:%d\n"
                "metrics_address=http://127.0.0.1:%d\ngrpc_inference_port=%d\ngrpc_management_port=%d\n"
                "grpc_inference_address=127.0.0.1\ngrpc_management_address=127.0.0.1\n"
                "default_workers_per_model=%d\ninstall_py_dep_per_model=false\ndisable_token_authorization=true\n"
                "enable_model_api=false\nload_models=%s\nmodels=%s\n"
                % (ports[0], ports[1], ports[2], ports[3], ports[4], args.workers,
                   ",".join("%s.mar" % m for m in served), json.dumps(model)))
    log = open(os.path.join(work, "torchserve.log"), "w")
    env = dict(os.environ, PATH=os.path.join(args.venv, "bin") + ":" + os.environ["PATH"],
               LOG_LOCATION=os.path.join(work, "ts-logs"), METRICS_LOCATION=os.path.join(work, "ts-logs"))
    proc = subprocess.Popen([os.path.join(args.venv, "bin", "torchserve"), "--start", "--foreground", "--ncs",
                             "--disable-token-auth", "--model-store", store, "--ts-config", config],
                            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=work, start_new_session=True)
    rest = {}
    for model in served:
        management = "http://127.0.0.1:%d/models/%s" % (ports[1], model)
        ready = wait_http(management, 180, lambda body: sum(w.get("status") == "READY" for m in json.loads(body)
                                                            for w in m.get("workers", [])) >= args.workers)
        if not ready:
            print(open(log.name).read()[-4000:])
            sys.exit("TorchServe did not start %d workers for %s" % (args.workers, model))
        url = "http://127.0.0.1:%d/predictions/%s" % (ports[0], model)
        body = peer_body(work, model)
        assert len(post_json(url, open(body, "rb").read())["logits"]) == MODELS[model].outputs
        rest[model] = (url, body)
    # Its gRPC API: a PredictionsRequest (model_name, input {"data": body})
    # framed once, checked to be answered, then replayed by h2load as
    # infergate's frames are.
    grpc = {}
    for model in served:
        frame = os.path.join(work, "torchserve-%s.frame" % model)
        message = torchserve_predictions_request(model, open(peer_body(work, model), "rb").read())
        with open(frame, "wb") as f:
            f.write(b"\0" + len(message).to_bytes(4, "big") + message)
        path = "/org.pytorch.serve.grpc.inference.InferenceAPIsService/Predictions"
        answer = grpc_unary("127.0.0.1:%d" % ports[3], path, message)
        assert b"logits" in answer, answer[:200]
        grpc[model] = ("http://127.0.0.1:%d%s" % (ports[3], path), frame)
    return Peer("TorchServe 0.12", [proc], rest, grpc)


def protobuf_field(number, payload):
    """A length-delimited protobuf field (wire type 2)."""
    def varint(n):
        out = b""
        while True:
            byte, n = n & 0x7F, n >> 7
            out += bytes([byte | (0x80 if n else 0)])
            if not n:
                return out
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def torchserve_predictions_request(model, body):
    """TorchServe's inference.proto PredictionsRequest: model_name (1) and
    the map input (3) with one entry, "data" -> body."""
    entry = protobuf_field(1, b"data") + protobuf_field(2, body)
    return protobuf_field(1, model.encode()) + protobuf_field(3, entry)


def grpc_unary(address, path, message):
    """One unary call with `message`'s bytes; the answer's bytes."""
    import grpc
    with grpc.insecure_channel(address) as channel:
        call = channel.unary_unary(path, request_serializer=None, response_deserializer=None)
        return call(message, timeout=60)


def start_litserve(args, work, models, served):
    """One LitServe server per model (LitServe serves one API per path; two
    servers keep each model's batching its own), each with its workers."""
    procs, rest, by_model = [], {}, {}
    for model in served:
        spec = MODELS[model]
        port = free_port()
        log = open(os.path.join(work, "litserve-%s.log" % model), "w")
        procs.append(subprocess.Popen([os.path.join(args.venv, "bin", "python3"),
                                       os.path.join(HERE, "peers", "litserve_server.py"),
                                       os.path.join(models, model, "1", "model.pt"), str(port), str(args.workers),
                                       str(spec.max_batch), str(spec.wait_s)],
                                      stdout=log, stderr=subprocess.STDOUT, cwd=work, start_new_session=True))
        if not wait_http("http://127.0.0.1:%d/health" % port, 180):
            print(open(log.name).read()[-4000:])
            sys.exit("LitServe did not become healthy for %s" % model)
        url = "http://127.0.0.1:%d/predict" % port
        body = peer_body(work, model)
        assert len(post_json(url, open(body, "rb").read())["logits"]) == spec.outputs
        rest[model] = (url, body)
        by_model[model] = procs[-1]
    return Peer("LitServe 0.2", procs, rest, paused_when_idle=by_model)


def h2load(peer, model, clients, seconds, log, grpc):
    if os.path.exists(log):
        os.remove(log)  # h2load appends to its log
    if grpc:
        url, frame = peer.grpc[model]
        cmd = ["h2load", "-c", "1", "-m", str(clients), "-d", frame, "-H", "content-type: application/grpc",
               "-H", "te: trailers", url]
    else:
        url, frame = peer.rest[model]
        cmd = ["h2load", "--h1", "-c", str(clients), "-m", "1", "-d", frame, "-H", "Content-Type: application/json",
               url]
    cpu0 = sum(tree_cpu_seconds(p.pid) for p in peer.procs)
    out = subprocess.run(cmd[:1] + ["-D", "%dms" % (seconds * 1000), "--warm-up-time=1000ms",
                                    "--log-file=" + log] + cmd[1:], capture_output=True, text=True).stdout
    cpu = sum(tree_cpu_seconds(p.pid) for p in peer.procs) - cpu0
    # Errors: the requests h2load closed without a 2xx or 3xx answer (its
    # "failed" count, warm-up excluded, which takes in the errored and timed
    # out ones). Not from the status codes: h2load counts those when the
    # headers arrive, so an answer that straddles the warm-up's end is in
    # one count and not the other.
    failed = re.search(r"\d+ succeeded, (\d+) failed, \d+ errored, \d+ timeout", out)
    errors = int(failed[1]) if failed else -1
    rps = float((re.search(r"finished in [^,]*, ([0-9.]+) req/s", out) or [0, 0])[1])
    times = []
    with open(log) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3 and parts[1].startswith("2"):
                times.append(int(parts[2]) / 1000.0)  # ms
    # The warm-up's requests are in the log too; the CPU window covers them.
    return {"rps": rps, "errors": errors, "times": times, "cpu_s": cpu, "answered": len(times)}


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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", default="build")
    ap.add_argument("--venv", required=True)
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--seconds", type=int, default=int(os.environ.get("BENCH_SECONDS", "5")))
    ap.add_argument("--clients", default="1,8,64")
    ap.add_argument("--workers", type=int, default=os.cpu_count())
    ap.add_argument("--models", default=",".join(MODELS))
    args = ap.parse_args()
    args.build_dir, args.venv, args.out = (os.path.abspath(p) for p in (args.build_dir, args.venv, args.out))
    clients = [int(c) for c in args.clients.split(",")]
    served = args.models.split(",")
    unknown = [m for m in served if m not in MODELS]
    if unknown:
        sys.exit("peers.py: no such model: %s (known: %s)" % (", ".join(unknown), ", ".join(MODELS)))

    work = tempfile.mkdtemp(prefix="ig_peers_")
    models = os.path.join(work, "models")
    subprocess.run([os.path.join(args.build_dir, "tools", "make-demo-models"), models, "--with-bench-models"],
                   check=True, stdout=subprocess.DEVNULL)
    # The same two models as AOTInductor packages, for infergate's .pt2 row.
    subprocess.run([os.path.join(HERE, "pt2_demo_models.sh"), models], check=True)
    peers = []
    try:
        peers.append(start_infergate(args, work, models, served))
        peers.append(start_torchserve(args, work, models, served))
        peers.append(start_litserve(args, work, models, served))
        versions = subprocess.run([os.path.join(args.venv, "bin", "python3"), "-c",
                                   "import importlib.metadata as m, torch; print('torchserve', m.version('torchserve'), "
                                   "'litserve', m.version('litserve'), 'torch', torch.__version__)"],
                                  capture_output=True, text=True).stdout.strip()
        java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0]
        pause_idle(peers, peers[0])  # every LitServe server stopped while perf_analyzer measures infergate
        pa_report, pa_rows = perf_analyzer_report(args, peers[0].grpc["mlp"][0].split("/")[2],
                                                  peers[0].rest["mlp"][0].split("/")[2], work) \
            if "mlp" in served else ("", [])
        # (server, model, gRPC?): the peers' REST rows, then infergate's gRPC
        # row and, for the mlp, its .pt2 package over REST.
        rows = {m: [(p, m, False) for p in peers] + [(p, m, True) for p in peers[:2]] for m in served}
        if "mlp" in rows:
            rows["mlp"].append((peers[0], "mlp_pt2", False))
        results = {}
        for model in served:
            for c in clients:
                order = rows[model] + rows[model][::-1]  # A B ... B A
                for peer, name, grpc in order:
                    pause_idle(peers, peer, name)
                    # Only LitServe's servers are paused (pause_idle): stopped
                    # with SIGSTOP between its rows, TorchServe answered a
                    # third to two thirds less after each resume.
                    r = h2load(peer, name, c, args.seconds, os.path.join(work, "h2load.log"), grpc)
                    print("%-16s %-8s %-5s c=%-3d %8.1f req/s  errors %d" % (
                        peer.name, name, "gRPC" if grpc else "REST", c, r["rps"], r["errors"]), flush=True)
                    results.setdefault((peer.name, name, grpc, c), []).append(r)
    finally:
        pause_idle(peers)  # a stopped process would not act on SIGTERM
        for p in peers:
            for proc in p.procs:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for p in peers:
            for proc in p.procs:
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)

    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=HERE).stdout.strip()
    lines = ["# Peers: infergate beside TorchServe and LitServe, %s" % stamp, "",
             "Commit %s, this machine (%d cores), bench/peers.sh. %s; %s. Models (make-demo-models, TorchScript): "
             "%s; one row per request, batching on in every server (the largest batch and the wait as given, the "
             "wait in infergate and LitServe; TorchServe 1 ms, whose maxBatchDelay is in whole ms), %d workers of one LibTorch thread each, every server on Debian's LibTorch 2.6%s. Load: h2load, %d s per row after 1 s of warm-up, rows in one order then the reverse (A B ... B A) "
             "per client count, every server up throughout but LitServe's, each stopped while rows other than its own run (idle, each polled on a quarter of a core); each figure the mean of two rounds. REST: N HTTP/1.1 connections, one request each "
             "in flight; gRPC (infergate's Open Inference ModelInfer, raw tensor bytes; TorchServe's Predictions, the "
             "JSON body of its REST row): N streams on one connection. CPU ms per "
             "request: the server's process tree over the row (warm-up included) per request answered. Ratio: "
             "req/s against infergate's REST row at the same client count."
             % (commit, os.cpu_count(), versions, java, "; ".join(MODEL_WORDS[m] % (MODELS[m].max_batch,
                                                                                    MODELS[m].wait_s * 1000)
                                                                 for m in served),
                args.workers, "; infergate also serves the mlp as an AOTInductor package (mlp_pt2)"
                if "mlp" in served else "", args.seconds), "",
             "| server | model | protocol | clients | req/s | ratio to infergate REST | p50 ms | p99 ms | p99.9 ms | CPU ms/req | errors |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    stats = {}
    for key, rounds in results.items():
        stats[key] = {"rps": sum(r["rps"] for r in rounds) / len(rounds),
                      "times": [t for r in rounds for t in r["times"]],
                      "cpu": sum(r["cpu_s"] for r in rounds) / max(1, sum(r["answered"] for r in rounds)) * 1000,
                      "errors": sum(r["errors"] for r in rounds)}
        stats[key]["p99"] = pct(stats[key]["times"], 0.99)
    for model in served:
        for c in clients:
            base = stats[("infergate", model, False, c)]["rps"]
            for peer, name, grpc in rows[model]:
                row = stats[(peer.name, name, grpc, c)]
                protocol = ("%s (Open Inference)" if peer.name == "infergate" else "%s") % ("gRPC" if grpc else "REST")
                lines.append("| %s | %s | %s | %d | %.0f | %.2f | %.2f | %.2f | %.2f | %.3f | %d |" % (
                    peer.name, name + (" (.pt2)" if name.endswith("_pt2") else ""), protocol, c, row["rps"],
                    row["rps"] / base if base else float("nan"), pct(row["times"], 0.5), row["p99"],
                    pct(row["times"], 0.999), row["cpu"], row["errors"]))
    # The summary: infergate against TorchServe, protocol by protocol, at
    # the largest client count.
    c = max(clients)
    ts = next(p.name for p in peers if p.name.startswith("TorchServe"))
    lines += ["", "## infergate against TorchServe at %d clients" % c, "",
              "Requests per second and p99 as ratios (infergate's over TorchServe's), each protocol against the same "
              "protocol; the last column: infergate's CPU per request over REST divided by its CPU per request over "
              "gRPC.", "",
              "| model | REST req/s ratio | REST p99 ratio | gRPC req/s ratio | gRPC p99 ratio | infergate CPU/req REST "
              "/ gRPC |", "|---|---|---|---|---|---|"]
    for model in served:
        ig = {grpc: stats[("infergate", model, grpc, c)] for grpc in (False, True)}
        peer = {grpc: stats[(ts, model, grpc, c)] for grpc in (False, True)}
        ratio = lambda a, b: a / b if b else float("nan")  # noqa: E731
        lines.append("| %s | %.1fx | %.2f | %.1fx | %.2f | %.2f |" % (
            model, ratio(ig[False]["rps"], peer[False]["rps"]), ratio(ig[False]["p99"], peer[False]["p99"]),
            ratio(ig[True]["rps"], peer[True]["rps"]), ratio(ig[True]["p99"], peer[True]["p99"]),
            ratio(ig[False]["cpu"], ig[True]["cpu"])))
    if pa_rows:
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
    if pa_report:
        with open(os.path.join(args.out, "perf_analyzer-%s.txt" % stamp), "w") as f:
            f.write(pa_report)
    path = os.path.join(args.out, "peers-%s.md" % stamp)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    print("written: " + path)


if __name__ == "__main__":
    main()
