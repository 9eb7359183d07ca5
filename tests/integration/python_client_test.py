#!/usr/bin/env python3
"""A client generated from proto/ in another language (Python) calls the real
server: ListDevices lists the cpu, and Infer on mlp agrees with the model's
own weights, read straight out of model.pt and applied in pure Python.

Uses Debian's python3-grpcio and python3-protobuf, and grpc_python_plugin
from protobuf-compiler-grpc to generate the stubs at test time.
"""
import argparse
import array
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def generate_stubs(proto_dir, out_dir):
    protos = ["infergate/v1/tensor.proto", "infergate/v1/model_config.proto", "infergate/v1/inference.proto",
              "grpc/health/v1/health.proto"]
    cmd = ["protoc", "-I", proto_dir, "--python_out", out_dir, "--grpc_python_out", out_dir,
           "--plugin=protoc-gen-grpc_python=" + shutil.which("grpc_python_plugin")] + protos
    subprocess.run(cmd, check=True)
    # protoc writes infergate/v1/*_pb2.py; make them importable as packages.
    for d in ["infergate", "infergate/v1"]:
        open(os.path.join(out_dir, d, "__init__.py"), "a").close()
    # The health stubs live under grpc/health/v1, which would shadow the real
    # grpc package; move them to a private name.
    os.rename(os.path.join(out_dir, "grpc"), os.path.join(out_dir, "health_stubs"))
    for root, _, files in os.walk(os.path.join(out_dir, "health_stubs")):
        open(os.path.join(root, "__init__.py"), "a").close()
        for f in files:
            if f.endswith(".py"):
                p = os.path.join(root, f)
                text = open(p).read().replace("from grpc.health.v1 import", "from health_stubs.health.v1 import")
                open(p, "w").write(text)


def mlp_reference(model_pt, x):
    """256 -> 512 -> 512 -> 10 with ReLU, from the raw float32 storages in model.pt."""
    with zipfile.ZipFile(model_pt) as z:
        names = sorted((n for n in z.namelist() if re.search(r"/data/\d+$", n)), key=lambda n: int(n.rsplit("/", 1)[1]))
        blobs = [array.array("f", z.read(n)) for n in names]
    if sys.byteorder != "little":
        for b in blobs:
            b.byteswap()
    w1, b1, w2, b2, w3, b3 = blobs

    def linear(v, w, b, n_out, relu):
        n_in = len(v)
        out = []
        for o in range(n_out):
            row = w[o * n_in:(o + 1) * n_in]
            s = b[o] + sum(a * c for a, c in zip(row, v))
            out.append(max(s, 0.0) if relu else s)
        return out

    h = linear(x, w1, b1, 512, True)
    h = linear(h, w2, b2, 512, True)
    return linear(h, w3, b3, 10, False)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--make-models", required=True)
    ap.add_argument("--proto-dir", required=True)
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="ig_py_")
    server = None
    try:
        models = os.path.join(work, "models")
        subprocess.run([args.make_models, models], check=True, stdout=subprocess.DEVNULL)
        stubs = os.path.join(work, "stubs")
        os.makedirs(stubs)
        generate_stubs(args.proto_dir, stubs)
        sys.path.insert(0, stubs)
        import grpc
        from infergate.v1 import inference_pb2, inference_pb2_grpc, tensor_pb2
        from health_stubs.health.v1 import health_pb2, health_pb2_grpc

        server = subprocess.Popen([args.server, "--address=127.0.0.1:0", "--metrics-address=127.0.0.1:0",
                                   "--model-repository=" + models],
                                  stdout=subprocess.PIPE, stderr=open(os.path.join(work, "server.log"), "w"),
                                  text=True)
        line = ""
        while "listening on" not in line and server.poll() is None:
            line = server.stdout.readline()
        m = re.search(r"infergate listening on (\S+)", line)
        if not m:
            fail("server did not report its address: %r" % line)
        address = m.group(1)
        channel = grpc.insecure_channel(address)
        health = health_pb2_grpc.HealthStub(channel)
        deadline = time.time() + 60
        while True:
            try:
                if health.Check(health_pb2.HealthCheckRequest(), timeout=2).status == \
                        health_pb2.HealthCheckResponse.SERVING:
                    break
            except grpc.RpcError:
                pass
            if time.time() > deadline:
                fail("server never became SERVING")
            time.sleep(0.05)

        stub = inference_pb2_grpc.InferenceServiceStub(channel)
        devices = stub.ListDevices(inference_pb2.ListDevicesRequest(), timeout=10).devices
        ids = [d.id for d in devices]
        if "cpu" not in ids:
            fail("ListDevices does not list cpu: %s" % ids)
        print("ListDevices:", ids)

        rng = random.Random(7)
        x = [rng.gauss(0.0, 1.0) for _ in range(256)]
        req = inference_pb2.InferRequest(model="mlp", inputs=[tensor_pb2.Tensor(
            name="x", dtype=tensor_pb2.FLOAT32, shape=[1, 256], data=array.array("f", x).tobytes())])
        resp = stub.Infer(req, timeout=30)
        out = resp.outputs[0]
        if out.dtype != tensor_pb2.FLOAT32 or list(out.shape) != [1, 10]:
            fail("unexpected output %s %s" % (out.dtype, list(out.shape)))
        got = array.array("f", out.data)
        x32 = list(array.array("f", x))  # the float32 values the server saw
        want = mlp_reference(os.path.join(models, "mlp", "1", "model.pt"), x32)
        worst = max(abs(a - b) for a, b in zip(got, want))
        print("max |server - reference| =", worst)
        if worst > 1e-4:
            fail("server output %s differs from reference %s" % (list(got), want))
        if resp.placement.device != "cpu":
            fail("placement.device = %r" % resp.placement.device)

        try:
            stub.Infer(inference_pb2.InferRequest(model="../etc"), timeout=10)
            fail("a model name outside the repository was accepted")
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.INVALID_ARGUMENT:
                fail("expected INVALID_ARGUMENT, got %s" % e.code())
        channel.close()
        print("1 passed, 0 failed")
    finally:
        if server is not None:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
