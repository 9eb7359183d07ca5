#!/usr/bin/env python3
"""A client generated from proto/ in another language (Python) calls the real
server: ListDevices lists the cpu, and Infer on mlp agrees with the model's
own weights, read straight out of model.pt and applied in pure Python.

Uses Debian's python3-grpcio and python3-protobuf, and grpc_python_plugin
from protobuf-compiler-grpc to generate the stubs at test time.
"""
import array
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from igtest import Server, make_demo_models, fail, generate_stubs, required_arguments  # noqa: E402


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
    args = required_arguments("--server", "--make-models", "--proto-dir")

    work = tempfile.mkdtemp(prefix="ig_py_")
    server = None
    try:
        models = os.path.join(work, "models")
        make_demo_models(args.make_models, models, test_models=False)
        generate_stubs(args.proto_dir, os.path.join(work, "stubs"))
        import grpc
        from infergate.v1 import inference_pb2, inference_pb2_grpc, tensor_pb2

        server = Server(args.server, ["--model-repository=" + models], os.path.join(work, "server.log"))
        server.wait_serving()
        channel = grpc.insecure_channel(server.address)
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
            server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
