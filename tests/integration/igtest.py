"""Helpers for the Python integration tests: stubs generated from proto/ at
test time (Debian's protoc + grpc_python_plugin), and the real server
started on loopback ephemeral ports."""
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


_checks = [0]


def check(cond, msg):
    """One check of a test: counted, and the test fails with `msg` when it does not hold."""
    _checks[0] += 1
    if not cond:
        fail(msg)


def checks_made():
    return _checks[0]


def expect_error(fn, code, *needles):
    """Calls `fn`, which must fail with gRPC status `code` and a message naming each of `needles`."""
    import grpc
    try:
        fn()
    except grpc.RpcError as e:
        check(e.code() == code, "expected %s, got %s: %s" % (code, e.code(), e.details()))
        check_client_text(e.details() or "")
        for n in needles:
            check(n in (e.details() or ""), "error %r does not name %r" % (e.details(), n))
        return e
    fail("expected %s, the call succeeded" % code)


def check_client_text(text):
    """An error a client sees carries no native back-trace or code address
    (the server cuts them at its edges: common/client_text.h)."""
    for needle in ("frame #", "0x7f", "Exception raised from"):
        check(needle not in text, "a client saw %r in an error: %s" % (needle, text[:300]))


def varint(n):
    """A protobuf varint."""
    out = b""
    while True:
        byte, n = n & 0x7F, n >> 7
        out += bytes([byte | (0x80 if n else 0)])
        if not n:
            return out


def length_delimited(field, payload):
    """A protobuf length-delimited field, written out by hand."""
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def write_count_strings(folder):
    """A TorchScript model taking a List[str] (TYPE_STRING [-1]) and
    answering how many strings it got (INT64 [1])."""
    from typing import List

    import torch

    class CountStrings(torch.nn.Module):
        def forward(self, INPUT0: List[str]) -> torch.Tensor:
            return torch.tensor([len(INPUT0)], dtype=torch.int64)

    os.makedirs(os.path.join(folder, "1"))
    torch.jit.save(torch.jit.script(CountStrings()), os.path.join(folder, "1", "model.pt"))
    with open(os.path.join(folder, "config.pbtxt"), "w") as f:
        f.write('platform: "pytorch_libtorch"\nmax_batch_size: 0\n'
                'input [ { name: "INPUT0" data_type: TYPE_STRING dims: [ -1 ] } ]\n'
                'output [ { name: "OUTPUT0" data_type: TYPE_INT64 dims: [ 1 ] } ]\n')


def inflight_bytes(server):
    """The server's infergate_inflight_request_bytes, from /metrics."""
    import urllib.request
    with urllib.request.urlopen("http://%s/metrics" % server.metrics_address, timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("infergate_inflight_request_bytes "):
                return float(line.split()[1])
    fail("no infergate_inflight_request_bytes metric")


def expect_budget_back(server, what):
    """The in-flight budget returns to exactly 0 once every call has ended:
    nothing leaked can shut the gate."""
    deadline = time.time() + 30
    held = inflight_bytes(server)
    while held != 0 and time.time() < deadline:
        time.sleep(0.1)
        held = inflight_bytes(server)
    check(held == 0, "%s: %d bytes still counted in flight after every call ended" % (what, held))


def rss_kib(pid, field="VmRSS:"):
    """A process's resident memory (or, with field="VmHWM:", its peak since
    start or the last reset_peak) in KiB, from /proc."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1])
    return 0


def reset_peak(pid):
    """Starts a new peak (VmHWM) for `pid`; False where the kernel refuses."""
    try:
        with open("/proc/%d/clear_refs" % pid, "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def under_asan(pid):
    """Whether `pid` runs under AddressSanitizer, whose quarantine keeps freed
    memory: RSS says nothing about budgets there (CI checks them in the plain
    build, where these tests run too)."""
    with open("/proc/%d/maps" % pid) as f:
        return "libasan" in f.read()


def memory_bounds_apply(pid):
    """Whether RSS bounds can be checked on `pid`: not under AddressSanitizer.
    A run that skips them must say it is a sanitizer run
    (INFERGATE_SANITIZER_RUN=1, as tests/run.sh's ASan suite does, whose plain
    build then checks them); otherwise the skip fails the test, so that no
    memory bound goes unchecked in every build a run makes."""
    if not under_asan(pid):
        return True
    if os.environ.get("INFERGATE_SANITIZER_RUN") != "1":
        fail("the server runs under AddressSanitizer, where memory bounds cannot be checked, and this run does "
             "not say it is a sanitizer run (INFERGATE_SANITIZER_RUN=1): the bounds would go unchecked")
    print("memory bounds not checked under AddressSanitizer (a sanitizer run: the plain build checks them)")
    return False


def generate_stubs(proto_dir, out_dir):
    """Generates Python stubs into out_dir and puts it on sys.path."""
    protos = ["infergate/v1/tensor.proto", "infergate/v1/model_config.proto", "infergate/v1/inference.proto",
              "grpc/health/v1/health.proto"]
    os.makedirs(out_dir, exist_ok=True)
    subprocess.run(["protoc", "-I", proto_dir, "--python_out", out_dir, "--grpc_python_out", out_dir,
                    "--plugin=protoc-gen-grpc_python=" + shutil.which("grpc_python_plugin")] + protos, check=True)
    for d in ["infergate", "infergate/v1"]:
        open(os.path.join(out_dir, d, "__init__.py"), "a").close()
    # grpc/health/v1 would shadow the real grpc package: move it aside.
    os.rename(os.path.join(out_dir, "grpc"), os.path.join(out_dir, "health_stubs"))
    for root, _, files in os.walk(os.path.join(out_dir, "health_stubs")):
        open(os.path.join(root, "__init__.py"), "a").close()
        for f in files:
            if f.endswith(".py"):
                p = os.path.join(root, f)
                text = open(p).read().replace("from grpc.health.v1 import", "from health_stubs.health.v1 import")
                open(p, "w").write(text)
    sys.path.insert(0, out_dir)


def reference_stubs(ref_dir, out_dir):
    """Stubs from the Open Inference Protocol's own definitions (Triton's
    grpc_service.proto and model_config.proto), put on sys.path."""
    os.makedirs(out_dir, exist_ok=True)
    subprocess.run(["protoc", "-I", ref_dir, "--python_out", out_dir, "--grpc_python_out", out_dir,
                    "--plugin=protoc-gen-grpc_python=" + shutil.which("grpc_python_plugin"),
                    "grpc_service.proto", "model_config.proto"], check=True)
    sys.path.insert(0, out_dir)


def required_arguments(*flags):
    """The test's command line: each of `flags` ("--server", ...) required,
    read as args.server and so on."""
    import argparse
    ap = argparse.ArgumentParser()
    for flag in flags:
        ap.add_argument(flag, required=True)
    return ap.parse_args()


def open_inference_setup(prefix):
    """What the Open Inference Protocol tests share: their arguments (--server,
    --make-models, --proto-dir, --reference-dir), a work folder, the models
    with the test models, and both sets of stubs. Returns (args, work, models)."""
    import tempfile
    args = required_arguments("--server", "--make-models", "--proto-dir", "--reference-dir")
    work = tempfile.mkdtemp(prefix=prefix)
    models = os.path.join(work, "models")
    make_demo_models(args.make_models, models)
    generate_stubs(args.proto_dir, os.path.join(work, "stubs"))
    reference_stubs(args.reference_dir, os.path.join(work, "ref"))
    return args, work, models


def make_demo_models(binary, dest, test_models=True):
    """The demo models (and, with `test_models`, the models tests use) in
    `dest`: a copy of the repository `binary` made once per build of it,
    by whichever test came first, under a lock (as the C++ tests'
    DemoRepository does)."""
    import fcntl
    made = os.stat(binary)
    template = "%s.repository-%d-%d.%d%s" % (binary, made.st_size, int(made.st_mtime), made.st_mtime_ns % 10**9,
                                             "" if test_models else "-demo-only")
    with open(template + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(os.path.join(template, ".complete")):
            shutil.rmtree(template, ignore_errors=True)
            subprocess.run([binary, template] + (["--with-test-models"] if test_models else []), check=True,
                           stdout=subprocess.DEVNULL)
            open(os.path.join(template, ".complete"), "w").close()
    shutil.copytree(template, dest, ignore=shutil.ignore_patterns(".complete"))


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """The infergate binary on 127.0.0.1 with ephemeral gRPC and metrics ports.
    The tests load and unload models freely: their servers open the admin API
    (--open-admin-api; the default keeps it closed), which `args` may turn off
    again with --open-admin-api=false."""

    def __init__(self, binary, args, log_path):
        self.log_path = log_path
        self.proc = subprocess.Popen([binary, "--address=127.0.0.1:0", "--metrics-address=127.0.0.1:0",
                                      "--http-address=127.0.0.1:0", "--open-admin-api"] + args,
                                     stdout=subprocess.PIPE, stderr=open(log_path, "w"), text=True)
        self.address = None
        self.metrics_address = None
        self.http_address = None
        while self.address is None and self.proc.poll() is None:
            line = self.proc.stdout.readline()
            m = re.search(r"infergate metrics on (\S+)", line)
            if m:
                self.metrics_address = m.group(1)
            m = re.search(r"infergate http on (\S+)", line)
            if m:
                self.http_address = m.group(1)
            m = re.search(r"infergate listening on (\S+)", line)
            if m:
                self.address = m.group(1)
        if self.address is None:
            fail("server did not start:\n" + open(log_path).read())

    def wait_serving(self, timeout=60):
        import grpc
        from health_stubs.health.v1 import health_pb2, health_pb2_grpc
        channel = grpc.insecure_channel(self.address)
        health = health_pb2_grpc.HealthStub(channel)
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                if health.Check(health_pb2.HealthCheckRequest(), timeout=2).status == \
                        health_pb2.HealthCheckResponse.SERVING:
                    channel.close()
                    return
            except grpc.RpcError:
                pass
            time.sleep(0.05)
        fail("server never became SERVING")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.proc.returncode

    def stop_noting(self, failures, what="server"):
        """Stops the server (or reads the exit status of one that died); an
        exit other than 0 joins `failures` as "WHAT exited RC", and when
        `failures` holds anything the tail of the server's log is printed."""
        rc = self.stop()
        if rc != 0:
            failures.append("%s exited %s" % (what, rc))
        if failures:
            print(open(self.log_path).read()[-4000:])
