#!/usr/bin/env python3
"""Metrics checked the way an operator would: a scrape passes
`promtool check metrics`; a real Prometheus server on loopback scrapes a
running infergate and its query API returns exactly the counts of what the
test sent, per model and device; fallbacks and queue-full rejections show in
their counters; the shipped rules pass promtool; every metric the dashboard
queries exists in a real scrape (or is a shipped recording rule)."""
import array
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from igtest import Server, make_demo_models, fail, free_port, generate_stubs, required_arguments  # noqa: E402


def scrape(address):
    with urllib.request.urlopen("http://%s/metrics" % address, timeout=10) as r:
        return r.read().decode()


def query(prom, expr):
    url = "http://%s/api/v1/query?%s" % (prom, urllib.parse.urlencode({"query": expr}))
    with urllib.request.urlopen(url, timeout=10) as r:
        body = json.load(r)
    if body.get("status") != "success":
        fail("query %s: %s" % (expr, body))
    return body["data"]["result"]


def wait_value(prom, expr, want, timeout=60):
    deadline = time.time() + timeout
    got = None
    while time.time() < deadline:
        result = query(prom, expr)
        got = float(result[0]["value"][1]) if result else None
        if got == want:
            return
        time.sleep(0.5)
    fail("Prometheus says %s = %s, expected %s" % (expr, got, want))


def start_prometheus(work, target, attempts=3, timeout=120):
    """A Prometheus server scraping `target` every second, once it says it
    is ready: (process, address). Its port is chosen free, then bound by
    Prometheus; one taken in between is tried again on another."""
    config = os.path.join(work, "prometheus.yml")
    with open(config, "w") as f:
        f.write("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: infergate\n"
                "    static_configs:\n      - targets: ['%s']\n" % target)
    log_path = os.path.join(work, "prom.log")
    for attempt in range(attempts):
        address = "127.0.0.1:%d" % free_port()
        with open(log_path, "w") as log:
            prom = subprocess.Popen(["prometheus", "--config.file=" + config,
                                     "--storage.tsdb.path=%s/tsdb%d" % (work, attempt),
                                     "--web.listen-address=" + address, "--log.level=warn"],
                                    stdout=log, stderr=subprocess.STDOUT)
        deadline = time.time() + timeout
        while time.time() < deadline and prom.poll() is None:
            try:
                with urllib.request.urlopen("http://%s/-/ready" % address, timeout=5) as r:
                    if r.status == 200:
                        return prom, address
            except OSError:
                pass
            time.sleep(0.2)
        log_text = open(log_path).read()
        if prom.poll() is None:
            prom.kill()
            prom.wait()
            fail("Prometheus on %s was not ready within %d s:\n%s" % (address, timeout, log_text[-2000:]))
        if "address already in use" not in log_text:
            fail("Prometheus ended with %s before it was ready:\n%s" % (prom.returncode, log_text[-2000:]))
    fail("Prometheus found no free port in %d tries" % attempts)


def main():
    args = required_arguments("--server", "--make-models", "--proto-dir", "--monitoring-dir")
    work = tempfile.mkdtemp(prefix="ig_mon_")
    server = prom = None
    checks = 0
    try:
        rules_dir = os.path.join(args.monitoring_dir, "rules")
        subprocess.run(["promtool", "check", "rules", os.path.join(rules_dir, "infergate.rules.yml")], check=True)
        subprocess.run(["promtool", "test", "rules", "infergate.rules.test.yml"], check=True, cwd=rules_dir)
        checks += 2

        models = os.path.join(work, "models")
        make_demo_models(args.make_models, models, test_models=False)
        generate_stubs(args.proto_dir, os.path.join(work, "stubs"))
        import grpc
        from infergate.v1 import inference_pb2, inference_pb2_grpc, tensor_pb2

        server = Server(args.server, ["--model-repository=" + models, "--simulate-devices=mps",
                                      "--simulate-mps-unsupported-ops=aten::max_pool2d", "--cpu-workers=1",
                                      "--queue-capacity=1"], os.path.join(work, "server.log"))
        server.wait_serving()

        prom, prom_addr = start_prometheus(work, server.metrics_address)

        channel = grpc.insecure_channel(server.address)
        stub = inference_pb2_grpc.InferenceServiceStub(channel)

        def tensor(name, dtype, shape, fmt, values):
            return tensor_pb2.Tensor(name=name, dtype=dtype, shape=shape, data=array.array(fmt, values).tobytes())

        def mlp(device="cpu"):
            return inference_pb2.InferRequest(model="mlp", device=device, inputs=[
                tensor("x", tensor_pb2.FLOAT32, [1, 256], "f", [0.01 * i for i in range(256)])])

        def embed(device):
            return inference_pb2.InferRequest(model="embed", device=device, inputs=[
                tensor("ids", tensor_pb2.INT64, [1, 8], "q", list(range(8)))])

        def cnn(device, rows=1):
            return inference_pb2.InferRequest(model="cnn", device=device, inputs=[
                tensor("image", tensor_pb2.FLOAT32, [rows, 3, 64, 64], "f", [0.0] * (rows * 3 * 64 * 64))])

        for _ in range(7):
            stub.Infer(mlp(), timeout=30)
        for _ in range(5):
            stub.Infer(embed("mps"), timeout=30)
        for _ in range(3):
            r = stub.Infer(cnn("mps"), timeout=30)
            if r.placement.device != "cpu" or r.placement.fallback_reason != "unsupported_op:aten::max_pool2d":
                fail("cnn on mps did not fall back: %s" % r.placement)
        bad = mlp()
        bad.inputs[0].dtype = tensor_pb2.INT32
        for _ in range(2):
            try:
                stub.Infer(bad, timeout=30)
                fail("a wrong dtype was accepted")
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.INVALID_ARGUMENT:
                    fail("wrong dtype gave %s" % e.code())

        # One worker, a queue of one: twelve concurrent big batches overflow it.
        def send_big(_):
            try:
                stub.Infer(cnn("cpu", rows=32), timeout=60)
                return "OK"
            except grpc.RpcError as e:
                return e.code().name
        with concurrent.futures.ThreadPoolExecutor(12) as pool:
            codes = list(pool.map(send_big, range(12)))
        exhausted = codes.count("RESOURCE_EXHAUSTED")
        if exhausted == 0 or exhausted + codes.count("OK") != 12:
            fail("expected some RESOURCE_EXHAUSTED and the rest OK, got %s" % codes)
        print("queue-full rejections sent back to the client:", exhausted)

        text = scrape(server.metrics_address)
        check = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
        if check.returncode != 0 or check.stdout.strip() or check.stderr.strip():
            fail("promtool check metrics: rc=%d\n%s%s" % (check.returncode, check.stdout, check.stderr))
        checks += 1

        # Every metric the dashboard queries exists in this scrape or is a recording rule.
        families = set(re.findall(r"^# TYPE (\S+) ", text, re.M))
        recorded = set(re.findall(r"record:\s*(\S+)", open(os.path.join(rules_dir, "infergate.rules.yml")).read()))
        dashboard = json.load(open(os.path.join(args.monitoring_dir, "grafana", "infergate-dashboard.json")))
        exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
        for name in sorted(set(re.findall(r"infergate[a-z0-9_:]*", " ".join(exprs)))):
            base = re.sub(r"_(bucket|sum|count)$", "", name)
            if name not in families and base not in families and name not in recorded:
                fail("dashboard queries %s, which neither a scrape nor a recording rule provides" % name)
        checks += 1

        for expr, want in [
            ('infergate_requests_total{model="mlp",device="cpu",code="OK"}', 7),
            ('infergate_requests_total{model="embed",device="mps",code="OK"}', 5),
            ('infergate_requests_total{model="cnn",device="cpu",code="OK"}', 3 + 12 - exhausted),
            ('infergate_requests_total{model="mlp",device="",code="INVALID_ARGUMENT"}', 2),
            ('infergate_requests_total{model="cnn",device="cpu",code="RESOURCE_EXHAUSTED"}', exhausted),
            ('infergate_fallbacks_total{from="mps",to="cpu",reason="unsupported_op"}', 3),
            ('sum(infergate_rejections_total{reason="queue_full"})', exhausted),
            ('infergate_rejections_total{model="cnn",reason="queue_full"}', exhausted),
            ('infergate_device_up{device="mps",kind="mps",simulated="true"}', 1),
            ('sum(infergate_build_info)', 1),
        ]:
            wait_value(prom_addr, expr, want)
            checks += 1
        channel.close()
        print("%d passed, 0 failed" % checks)
    finally:
        if prom is not None:
            prom.terminate()
            prom.wait(timeout=30)
        if server is not None:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
