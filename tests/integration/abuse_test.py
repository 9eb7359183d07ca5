#!/usr/bin/env python3
"""Reliability and security, round 4: the findings of the review of the
image handler, uploads, the admin API, text-proto configs, KServe V1
instances, multipart forms and compressed bodies, each against the real
server, with a well-behaved client (health and a prediction) answered
throughout within 50 times its slowest quiet answer on the same server
(2 s at least) and the server's memory watched.

Memory bounds are checked in the plain build (CI runs this test there; under
AddressSanitizer, whose quarantine keeps freed memory, they are reported
and not checked).

Server A, a TorchServe model store (image_classifier, batch size 8) under a
256 MiB in-flight budget and a 32 MiB body limit:
- a 1 x 1,000,000 PNG and a 1 x 65,500 JPEG (a few KB each, 196 GB and
  12.8 GB resized whole), through /predictions and KServe V1 base64: 400
  within 10 s naming the shape, RSS growth under 1 GiB, the server alive;
- an 8,000 x 100 image (allowed): answered, its work that of the crop;
- 1024 tiny KServe V1 images (each a 602 KB tensor once decoded): refused,
  naming the cap; 128 (the cap) answered; RSS growth under 768 MiB;
- 2,000,000 empty multipart parts: 400 naming the part cap, quickly;
- a gzip bomb past the body limit: 413, peak RSS growth under 1.5 x the
  limit (the inflated size is measured before anything is allocated).
Server B, a repository with default flags, then with the admin API open:
- a load is refused by default (PERMISSION_DENIED naming --open-admin-api);
- a hostile AOTInductor package (a shared library whose constructor writes
  a marker file) sent as file:1/model.pt2 beside file:1/model.pt, under
  other names, and inside a zip: refused, the marker never written;
- while the admin API is open without a token, a REST load addressed to
  another Host (DNS rebinding) is refused, one to 127.0.0.1 served;
- 600 KB of '[' in a config.pbtxt: the server serves, that model is
  UNAVAILABLE with the parser's reason.
"""
import base64
import gzip
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import zipfile
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from igtest import (Server, make_demo_models, check, checks_made, expect_budget_back, fail, length_delimited,  # noqa: E402
                    reference_stubs, required_arguments, reset_peak, rss_kib, memory_bounds_apply)

BUDGET_MIB = 256
# How long a well-behaved client's answer may take while the server is
# under attack, and how long a refusal of an abusive request may take: each
# relative to the same answers measured on the same server just before the
# attack (calibrate(): the slowest of a few quiet ones), so that a machine
# several times slower, or busy with other tests, scales the bounds with
# it; never under the floors (2 s for an answer, three times that when the
# server runs under AddressSanitizer, where 2.25 s was seen once beside
# other tests on two cores; 10 s for a refusal).
ANSWER_FLOOR_S = [2.0]  # set in main() from the server binary
REFUSAL_FLOOR_S = 10.0
ANSWERS_PER_QUIET_ANSWER = 50   # an answer under attack: at most 50 quiet ones
REFUSALS_PER_QUIET_ANSWER = 250
ANSWER_BOUND_S = [ANSWER_FLOOR_S[0]]
REFUSAL_BOUND_S = [REFUSAL_FLOOR_S]


def built_with_asan(binary):
    with open(binary, "rb") as f:
        return b"libasan.so" in f.read()
BODY_LIMIT_MIB = 32








def http(address, method, path, body=None, headers=None, timeout=60):
    req = urllib.request.Request("http://%s%s" % (address, path), data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def wait_ready(address):
    deadline = time.time() + 90
    while time.time() < deadline:
        try:
            if http(address, "GET", "/v2/health/ready", timeout=5)[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.05)
    fail("server never became ready")


def well_behaved_calls(request=None):
    """One round of the well-behaved client: health, and `request` when given."""
    return [("GET", "/v2/health/live", None, {})] + ([request] if request else [])


def calibrate(address, request=None):
    """Sets the bounds from this server's quiet answers: the slowest of ten
    rounds of the well-behaved client's calls (health, and `request` when
    given), before any abuse."""
    slowest = 0.0
    for _ in range(10):
        for call in well_behaved_calls(request):
            start = time.time()
            status, body = http(address, *call, timeout=30)
            check(status == 200, "quiet %s %s: %d %s" % (call[0], call[1], status, body[:200]))
            slowest = max(slowest, time.time() - start)
    ANSWER_BOUND_S[0] = max(ANSWER_FLOOR_S[0], ANSWERS_PER_QUIET_ANSWER * slowest)
    REFUSAL_BOUND_S[0] = max(REFUSAL_FLOOR_S, REFUSALS_PER_QUIET_ANSWER * slowest)
    print("quiet answers: slowest %.3f s; bounds under attack: an answer %.1f s, a refusal %.1f s" %
          (slowest, ANSWER_BOUND_S[0], REFUSAL_BOUND_S[0]))


def png(width, height, rgb=(90, 160, 30)):
    """An 8-bit RGB PNG, every pixel `rgb`, written by hand (Pillow will not
    make a 1 x 1,000,000 one)."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    row = b"\0" + bytes(rgb) * width
    raw = row * height
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def jpeg(width, height):
    from PIL import Image
    buf = io.BytesIO()
    Image.new("RGB", (width, height), (200, 40, 90)).save(buf, "JPEG", quality=50)
    return buf.getvalue()


class Watch:
    """A well-behaved client for the whole of a check: health every 50 ms
    and, when given, a request; the slowest answer of each is kept."""

    def __init__(self, address, request=None):
        self.address = address
        self.request = request
        self.stop = threading.Event()
        self.slowest = 0.0
        self.errors = []
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop.is_set():
            for call in well_behaved_calls(self.request):
                start = time.time()
                try:
                    status, body = http(self.address, *call, timeout=30)
                    if status != 200:
                        self.errors.append("%s %s: %d %s" % (call[0], call[1], status, body[:200]))
                except OSError as e:
                    self.errors.append("%s %s: %r" % (call[0], call[1], e))
                self.slowest = max(self.slowest, time.time() - start)
            time.sleep(0.05)

    def finish(self, what):
        self.stop.set()
        self.thread.join()
        check(not self.errors and self.slowest < ANSWER_BOUND_S[0],
              "%s: the well-behaved client: slowest answer %.2f s, errors %s" % (what, self.slowest, self.errors[:3]))


def memory_check(pid, what, before_kib, limit_mib):
    peak = rss_kib(pid, "VmHWM:")
    growth = max(0, peak - before_kib) // 1024
    print("%s: RSS before %d MiB, peak %d MiB (growth %d MiB, bound %d MiB)" %
          (what, before_kib // 1024, peak // 1024, growth, limit_mib))
    if not memory_bounds_apply(pid):
        return
    check(growth < limit_mib, "%s: peak RSS grew %d MiB, more than %d MiB" % (what, growth, limit_mib))


def images_server(args, work):
    store = os.path.join(work, "store")
    subprocess.run([sys.executable, args.make_store, store, os.path.join(work, "photo.jpg")], check=True)
    server = Server(args.server, ["--model-repository=" + store, "--devices=cpu",
                                  "--max-inflight-bytes=%dMiB" % BUDGET_MIB,
                                  "--max-receive-bytes=%dMiB" % BODY_LIMIT_MIB],
                    os.path.join(work, "server-images.log"))
    address = server.http_address
    wait_ready(address)
    pid = server.proc.pid
    photo = open(os.path.join(work, "photo.jpg"), "rb").read()
    status, body = http(address, "POST", "/predictions/clf", photo)
    check(status == 200, "a photo is classified: %d %s" % (status, body[:200]))
    predict = ("POST", "/predictions/clf", photo, {})
    calibrate(address, predict)

    # --- Images whose whole resize would take gigabytes.
    strips = {"1x1000000 PNG": png(1, 1000000), "1x65500 JPEG": jpeg(1, 65500),
              "1000000x1 PNG": png(1000000, 1)}
    for name, image in strips.items():
        print("%s: %d bytes" % (name, len(image)))
        for route in ("torchserve", "kserve"):
            watch = Watch(address, predict)
            before = rss_kib(pid)
            reset_peak(pid)
            start = time.time()
            if route == "torchserve":
                status, body = http(address, "POST", "/predictions/clf", image)
            else:
                payload = json.dumps({"instances": [{"data": {"b64": base64.b64encode(image).decode()}}]})
                status, body = http(address, "POST", "/v1/models/clf:predict", payload.encode(),
                                    {"Content-Type": "application/json"})
            took = time.time() - start
            watch.finish("%s via %s" % (name, route))
            check(400 <= status < 500 and took < REFUSAL_BOUND_S[0] and b"one side more than" in body,
                  "%s via %s: %d in %.1f s: %s" % (name, route, status, took, body[:300]))
            memory_check(pid, "%s via %s" % (name, route), before, 1024)
    # A long image within the bounds is served, at the cost of its crop.
    long_image = png(8000, 100, (10, 200, 250))
    status, body = http(address, "POST", "/predictions/clf", long_image)
    check(status == 200 and body.startswith(b"{"), "an 8000x100 image: %d %s" % (status, body[:200]))

    # --- KServe V1 instances: each tiny image becomes a 602 KB tensor.
    tiny = base64.b64encode(png(2, 2)).decode()
    watch = Watch(address, predict)
    before = rss_kib(pid)
    reset_peak(pid)
    many = json.dumps({"instances": [{"data": {"b64": tiny}}] * 1024}).encode()
    status, body = http(address, "POST", "/v1/models/clf:predict", many, {"Content-Type": "application/json"})
    check(status == 400 and b"at most 128" in body, "1024 tiny V1 images: %d %s" % (status, body[:300]))
    cap = json.dumps({"instances": [{"data": {"b64": tiny}}] * 128}).encode()
    status, body = http(address, "POST", "/v1/models/clf:predict", cap, {"Content-Type": "application/json"})
    check(status == 200 and len(json.loads(body)["predictions"]) == 128,
          "128 tiny V1 images (the cap): %d %s" % (status, body[:300]))
    watch.finish("tiny V1 images")
    memory_check(pid, "tiny V1 images", before, 768)

    # --- Two million empty multipart parts: refused at the part cap.
    watch = Watch(address, predict)
    # Each part: its delimiter, no headers, empty content (11 bytes).
    body = b"--b\r\n\r\n\r\n\r\n" * 2000000 + b"--b--\r\n"
    start = time.time()
    status, answer = http(address, "POST", "/predictions/clf", body,
                          {"Content-Type": "multipart/form-data; boundary=b"})
    took = time.time() - start
    watch.finish("2,000,000 multipart parts")
    check(status == 400 and b"more than 1000 parts" in answer and took < REFUSAL_BOUND_S[0],
          "2,000,000 multipart parts: %d in %.1f s: %s" % (status, took, answer[:300]))

    # --- A gzip bomb: 1 GiB of zeros in about a megabyte.
    bomb = gzip.compress(b"\0" * (1 << 30), 9)
    watch = Watch(address, predict)
    before = rss_kib(pid)
    reset_peak(pid)
    status, answer = http(address, "POST", "/v2/models/clf/infer", bomb,
                          {"Content-Type": "application/json", "Content-Encoding": "gzip"})
    watch.finish("gzip bomb")
    check(status == 413 and b"inflates to more than" in answer, "gzip bomb: %d %s" % (status, answer[:300]))
    memory_check(pid, "gzip bomb (%d KiB)" % (len(bomb) // 1024), before, BODY_LIMIT_MIB * 3 // 2)

    check(server.proc.poll() is None, "the server is still running after the image abuse")
    check(server.stop() == 0, "server exits 0 on SIGTERM")


def hostile_package(work, marker):
    """An AOTInductor-shaped package whose shared library writes `marker`
    when it is loaded (its constructor runs at dlopen)."""
    source = os.path.join(work, "hostile.c")
    with open(source, "w") as f:
        f.write('#include <stdio.h>\n__attribute__((constructor)) static void owned(void) {\n'
                '  FILE* f = fopen("%s", "w"); if (f) { fputs("ran", f); fclose(f); }\n}\n' % marker)
    library = os.path.join(work, "hostile.so")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", library, source], check=True)
    # The library does what the test says it does: loaded, it writes the
    # marker (here, in the test's own process), so its absence later means
    # the server never loaded it.
    import ctypes
    ctypes.CDLL(library)
    check(os.path.exists(marker), "the hostile library writes its marker when loaded")
    os.remove(marker)
    so = open(library, "rb").read()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr("model/data/aotinductor/model/hostile.so", so)
        z.writestr("model/data/aotinductor/model/hostile.cpp", "// compiled model\n")
        z.writestr("model/archive_format", "pt2")
    packed = buf.getvalue()
    deflated = io.BytesIO()
    with zipfile.ZipFile(deflated, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("model/data/aotinductor/model/hostile.so", so)
    return so, packed, deflated.getvalue()


def load_with_files(address, model, files, host=None):
    params = {"config": "{}"}
    for path, content in files.items():
        params["file:" + path] = base64.b64encode(content).decode()
    headers = {"Content-Type": "application/json"}
    if host:
        headers["Host"] = host
    return http(address, "POST", "/v2/repository/models/%s/load" % model,
                json.dumps({"parameters": params}).encode(), headers)


def admin_server(args, work):
    models = os.path.join(work, "models")
    make_demo_models(args.make_models, models, test_models=False)
    # A config.pbtxt of 600 KB of '[' beside a served model.
    deep = os.path.join(models, "deep")
    shutil.copytree(os.path.join(models, "mlp"), deep)
    with open(os.path.join(deep, "config.pbtxt"), "w") as f:
        f.write("name: \"deep\"\nplatform: \"pytorch_libtorch\"\ninput " + "[" * (600 << 10))
    marker = os.path.join(work, "hostile-ran")
    so, package, deflated = hostile_package(work, marker)
    model_pt = open(os.path.join(models, "mlp", "1", "model.pt"), "rb").read()
    hostile_uploads = {
        ".pt2 beside model.pt": {"1/model.pt": model_pt, "1/model.pt2": package},
        "a shared library under another name": {"1/model.pt": model_pt, "1/weights.bin": so},
        "a .pt2 named model.pt": {"1/model.pt": package},
        "a deflated zip holding a .so": {"1/model.pt": model_pt, "1/extra.zip": deflated},
        "a .so by name": {"1/model.pt": model_pt, "1/libx.so.1": b"not even ELF"},
    }

    # --- Default flags: the admin API is closed, uploads off.
    server = Server(args.server, ["--model-repository=" + models, "--devices=cpu", "--open-admin-api=false"],
                    os.path.join(work, "server-default.log"))
    address = server.http_address
    wait_ready(address)
    status, body = http(address, "POST", "/v2/repository/models/mlp/load", b"{}")
    check(status == 403 and b"--open-admin-api" in body and b"--admin-token-file" in body,
          "a load on a default server: %d %s" % (status, body[:300]))
    for name, files in hostile_uploads.items():
        status, body = load_with_files(address, "mlp", files)
        check(status == 403, "%s on a default server: %d %s" % (name, status, body[:200]))
    # The deep config: the server serves, that model is unavailable with a reason.
    status, body = http(address, "POST", "/v2/repository/index", b"{}")
    index = {m["name"]: m for m in json.loads(body)} if status == 200 else {}
    deep_entry = index.get("deep", {})
    check(deep_entry.get("state") == "UNAVAILABLE" and "list inside a list" in deep_entry.get("reason", ""),
          "600 KB of '[' in a config: %s" % deep_entry)
    check(index.get("mlp", {}).get("state") == "READY", "mlp serves beside it: %s" % index.get("mlp"))
    check(server.stop() == 0, "default server exits 0 on SIGTERM")

    # --- Admin open, uploads on, native code still refused.
    server = Server(args.server, ["--model-repository=" + models, "--devices=cpu", "--max-load-file-bytes=8MiB"],
                    os.path.join(work, "server-open.log"))
    address = server.http_address
    wait_ready(address)
    for name, files in hostile_uploads.items():
        status, body = load_with_files(address, "mlp", files)
        check(status == 403 and b"--allow-native-uploads" in body,
              "%s with uploads on: %d %s" % (name, status, body[:300]))
    time.sleep(0.5)
    check(not os.path.exists(marker), "the hostile library never ran (no %s)" % marker)
    # DNS rebinding: an admin request addressed to another name is refused.
    status, body = http(address, "POST", "/v2/repository/models/mlp/load", b"{}", {"Host": "rebound.example:80"})
    check(status == 403 and b"Host" in body, "a load addressed to rebound.example: %d %s" % (status, body[:300]))
    status, body = load_with_files(address, "mlp", {"1/model.pt": model_pt}, host=address)
    check(status == 200, "a plain upload addressed to %s: %d %s" % (address, status, body[:300]))
    check(server.stop() == 0, "open server exits 0 on SIGTERM")
    check(not os.path.exists(marker), "the hostile library never ran")


BURST_PROCESSES = 8
BURST_STREAMS = 6  # per process: 48 calls at once
BURST_BYTES = 24 << 20


def torchserve_predictions_request(model, data):
    """TorchServe's PredictionsRequest {model_name: 1, input: 3 (a map of
    string to bytes)}, written out by hand: the test needs no stubs of it."""
    entry = length_delimited(1, b"data") + length_delimited(2, data)
    return length_delimited(1, model.encode()) + length_delimited(3, entry)


def burst_process(address, stubs, seconds, results, method="ModelInfer"):
    """One client process: BURST_STREAMS threads each sending 24 MiB
    requests on its own channel for `seconds` (Open Inference ModelInfer,
    or TorchServe's Predictions with 24 MiB of data that is not JSON); the
    status codes go to `results`."""
    sys.path.insert(0, stubs)
    import grpc
    import grpc_service_pb2 as pb
    import grpc_service_pb2_grpc as pb_grpc
    values = BURST_BYTES // 4
    request = pb.ModelInferRequest(model_name=os.environ.get("BURST_MODEL", "fails"), inputs=[pb.ModelInferRequest.InferInputTensor(
        name="x", datatype="FP32", shape=[values])], raw_input_contents=[b"\0\0\x80\x3f" * values])
    predictions = torchserve_predictions_request("mlp", b"\0" * BURST_BYTES)
    codes = []
    lock = threading.Lock()

    def stream():
        channel = grpc.insecure_channel(address, options=[("grpc.max_send_message_length", 64 << 20),
                                                          ("grpc.max_receive_message_length", 64 << 20)])
        stub = pb_grpc.GRPCInferenceServiceStub(channel)
        predict = channel.unary_unary("/org.pytorch.serve.grpc.inference.InferenceAPIsService/Predictions")
        end = time.time() + seconds
        while time.time() < end:
            try:
                if method == "Predictions":
                    predict(predictions, timeout=60)
                else:
                    stub.ModelInfer(request, timeout=60)
                code = "OK"
            except grpc.RpcError as e:
                code = "%s: %s" % (e.code().name, (e.details() or "")[:120])
            with lock:
                codes.append(code)
        channel.close()
    threads = [threading.Thread(target=stream) for _ in range(BURST_STREAMS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    results.put(codes)


def grpc_burst(args, work, stubs):
    """48 concurrent 24 MiB requests from 8 processes under a 256 MiB budget,
    of Open Inference ModelInfer, then of TorchServe's Predictions: the
    server's memory grows by less than 768 MiB, every call is answered OK
    (INVALID_ARGUMENT for the Predictions, whose data is not JSON) or
    RESOURCE_EXHAUSTED, and a well-behaved client is answered within three
    times the other cases' bound throughout."""
    import grpc
    import grpc_service_pb2 as pb
    import grpc_service_pb2_grpc as pb_grpc
    models = os.path.join(work, "burst-models")
    make_demo_models(args.make_models, models)
    server = Server(args.server, ["--model-repository=" + models, "--devices=cpu", "--max-inflight-bytes=%dMiB" %
                                  BUDGET_MIB, "--max-receive-bytes=32MiB"], os.path.join(work, "server-burst.log"))
    wait_ready(server.http_address)
    calibrate(server.http_address, ("POST", "/v2/models/mlp/infer", json.dumps(
        {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 256], "data": [0.5] * 256}]}).encode(), {}))
    small = pb.ModelInferRequest(model_name="mlp", inputs=[pb.ModelInferRequest.InferInputTensor(
        name="x", datatype="FP32", shape=[1, 256])], raw_input_contents=[b"\0\0\0\x3f" * 256])
    stub = pb_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(server.address))
    stub.ModelInfer(small, timeout=30)
    burst_phase(server, stub, small, stubs, "ModelInfer", "OK")
    # TorchServe's Predictions passes the same gate: before it was taken as a
    # generic call, gRPC read every one of its messages before the budget.
    burst_phase(server, stub, small, stubs, "Predictions", "INVALID_ARGUMENT")
    check(server.stop() == 0, "burst server exits 0 on SIGTERM")


def burst_phase(server, stub, small, stubs, method, answered):
    """BURST_PROCESSES processes sending 24 MiB `method` calls for 12 s, the
    small ModelInfer client beside them: the memory bound, and every call
    answered `answered` or RESOURCE_EXHAUSTED."""
    import multiprocessing
    import grpc
    pid = server.proc.pid
    before = rss_kib(pid)
    reset_peak(pid)
    # Spawned, not forked: gRPC's threads in this process do not survive a fork.
    spawn = multiprocessing.get_context("spawn")
    results = spawn.Queue()
    procs = [spawn.Process(target=burst_process, args=(server.address, stubs, 12, results, method))
             for _ in range(BURST_PROCESSES)]
    for p in procs:
        p.start()
    slowest, errors, served = 0.0, [], 0
    end = time.time() + 12
    while time.time() < end:
        start = time.time()
        try:
            stub.ModelInfer(small, timeout=30)
            served += 1
        except grpc.RpcError as e:
            errors.append("%s: %s" % (e.code().name, e.details()))
        slowest = max(slowest, time.time() - start)
        time.sleep(0.05)
    codes = []
    for _ in procs:
        codes += results.get(timeout=120)
    for p in procs:
        p.join()
    tally = {}
    for c in codes:
        tally[c.split(":")[0]] = tally.get(c.split(":")[0], 0) + 1
    print("gRPC %s burst: %d calls %s; the small client: %d answered, slowest %.2f s, errors %s" %
          (method, len(codes), tally, served, slowest, errors[:3]))
    # What the server holds beyond the budget is working memory bounded by
    # its threads, not by the clients: a message and its parsed copy on each
    # of the 2 pollers, an output and its answer on each device worker, and
    # the fast lane's rooms. Measured +573..+644 MiB for ModelInfer (idle
    # and with two busy loops beside it; +2,540 MiB before the intake gate,
    # up to +801 before answers were counted in the budget and moved into
    # gRPC uncopied).
    memory_check(pid, "gRPC %s burst of %d x 24 MiB" % (method, BURST_PROCESSES * BURST_STREAMS), before, 768)
    others = sorted(set(c for c in codes if not c.startswith(answered) and not c.startswith("RESOURCE_EXHAUSTED")))
    check(not others, "burst calls answered other than %s or RESOURCE_EXHAUSTED: %s" % (answered, others[:5]))
    # The budget bites both ways: 48 calls of 24 MiB at once cannot all fit
    # 256 MiB, and what fits is served (558 calls: 403 refused, 155 OK in
    # one plain run).
    check(tally.get(answered, 0) > 0 and tally.get("RESOURCE_EXHAUSTED", 0) > 0,
          "the %s burst: some calls answered %s and some refused RESOURCE_EXHAUSTED, got %s" %
          (method, answered, tally))
    # The burst saturates both cores with 24 MiB messages on its own, so its
    # small client gets three times the bound of the other abuse cases: it
    # measured 0.22-1.08 s on an idle machine, 1.69 s beside a CI run, 2.01 s
    # beside a CI run and a compile, and 3.97 s in CI beside the soak and the
    # benchmark smoke tests (the plain suite's neighbours). Before the intake
    # gate it was refused or timed out (30 s).
    bound = ANSWER_BOUND_S[0] * 3
    check(not errors and slowest < bound, "the small client during the burst: slowest %.2f s (bound %.1f s), errors %s" %
          (slowest, bound, errors[:3]))
    expect_budget_back(server, "the gRPC %s burst" % method)


def main():
    args = required_arguments("--server", "--make-models", "--make-store", "--reference-dir")
    if built_with_asan(args.server):
        ANSWER_FLOOR_S[0] = 6.0
    print("a well-behaved client's answers are bounded at %.0f s or more" % ANSWER_FLOOR_S[0])
    work = tempfile.mkdtemp(prefix="ig_abuse_")
    try:
        os.environ["TMPDIR"] = work
        stubs = os.path.join(work, "stubs")
        reference_stubs(args.reference_dir, stubs)
        only = os.environ.get("ABUSE_ONLY", "")
        if only in ("", "images"):
            images_server(args, work)
        if only in ("", "admin"):
            admin_server(args, work)
        if only in ("", "grpc"):
            grpc_burst(args, work, stubs)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("abuse_test: %d checks passed" % checks_made())


if __name__ == "__main__":
    main()
