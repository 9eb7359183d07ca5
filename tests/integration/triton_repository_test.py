#!/usr/bin/env python3
"""A model repository written for Triton's PyTorch backend, served as it is.

Each model's config.pbtxt is written the way Triton's documentation shows
them: `platform: "pytorch_libtorch"` or `backend: "pytorch"`, `input [ ... ]`
with TYPE_* datatypes, positional INPUT__0 / OUTPUT__0 names or forward()'s
own argument names, instance groups, dynamic batching, version policies and
backend parameters. Each model's answers must equal the same model file's
answers under infergate's own config, over infergate.v1, the Open Inference
Protocol's gRPC and its REST form. Configs with fields infergate does not
serve must be refused, naming the field.

Uses Debian's python3-grpcio and python3-protobuf.
"""
import http.client
import json
import os
import shutil
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from igtest import Server, check, checks_made, fail, open_inference_setup  # noqa: E402

# Triton-style configs for the demo models' files: (new model, file of, config).
TRITON_MODELS = [
    ("mlp_triton", "mlp", """
name: "mlp_triton"
platform: "pytorch_libtorch"
max_batch_size: 64
input [
  {
    name: "INPUT__0"
    data_type: TYPE_FP32
    dims: [ 256 ]
  }
]
output [
  {
    name: "OUTPUT__0"
    data_type: TYPE_FP32
    dims: [ 10 ]
  }
]
instance_group [ { count: 2, kind: KIND_CPU }, { count: 2, kind: KIND_GPU } ]
dynamic_batching {
  max_queue_delay_microseconds: 100
  default_queue_policy { timeout_action: REJECT default_timeout_microseconds: 30000000 max_queue_size: 512 }
}
"""),
    ("pair_triton", "pair", """
backend: "pytorch"
max_batch_size: 0
input [
  { name: "INPUT__0", data_type: TYPE_FP32, dims: [ -1, 3 ] },
  { name: "INPUT__1", data_type: TYPE_FP32, dims: [ -1, 3 ] }
]
output [
  { name: "sum", data_type: TYPE_FP32, dims: [ -1, 3 ] },
  { name: "argmax", data_type: TYPE_INT64, dims: [ -1 ] }
]
"""),
    ("poly_triton", "poly64", """
# forward()'s own argument name, single blocks, a version policy and
# the backend parameter Triton's examples set.
name: "poly_triton"
platform: "pytorch_libtorch"
max_batch_size: 16
input { name: "x" data_type: TYPE_FP64 dims: [ 4 ] }
output { name: "OUTPUT__0" data_type: TYPE_FP64 dims: [ 3 ] }
version_policy: { all { } }
parameters: { key: "INFERENCE_MODE" value: { string_value: "true" } }
"""),
    ("embed_triton", "embed", """
name: "embed_triton"
platform: "pytorch_libtorch"
default_model_filename: "model.pt"
max_batch_size: 16
input [ { name: "INPUT__0" data_type: TYPE_INT64 dims: [ 8 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 16 ] } ]
instance_group [ { kind: KIND_AUTO } ]
dynamic_batching {
  preferred_batch_size: [ 4, 8 ]
  max_queue_delay_microseconds: 500
}
model_warmup [ { name: "zeros" batch_size: 1
                 inputs { key: "INPUT__0" value: { data_type: TYPE_INT64 dims: [ 8 ] zero_data: true } } } ]
"""),
]

# Triton's warm-up samples, run before the model serves: a row from a file
# in the model's warmup/ folder (256 floats), twice, at a batch of 2, then
# random data; and a file that is not a row's size, which fails the load.
WARMUP = """
platform: "pytorch_libtorch"
max_batch_size: 8
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 256 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 10 ] } ]
model_warmup [
  { name: "row" batch_size: 2 count: 2
    inputs { key: "INPUT__0" value: { data_type: TYPE_FP32 dims: [ 256 ] input_data_file: "row.bin" } } },
  { name: "random" batch_size: 1
    inputs { key: "INPUT__0" value: { data_type: TYPE_FP32 dims: [ 256 ] random_data: true } } }
]
"""
TRITON_MODELS.append(("warm_triton", "mlp", WARMUP))
WARMUP_FILES = {"warm_triton": struct.pack("<256f", *([0.5] * 256)), "badwarm_triton": b"\0" * 100}

# Triton's reshape: clients send [N, 16, 16] and read [N, 2, 5]; the mlp's
# file takes [N, 256] and gives [N, 10]. The format is echoed.
TRITON_MODELS.append(("reshaped_triton", "mlp", """
name: "reshaped_triton"
platform: "pytorch_libtorch"
max_batch_size: 8
input [ { name: "INPUT__0" data_type: TYPE_FP32 format: FORMAT_NCHW dims: [ 1, 16, 16 ]
          reshape { shape: [ 256 ] } } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 2, 5 ] reshape { shape: [ 10 ] } } ]
"""))

REFUSED = [
    ("seq_triton", "mlp", 'platform: "pytorch_libtorch"\nmax_batch_size: 8\n'
                          'sequence_batching { max_sequence_idle_microseconds: 5000000 }\n', "sequence_batching"),
    ("onnx_triton", "mlp", 'platform: "onnxruntime_onnx"\nmax_batch_size: 8\n', "platform"),
    ("ensemble_triton", "mlp", 'platform: "ensemble"\nmax_batch_size: 8\n', "platform"),
    ("decoupled_triton", "mlp", 'backend: "pytorch"\nmodel_transaction_policy { decoupled: true }\n',
     "model_transaction_policy"),
    ("reshape_triton", "mlp", 'platform: "pytorch_libtorch"\nmax_batch_size: 8\ninput [ { name: "INPUT__0" '
                              'data_type: TYPE_FP32 dims: [ 256 ] reshape: { shape: [ 16, 15 ] } } ]\n',
     "model input 'INPUT__0' has different size for dims and reshape"),
    ("count_triton", "mlp", 'platform: "pytorch_libtorch"\ninstance_group [ { count: 65 kind: KIND_GPU } ]\n',
     "instance_group[0].count"),
]


def f32(values):
    return struct.pack("<%df" % len(values), *values)


def main():
    args, work, models = open_inference_setup("ig_tritonrepo_")
    server = None
    try:
        import grpc
        import grpc_service_pb2 as pb
        import grpc_service_pb2_grpc as pb_grpc
        from infergate.v1 import inference_pb2 as v1
        from infergate.v1 import inference_pb2_grpc as v1_grpc

        for name, source, config in TRITON_MODELS + [(n, s, c) for n, s, c, _ in REFUSED] + \
                [("badwarm_triton", "mlp", WARMUP)]:
            os.makedirs(os.path.join(models, name, "1"))
            shutil.copy(os.path.join(models, source, "1", "model.pt"), os.path.join(models, name, "1", "model.pt"))
            open(os.path.join(models, name, "config.pbtxt"), "w").write(config)
        for name, data in WARMUP_FILES.items():
            os.makedirs(os.path.join(models, name, "warmup"))
            open(os.path.join(models, name, "warmup", "row.bin"), "wb").write(data)

        server = Server(args.server, ["--model-repository=" + models], os.path.join(work, "server.log"))
        server.wait_serving()
        channel = grpc.insecure_channel(server.address)
        stub = pb_grpc.GRPCInferenceServiceStub(channel)
        v1stub = v1_grpc.InferenceServiceStub(channel)
        host, port = server.http_address.rsplit(":", 1)
        rest = http.client.HTTPConnection(host, int(port), timeout=60)

        def rest_infer(model, inputs):
            rest.request("POST", "/v2/models/%s/infer" % model, json.dumps({"inputs": inputs}))
            r = rest.getresponse()
            body = r.read()
            check(r.status == 200, "REST %s: %d %r" % (model, r.status, body[:300]))
            return {o["name"]: o["data"] for o in json.loads(body)["outputs"]}

        def grpc_infer(model, inputs):
            req = pb.ModelInferRequest(model_name=model)
            for name, datatype, shape, raw in inputs:
                req.inputs.add(name=name, datatype=datatype, shape=shape)
                req.raw_input_contents.append(raw)
            r = stub.ModelInfer(req, timeout=60)
            return [(o.name, o.datatype, list(o.shape), r.raw_output_contents[i]) for i, o in enumerate(r.outputs)]

        def v1_infer(model, inputs):
            req = v1.InferRequest(model=model)
            for name, dtype, shape, raw in inputs:
                req.inputs.add(name=name, dtype=dtype, shape=shape, data=raw)
            r = v1stub.Infer(req, timeout=60)
            return [(o.name, list(o.shape), o.data) for o in r.outputs]

        # --- every Triton-style model is ready, with Triton's names in its metadata
        for name, source, _ in TRITON_MODELS:
            check(stub.ModelReady(pb.ModelReadyRequest(name=name)).ready, "%s not ready" % name)
        meta = stub.ModelMetadata(pb.ModelMetadataRequest(name="mlp_triton"))
        check([t.name for t in meta.inputs] == ["INPUT__0"] and [t.name for t in meta.outputs] == ["OUTPUT__0"],
              "mlp_triton metadata: %s" % meta)
        config = stub.ModelConfig(pb.ModelConfigRequest(name="embed_triton")).config
        check(config.max_batch_size == 16 and list(config.dynamic_batching.preferred_batch_size) == [4, 8] and
              config.dynamic_batching.max_queue_delay_microseconds == 500, "embed_triton config: %s" % config)
        # ModelConfig answers with the fields as written for Triton.
        check(config.platform == "pytorch_libtorch" and config.default_model_filename == "model.pt" and
              len(config.instance_group) == 1 and config.instance_group[0].kind == 0 and
              [w.name for w in config.model_warmup] == ["zeros"] and config.model_warmup[0].batch_size == 1 and
              [t.name for t in config.input] == ["INPUT__0"] and config.input[0].data_type == 9 and
              list(config.input[0].dims) == [8], "embed_triton config as written: %s" % config)
        config = stub.ModelConfig(pb.ModelConfigRequest(name="mlp_triton")).config
        policy = config.dynamic_batching.default_queue_policy
        check(policy.default_timeout_microseconds == 30000000 and policy.max_queue_size == 512 and
              [(g.kind, g.count) for g in config.instance_group] == [(2, 2), (1, 2)],
              "mlp_triton config as written: %s" % config)
        config = stub.ModelConfig(pb.ModelConfigRequest(name="poly_triton")).config
        check(config.name == "poly_triton" and config.version_policy.HasField("all") and
              config.parameters["INFERENCE_MODE"].string_value == "true" and not config.backend and
              not config.HasField("dynamic_batching"), "poly_triton config as written: %s" % config)
        config = stub.ModelConfig(pb.ModelConfigRequest(name="pair_triton")).config
        check(config.backend == "pytorch" and not config.platform and config.max_batch_size == 0 and
              [t.name for t in config.input] == ["INPUT__0", "INPUT__1"] and list(config.input[1].dims) == [-1, 3],
              "pair_triton config as written: %s" % config)

        config = stub.ModelConfig(pb.ModelConfigRequest(name="reshaped_triton")).config
        check(config.input[0].format == 2 and list(config.input[0].reshape.shape) == [256] and
              list(config.output[0].reshape.shape) == [10], "reshaped_triton config as written: %s" % config)

        # --- each answers as its twin under infergate's own config, on every protocol
        rows = [[((i * 7 + r) % 13) / 6.0 - 1.0 for i in range(256)] for r in range(3)]
        x = f32([v for row in rows for v in row])
        twin = grpc_infer("mlp", [("x", "FP32", [3, 256], x)])
        got = grpc_infer("mlp_triton", [("INPUT__0", "FP32", [3, 256], x)])
        check(got[0][0] == "OUTPUT__0" and got[0][3] == twin[0][3], "mlp_triton gRPC answer differs")
        check(v1_infer("mlp_triton", [("INPUT__0", 1, [3, 256], x)])[0][2] == twin[0][3], "mlp_triton v1 differs")
        rest_got = rest_infer("mlp_triton", [{"name": "INPUT__0", "datatype": "FP32", "shape": [3, 256],
                                              "data": [v for row in rows for v in row]}])
        check(f32(rest_got["OUTPUT__0"]) == twin[0][3], "mlp_triton REST differs")

        # Reshaped both ways: the same numbers, in the shapes each side speaks.
        got = grpc_infer("reshaped_triton", [("INPUT__0", "FP32", [3, 1, 16, 16], x)])
        check(got[0][2] == [3, 2, 5] and got[0][3] == twin[0][3],
              "reshaped_triton: %s %r vs the mlp's [3, 10] %r" % (got[0][:3], got[0][3][:16], twin[0][3][:16]))
        rest_got = rest_infer("reshaped_triton", [{"name": "INPUT__0", "datatype": "FP32", "shape": [3, 1, 16, 16],
                                                   "data": [v for row in rows for v in row]}])
        check(f32(rest_got["OUTPUT__0"]) == twin[0][3], "reshaped_triton REST differs")

        a = f32([1, 5, 2, 0, 0, 3])
        b = f32([1, 1, 1, 2, 2, 2])
        twin = {n: raw for n, _, _, raw in grpc_infer("pair", [("a", "FP32", [2, 3], a), ("b", "FP32", [2, 3], b)])}
        got = {n: raw for n, _, _, raw in
               grpc_infer("pair_triton", [("INPUT__0", "FP32", [2, 3], a), ("INPUT__1", "FP32", [2, 3], b)])}
        check(got.keys() == {"sum", "argmax"} and got["sum"] == twin["sum"] and got["argmax"] == twin["argmax"],
              "pair_triton answers differ: %s vs %s" % (got, twin))
        # The positions matter: swapping the inputs changes the argmax.
        swapped = {n: raw for n, _, _, raw in
                   grpc_infer("pair_triton", [("INPUT__0", "FP32", [2, 3], b), ("INPUT__1", "FP32", [2, 3], a)])}
        check(swapped["argmax"] != got["argmax"], "INPUT__1 did not fill forward()'s second argument")

        p = struct.pack("<8d", *[0.5, -1.0, 2.0, 0.25, 1.0, 1.0, -2.0, 3.0])
        twin = grpc_infer("poly64", [("x", "FP64", [2, 4], p)])
        got = grpc_infer("poly_triton", [("x", "FP64", [2, 4], p)])
        check(got[0][1] == "FP64" and got[0][3] == twin[0][3], "poly_triton answer differs: %s vs %s" % (got, twin))

        ids = struct.pack("<16q", *range(16))
        twin = grpc_infer("embed", [("ids", "INT64", [2, 8], ids)])
        got = grpc_infer("embed_triton", [("INPUT__0", "INT64", [2, 8], ids)])
        check(got[0][3] == twin[0][3], "embed_triton answer differs")
        rest_got = rest_infer("embed_triton", [{"name": "INPUT__0", "datatype": "INT64", "shape": [2, 8],
                                                "data": list(range(16))}])
        check(f32(rest_got["OUTPUT__0"]) == twin[0][3], "embed_triton REST differs")

        # --- configs with what infergate does not serve: refused, naming the field
        index = {m.name: (m.state, m.reason) for m in stub.RepositoryIndex(pb.RepositoryIndexRequest()).models}
        for name, _, _, field in REFUSED:
            state, reason = index.get(name, ("", ""))
            check(state == "UNAVAILABLE" and field in reason and "config.pbtxt" in reason,
                  "%s: %s %r should name %s" % (name, state, reason, field))
            check(not stub.ModelReady(pb.ModelReadyRequest(name=name)).ready, "%s is ready" % name)

        # --- warm-up samples: run before serving (the log says so), echoed as
        # written; a sample that cannot be made fails the load, naming it.
        log = open(os.path.join(work, "server.log")).read()
        check("warm-up of model 'warm_triton'" in log, "warm_triton's warm-up did not run:\n" + log[-2000:])
        config = stub.ModelConfig(pb.ModelConfigRequest(name="warm_triton")).config
        check([(w.name, w.batch_size, w.count) for w in config.model_warmup] == [("row", 2, 2), ("random", 1, 0)] and
              config.model_warmup[0].inputs["INPUT__0"].input_data_file == "row.bin",
              "warm_triton config as written: %s" % config)
        check(stub.ModelReady(pb.ModelReadyRequest(name="warm_triton")).ready, "warm_triton not ready")
        state, reason = index.get("badwarm_triton", ("", ""))
        check(state == "UNAVAILABLE" and "failed to load" in reason and "warmup_samples[0]" in reason and
              "holds 100 bytes; one row of FLOAT32 [256] is 1024" in reason, "badwarm_triton: %s %r" % (state, reason))
        check(not stub.ModelReady(pb.ModelReadyRequest(name="badwarm_triton")).ready, "badwarm_triton is ready")

        channel.close()
        check(server.stop() == 0, "server exit code")
        print("PASS: %d checks" % checks_made())
    finally:
        if server is not None and server.proc.poll() is None:
            server.proc.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
