#!/usr/bin/env python3
"""NVIDIA's tritonclient wheel and KServe's kserve SDK, from PyPI, against
infergate: the clients Triton and KServe users already have, unchanged.

The test itself runs with the build's Python (its torch computes the
reference answer); each client runs in a process of its own (tritonclient
and kserve both register the Open Inference Protocol's messages in
protobuf's default pool, and cannot share a process) with --clients-python,
a virtual environment holding the pinned wheels (tests/pypi/run.sh makes
it from tests/pypi/clients-requirements.txt).

  tritonclient.grpc   liveness, readiness, server and model metadata, the
                      model's config, infer (raw contents), async_infer, a
                      stream of requests with ids, infergate's request
                      parameters (device, precision, fallback, timing) and
                      the placement in the answer's, the repository index,
                      unload and load, statistics, an unknown model's error
  tritonclient.http   the same over REST: infer with and without the
                      binary extension, the request parameters and the
                      placement, async_infer, the repository index,
                      unload and load, an unknown model's error
  kserve              InferenceGRPCClient and InferenceRESTClient (v2):
                      readiness of server and model, infer, an unknown
                      model's error

Every answer must equal the model's own (TorchScript run by this torch)
within FP32 tolerance.
"""
import os
import sys

ROWS, FEATURES, CLASSES = 3, 256, 10


def close(got, want):
    import numpy as np
    got = np.asarray(got, dtype=np.float32).reshape(want.shape)
    return float(np.abs(got - want).max()) <= 1e-4 * max(1.0, float(np.abs(want).max()))


def triton_grpc(grpc_address, x, want):
    import numpy as np
    import tritonclient.grpc as g
    from tritonclient.utils import InferenceServerException
    c = g.InferenceServerClient(url=grpc_address)
    assert c.is_server_live() and c.is_server_ready(), "server not live and ready"
    assert c.is_model_ready("mlp"), "mlp not ready"
    meta = c.get_server_metadata()
    print("server metadata:", meta.name, meta.version, list(meta.extensions)[:6])
    mm = c.get_model_metadata("mlp")
    assert [i.name for i in mm.inputs] == ["x"] and mm.inputs[0].datatype == "FP32", mm
    assert [o.name for o in mm.outputs] == ["logits"], mm
    cfg = c.get_model_config("mlp").config
    assert cfg.max_batch_size == 64 and cfg.input[0].name == "x", cfg

    def request():
        i = g.InferInput("x", list(x.shape), "FP32")
        i.set_data_from_numpy(x)
        return [i], [g.InferRequestedOutput("logits")]
    inputs, outputs = request()
    r = c.infer("mlp", inputs, outputs=outputs, request_id="one")
    assert r.get_response().id == "one", r.get_response().id
    assert close(r.as_numpy("logits"), want), "infer answered wrong"

    import queue
    done = queue.Queue()
    c.async_infer("mlp", inputs, callback=lambda result, error: done.put((result, error)), outputs=outputs)
    result, error = done.get(timeout=60)
    assert error is None, error
    assert close(result.as_numpy("logits"), want), "async_infer answered wrong"

    streamed = queue.Queue()
    c.start_stream(callback=lambda result, error: streamed.put((result, error)))
    for k in range(4):
        c.async_stream_infer("mlp", inputs, outputs=outputs, request_id="s%d" % k)
    ids = set()
    for _ in range(4):
        result, error = streamed.get(timeout=60)
        assert error is None, error
        assert close(result.as_numpy("logits"), want), "stream answered wrong"
        ids.add(result.get_response().id)
    c.stop_stream()
    assert ids == {"s0", "s1", "s2", "s3"}, ids

    # infergate's request parameters as tritonclient sends them, and the
    # placement the answer carries in its parameters (docs/protocols.md).
    r = c.infer("mlp", inputs, outputs=outputs, parameters={"device": "cpu", "precision": "FP32", "timing": True})
    p = r.get_response().parameters
    assert p["device"].string_param == "cpu" and p["requested_device"].string_param == "cpu", p
    assert p["dtype"].string_param == "FP32" and p["batch_size"].int64_param >= 1, p
    assert close(r.as_numpy("logits"), want), "infer with parameters answered wrong"
    r = c.infer("mlp", inputs, outputs=outputs, parameters={"device": "mps"})  # never present on Linux
    p = r.get_response().parameters
    assert p["device"].string_param == "cpu" and p["fell_back"].bool_param and p["fallback_reason"].string_param, p
    for parameters, code in (({"device": "mps", "fallback": "DENY"}, "FAILED_PRECONDITION"),
                             ({"device": "tpu:0"}, "INVALID_ARGUMENT"), ({"precision": "FP8"}, "INVALID_ARGUMENT")):
        try:
            c.infer("mlp", inputs, outputs=outputs, parameters=parameters)
            raise AssertionError("%s answered" % parameters)
        except InferenceServerException as e:
            assert e.status() == "StatusCode." + code, (parameters, e.status(), e.message())

    index = c.get_model_repository_index().models
    assert any(m.name == "mlp" for m in index), index
    c.unload_model("mlp")
    assert not c.is_model_ready("mlp"), "mlp ready after unload_model"
    c.load_model("mlp")
    assert c.is_model_ready("mlp"), "mlp not ready after load_model"
    r = c.infer("mlp", inputs, outputs=outputs)
    assert close(r.as_numpy("logits"), want), "infer after load_model answered wrong"
    stats = c.get_inference_statistics("mlp").model_stats
    assert stats and stats[0].inference_stats.success.count >= 1, stats
    try:
        c.infer("no_such_model", inputs)
        raise AssertionError("an unknown model answered")
    except InferenceServerException as e:
        print("unknown model:", e.status(), e.message())
        assert "no_such_model" in e.message(), e.message()
    c.close()
    return "tritonclient.grpc: 16 calls checked"


def triton_http(http_address, x, want):
    import tritonclient.http as h
    from tritonclient.utils import InferenceServerException
    c = h.InferenceServerClient(url=http_address, concurrency=2)
    assert c.is_server_live() and c.is_server_ready(), "server not live and ready"
    assert c.is_model_ready("mlp"), "mlp not ready"
    meta = c.get_server_metadata()
    print("server metadata:", meta["name"], meta["version"])
    mm = c.get_model_metadata("mlp")
    assert [i["name"] for i in mm["inputs"]] == ["x"], mm
    cfg = c.get_model_config("mlp")
    assert cfg["max_batch_size"] == 64, cfg
    for binary in (True, False):
        i = h.InferInput("x", list(x.shape), "FP32")
        i.set_data_from_numpy(x, binary_data=binary)
        o = h.InferRequestedOutput("logits", binary_data=binary)
        r = c.infer("mlp", [i], outputs=[o], request_id="b%d" % binary)
        assert close(r.as_numpy("logits"), want), "infer (binary_data=%s) answered wrong" % binary
        assert r.get_response()["id"] == "b%d" % binary, r.get_response()
    r = c.infer("mlp", [i], outputs=[o], parameters={"device": "cpu", "precision": "FP32", "timing": True})
    p = r.get_response()["parameters"]
    assert p["device"] == "cpu" and p["requested_device"] == "cpu" and p["dtype"] == "FP32", p
    assert p["batch_size"] >= 1, p
    r = c.infer("mlp", [i], outputs=[o], parameters={"device": "mps"})
    p = r.get_response()["parameters"]
    assert p["device"] == "cpu" and p["fell_back"] is True and p["fallback_reason"], p
    for parameters, status in (({"device": "mps", "fallback": "DENY"}, "400"), ({"device": "tpu:0"}, "400")):
        try:
            c.infer("mlp", [i], outputs=[o], parameters=parameters)
            raise AssertionError("%s answered" % parameters)
        except InferenceServerException as e:
            assert e.status() == status, (parameters, e.status(), e.message())
    pending = c.async_infer("mlp", [i], outputs=[o])
    assert close(pending.get_result().as_numpy("logits"), want), "async_infer answered wrong"
    index = c.get_model_repository_index()
    assert any(m["name"] == "mlp" for m in index), index
    c.unload_model("mlp")
    assert not c.is_model_ready("mlp"), "mlp ready after unload_model"
    c.load_model("mlp")
    assert c.is_model_ready("mlp"), "mlp not ready after load_model"
    stats = c.get_inference_statistics("mlp")["model_stats"]
    assert stats and stats[0]["inference_stats"]["success"]["count"] >= 1, stats
    try:
        c.infer("no_such_model", [i])
        raise AssertionError("an unknown model answered")
    except InferenceServerException as e:
        print("unknown model:", e.status(), e.message())
        assert "no_such_model" in e.message(), e.message()
    c.close()
    return "tritonclient.http: 14 calls checked"


def kserve_clients(grpc_address, http_address, x, want):
    import asyncio
    import grpc
    import httpx
    from kserve import InferenceGRPCClient, InferenceRESTClient, InferInput, InferRequest, RESTConfig

    def request(model):
        i = InferInput(name="x", shape=list(x.shape), datatype="FP32")
        i.set_data_from_numpy(x, binary_data=False)
        return InferRequest(model_name=model, infer_inputs=[i], request_id="k1")

    async def run():
        g = InferenceGRPCClient(url=grpc_address, timeout=60, retries=2)
        assert await g.is_server_ready(), "gRPC: server not ready"
        assert await g.is_server_live(), "gRPC: server not live"
        assert await g.is_model_ready("mlp"), "gRPC: mlp not ready"
        r = await g.infer(request("mlp"))
        assert close(r.outputs[0].as_numpy(), want), "gRPC infer answered wrong"
        assert r.outputs[0].name == "logits", r.outputs[0].name
        try:
            await g.infer(request("no_such_model"))
            raise AssertionError("gRPC: an unknown model answered")
        except grpc.aio.AioRpcError as e:
            print("gRPC unknown model:", e.code(), e.details())
            assert e.code() == grpc.StatusCode.NOT_FOUND and "no_such_model" in e.details(), e
        await g.close()

        base = "http://" + http_address
        rest = InferenceRESTClient(RESTConfig(protocol="v2", timeout=60, retries=1))
        assert await rest.is_server_ready(base), "REST: server not ready"
        assert await rest.is_server_live(base), "REST: server not live"
        assert await rest.is_model_ready(base, "mlp"), "REST: mlp not ready"
        r = await rest.infer(base, request("mlp"), model_name="mlp")
        assert close(r.outputs[0].as_numpy(), want), "REST infer answered wrong"
        try:
            await rest.infer(base, request("no_such_model"), model_name="no_such_model")
            raise AssertionError("REST: an unknown model answered")
        except httpx.HTTPStatusError as e:
            print("REST unknown model:", e.response.status_code, e)
            assert e.response.status_code == 404 and "no_such_model" in str(e), e
        await rest.close()
    asyncio.run(run())
    return "kserve: InferenceGRPCClient and InferenceRESTClient, 10 calls checked"


def client_part(part, grpc_address, http_address, io_file):
    import numpy as np
    raw = np.fromfile(io_file, dtype=np.float32)
    x = raw[:ROWS * FEATURES].reshape(ROWS, FEATURES)
    want = raw[ROWS * FEATURES:].reshape(ROWS, CLASSES)
    if part == "triton-grpc":
        print(triton_grpc(grpc_address, x, want))
    elif part == "triton-http":
        print(triton_http(http_address, x, want))
    elif part == "kserve":
        print(kserve_clients(grpc_address, http_address, x, want))
    else:
        sys.exit("unknown part " + part)


def main():
    import shutil
    import subprocess
    import tempfile
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from igtest import Server, make_demo_models, generate_stubs, required_arguments
    import torch
    args = required_arguments("--server", "--make-models", "--clients-python", "--proto-dir")
    work = tempfile.mkdtemp(prefix="ig_real_clients_")
    failures = []
    server = None
    try:
        generate_stubs(args.proto_dir, os.path.join(work, "stubs"))
        models = os.path.join(work, "models")
        make_demo_models(args.make_models, models, test_models=False)
        server = Server(args.server, ["--model-repository=" + models, "--open-admin-api"],
                        os.path.join(work, "server.log"))
        server.wait_serving()
        x = torch.randn(ROWS, FEATURES, generator=torch.Generator().manual_seed(5))
        with torch.inference_mode():
            want = torch.jit.load(os.path.join(models, "mlp", "1", "model.pt")).eval()(x)
        io_file = os.path.join(work, "mlp.io")
        with open(io_file, "wb") as f:
            f.write(x.numpy().tobytes() + want.numpy().tobytes())
        versions = subprocess.run([args.clients_python, "-c",
                                   "import importlib.metadata as m; print('tritonclient', m.version('tritonclient'),"
                                   " 'kserve', m.version('kserve'), 'grpcio', m.version('grpcio'))"],
                                  capture_output=True, text=True)
        print(versions.stdout.strip() or versions.stderr.strip())
        for part in ["triton-grpc", "triton-http", "kserve"]:
            run = subprocess.run([args.clients_python, os.path.abspath(__file__), "--part", part, server.address,
                                  server.http_address, io_file], capture_output=True, text=True, timeout=300)
            print("--- %s (exit %d)\n%s%s" % (part, run.returncode, run.stdout, run.stderr[-3000:]))
            if run.returncode != 0:
                failures.append("%s failed: %s" % (part, (run.stderr.strip().splitlines() or ["?"])[-1]))
    finally:
        if server is not None:
            server.stop_noting(failures)
        shutil.rmtree(work, ignore_errors=True)
    if failures:
        for f in failures:
            print("FAIL: " + f)
        sys.exit(1)
    print("real clients: tritonclient (gRPC, HTTP) and kserve (gRPC, REST) served right")


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "--part":
        client_part(*sys.argv[2:])
    else:
        main()
