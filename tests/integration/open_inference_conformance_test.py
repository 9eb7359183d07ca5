#!/usr/bin/env python3
"""Open Inference Protocol conformance: a client compiled from Triton's own
protocol definitions (tests/integration/open_inference_reference/, not the
project's proto) does what tritonclient and perf_analyzer do against the real
server, and its answers are compared with infergate.v1's bit for bit.

Uses Debian's python3-grpcio and python3-protobuf, with stubs generated at
test time by protoc and grpc_python_plugin.
"""
import os
import random
import shutil
import struct
import sys
import time
import threading
import queue

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from igtest import Server, check, checks_made, expect_error, fail, open_inference_setup  # noqa: E402

def floats(n, seed):
    rng = random.Random(seed)
    return [rng.uniform(-1, 1) for _ in range(n)]


def f32_bytes(values):
    return struct.pack("<%df" % len(values), *values)


def main():
    args, work, models = open_inference_setup("ig_oip_")
    servers = []
    try:
        import grpc
        import grpc_service_pb2 as pb
        import grpc_service_pb2_grpc as pb_grpc
        import model_config_pb2 as mc
        from infergate.v1 import inference_pb2 as v1
        from infergate.v1 import inference_pb2_grpc as v1_grpc
        from infergate.v1 import tensor_pb2 as v1t

        server = Server(args.server, ["--model-repository=" + models, "--simulate-devices=mps,cuda:0"],
                        os.path.join(work, "server.log"))
        servers.append(server)
        server.wait_serving()
        channel = grpc.insecure_channel(server.address)
        stub = pb_grpc.GRPCInferenceServiceStub(channel)
        v1stub = v1_grpc.InferenceServiceStub(channel)

        # --- health and the perf_analyzer start-up sequence
        check(stub.ServerLive(pb.ServerLiveRequest()).live, "ServerLive")
        check(stub.ServerReady(pb.ServerReadyRequest()).ready, "ServerReady")
        meta = stub.ServerMetadata(pb.ServerMetadataRequest())
        check(meta.name == "infergate" and meta.version, "ServerMetadata name/version: %s" % meta)
        check("statistics" in meta.extensions and "model_repository" in meta.extensions,
              "extensions: %s" % list(meta.extensions))
        for ext in meta.extensions:
            check(ext in ("model_repository", "model_configuration", "statistics", "parameters", "classification",
                           "logging", "trace"),
                  "extension %s is listed but not implemented" % ext)
        mm = stub.ModelMetadata(pb.ModelMetadataRequest(name="mlp"))
        check(mm.platform == "pytorch_libtorch", "platform %s" % mm.platform)
        check(list(mm.versions) == ["1"], "versions %s" % list(mm.versions))
        check([(t.name, t.datatype, list(t.shape)) for t in mm.inputs] == [("x", "FP32", [-1, 256])],
              "inputs %s" % mm.inputs)
        check([(t.name, t.datatype, list(t.shape)) for t in mm.outputs] == [("logits", "FP32", [-1, 10])],
              "outputs %s" % mm.outputs)
        vm = stub.ModelMetadata(pb.ModelMetadataRequest(name="versioned"))
        check(list(vm.versions) == ["1", "2"], "versioned versions %s" % list(vm.versions))
        cfg = stub.ModelConfig(pb.ModelConfigRequest(name="mlp")).config
        check(cfg.name == "mlp" and cfg.platform == "pytorch_libtorch" and cfg.max_batch_size == 64, "config %s" % cfg)
        check(cfg.input[0].name == "x" and cfg.input[0].data_type == mc.TYPE_FP32 and list(cfg.input[0].dims) == [256],
              "config input %s" % cfg.input)
        check(cfg.output[0].data_type == mc.TYPE_FP32 and list(cfg.output[0].dims) == [10], "config output")
        check(cfg.HasField("dynamic_batching"), "dynamic_batching missing")
        kinds = {g.kind for g in cfg.instance_group}
        check(mc.ModelInstanceGroup.KIND_CPU in kinds and mc.ModelInstanceGroup.KIND_GPU in kinds,
              "instance groups %s" % cfg.instance_group)
        check(stub.ModelReady(pb.ModelReadyRequest(name="mlp")).ready, "mlp not ready")
        check(not stub.ModelReady(pb.ModelReadyRequest(name="nosuch")).ready, "unknown model ready")
        check(not stub.ModelReady(pb.ModelReadyRequest(name="badconfig")).ready, "broken model ready")
        expect_error(lambda: stub.ModelMetadata(pb.ModelMetadataRequest(name="nosuch")), grpc.StatusCode.NOT_FOUND,
                     "nosuch")

        # --- inference, raw and typed, against infergate.v1 bit for bit
        def v1_infer(model, name, dtype, shape, data, **kw):
            req = v1.InferRequest(model=model, device="cpu",
                                  inputs=[v1t.Tensor(name=name, dtype=dtype, shape=shape, data=data)], **kw)
            return v1stub.Infer(req)

        def v2_raw(model, name, datatype, shape, data, **kw):
            req = pb.ModelInferRequest(model_name=model, id="r1",
                                       inputs=[pb.ModelInferRequest.InferInputTensor(name=name, datatype=datatype,
                                                                                    shape=shape)],
                                       raw_input_contents=[data], **kw)
            req.parameters["triton_enable_empty_final_response"].bool_param = False  # clients send it; ignored
            req.parameters["device"].string_param = "cpu"  # bit-for-bit comparisons are on the CPU
            return stub.ModelInfer(req)

        x = floats(2 * 256, 1)
        a = v1_infer("mlp", "x", v1t.FLOAT32, [2, 256], f32_bytes(x))
        b = v2_raw("mlp", "x", "FP32", [2, 256], f32_bytes(x))
        check(b.id == "r1" and b.model_name == "mlp" and b.model_version == "1", "response header %s" % b)
        check(len(b.outputs) == 1 and len(b.raw_output_contents) == 1, "one output, raw")
        check(b.outputs[0].name == "logits" and b.outputs[0].datatype == "FP32" and list(b.outputs[0].shape) == [2, 10],
              "output %s" % b.outputs[0])
        check(b.raw_output_contents[0] == a.outputs[0].data, "v2 raw answer differs from v1")
        typed = pb.ModelInferRequest(model_name="mlp", inputs=[pb.ModelInferRequest.InferInputTensor(
            name="x", datatype="FP32", shape=[2, 256], contents=pb.InferTensorContents(
                fp32_contents=struct.unpack("<512f", f32_bytes(x))))])
        typed.parameters["device"].string_param = "cpu"
        c = stub.ModelInfer(typed)
        check(c.raw_output_contents[0] == a.outputs[0].data, "v2 typed answer differs from v1")
        # The placement comes back as parameters: where and in what dtype it
        # ran, the device asked for, and nothing that restates a default.
        p = b.parameters
        check(sorted(p.keys()) == ["device", "dtype", "requested_device"], "placement %s" % p)
        check(p["device"].string_param == "cpu" and p["requested_device"].string_param == "cpu" and
              p["dtype"].string_param == "FP32", "placement %s" % p)
        # The timings come when asked for; under auto, on this server with
        # accelerators, the ready path the request took and its estimate too.
        timed = pb.ModelInferRequest(model_name="mlp", inputs=[pb.ModelInferRequest.InferInputTensor(
            name="x", datatype="FP32", shape=[2, 256])], raw_input_contents=[f32_bytes(x)])
        timed.parameters["timing"].bool_param = True
        p = stub.ModelInfer(timed).parameters
        check(sorted(p.keys()) == ["batch_size", "compute_us", "device", "dtype", "queue_us", "ready_path",
                                   "ready_path_expected_us"] and
              p["batch_size"].int64_param >= 2 and p["compute_us"].int64_param > 0 and
              p["ready_path"].string_param in ("ideal", "resident", "load_and_run", "cold_start") and
              p["ready_path_expected_us"].int64_param > 0, "timed placement %s" % p)
        timed.parameters["timing"].string_param = "yes"
        try:
            stub.ModelInfer(timed)
            fail("timing: 'yes' was accepted")
        except grpc.RpcError as e:
            check(e.code() == grpc.StatusCode.INVALID_ARGUMENT and "parameters.timing" in e.details(),
                  "timing 'yes': %s %s" % (e.code(), e.details()))

        # FP16 and BF16 travel raw; the server answers as v1 does for the same
        # bytes. `pair` declares no inputs, so it takes any floating dtype.
        def pair_both(datatype, v1_dtype, a_bytes, b_bytes, outputs=()):
            req = pb.ModelInferRequest(model_name="pair", inputs=[
                pb.ModelInferRequest.InferInputTensor(name="a", datatype=datatype, shape=[2, 4]),
                pb.ModelInferRequest.InferInputTensor(name="b", datatype=datatype, shape=[2, 4])],
                raw_input_contents=[a_bytes, b_bytes],
                outputs=[pb.ModelInferRequest.InferRequestedOutputTensor(name=o) for o in outputs])
            req.parameters["device"].string_param = "cpu"
            two = v1stub.Infer(v1.InferRequest(model="pair", device="cpu", inputs=[
                v1t.Tensor(name="a", dtype=v1_dtype, shape=[2, 4], data=a_bytes),
                v1t.Tensor(name="b", dtype=v1_dtype, shape=[2, 4], data=b_bytes)]))
            return stub.ModelInfer(req), two

        for datatype, v1_dtype, pack in (("FP16", v1t.FLOAT16, lambda v: struct.pack("<8e", *v)),
                                         ("BF16", v1t.BFLOAT16, lambda v: b"".join(f32_bytes([e])[2:4] for e in v))):
            got, want = pair_both(datatype, v1_dtype, pack(floats(8, 4)), pack(floats(8, 5)))
            check([o.name for o in got.outputs] == [o.name for o in want.outputs], "%s output names" % datatype)
            check(list(got.raw_output_contents) == [o.data for o in want.outputs], "%s differs from v1" % datatype)
        got, want = pair_both("FP32", v1t.FLOAT32, f32_bytes(floats(8, 6)), f32_bytes(floats(8, 7)), ["argmax"])
        check([o.name for o in got.outputs] == ["argmax"] and got.outputs[0].datatype == "INT64",
              "requested subset %s" % got.outputs)
        check(got.raw_output_contents[0] == [o.data for o in want.outputs if o.name == "argmax"][0], "argmax differs")
        d = struct.pack("<8d", *floats(8, 2))
        r = v2_raw("poly64", "x", "FP64", [2, 4], d)
        check(r.outputs[0].datatype == "FP64" and r.raw_output_contents[0] ==
              v1_infer("poly64", "x", v1t.FLOAT64, [2, 4], d).outputs[0].data, "FP64 differs from v1")
        ids = struct.pack("<16q", *[random.Random(3).randrange(0, 100) for _ in range(16)])
        r = v2_raw("embed", "ids", "INT64", [2, 8], ids)
        check(r.raw_output_contents[0] == v1_infer("embed", "ids", v1t.INT64, [2, 8], ids).outputs[0].data,
              "INT64 differs from v1")
        typed_ids = stub.ModelInfer(pb.ModelInferRequest(model_name="embed", inputs=[
            pb.ModelInferRequest.InferInputTensor(name="ids", datatype="INT64", shape=[2, 8],
                                                  contents=pb.InferTensorContents(
                                                      int64_contents=struct.unpack("<16q", ids)))],
            parameters={"device": pb.InferParameter(string_param="cpu")}))
        check(typed_ids.raw_output_contents[0] == r.raw_output_contents[0], "typed INT64 differs from raw")

        # Requested outputs: a named subset; an unknown name is refused.
        sub = pb.ModelInferRequest(model_name="mlp", inputs=[pb.ModelInferRequest.InferInputTensor(
            name="x", datatype="FP32", shape=[1, 256])], raw_input_contents=[f32_bytes(x[:256])],
            outputs=[pb.ModelInferRequest.InferRequestedOutputTensor(name="logits")])
        check(stub.ModelInfer(sub).outputs[0].name == "logits", "requested output")
        sub.outputs[0].name = "probabilities"
        expect_error(lambda: stub.ModelInfer(sub), grpc.StatusCode.INVALID_ARGUMENT, "outputs[0].name", "probabilities")

        # --- errors name the field at fault
        IA = grpc.StatusCode.INVALID_ARGUMENT
        expect_error(lambda: v2_raw("mlp", "x", "FP32", [1, 255], f32_bytes(x[:255])), IA, "inputs[0]")
        expect_error(lambda: v2_raw("mlp", "x", "FP32", [1, 256], f32_bytes(x[:200])), IA, "raw_input_contents[0]")
        expect_error(lambda: v2_raw("mlp", "x", "BYTES", [1], b"\x01\x00\x00\x00a"), IA, "inputs[0].dtype", "BYTES")
        expect_error(lambda: v2_raw("mlp", "x", "UINT64", [1, 256], b"\0" * 2048), IA, "inputs[0].datatype")
        both = pb.ModelInferRequest(model_name="mlp", inputs=[pb.ModelInferRequest.InferInputTensor(
            name="x", datatype="FP32", shape=[1, 256], contents=pb.InferTensorContents(fp32_contents=x[:256]))],
            raw_input_contents=[f32_bytes(x[:256])])
        expect_error(lambda: stub.ModelInfer(both), IA, "inputs[0].contents")
        expect_error(lambda: v2_raw("nosuch", "x", "FP32", [1], f32_bytes([1.0])), grpc.StatusCode.NOT_FOUND, "nosuch")
        half_typed = pb.ModelInferRequest(model_name="mlp", inputs=[pb.ModelInferRequest.InferInputTensor(
            name="x", datatype="FP16", shape=[1, 256], contents=pb.InferTensorContents(fp32_contents=x[:256]))])
        expect_error(lambda: stub.ModelInfer(half_typed), IA, "inputs[0].contents", "FP16")

        # --- device, precision and fallback parameters
        def with_params(**params):
            req = pb.ModelInferRequest(model_name="mlp", inputs=[pb.ModelInferRequest.InferInputTensor(
                name="x", datatype="FP32", shape=[1, 256])], raw_input_contents=[f32_bytes(x[:256])])
            for k, v in params.items():
                req.parameters[k].string_param = v
            return req

        r = stub.ModelInfer(with_params(device="cuda:7"))
        check(r.parameters["fell_back"].bool_param and r.parameters["device"].string_param == "cpu" and
              r.parameters["fallback_reason"].string_param == "device_unavailable:cuda:7", "fallback %s" % r.parameters)
        expect_error(lambda: stub.ModelInfer(with_params(device="cuda:7", fallback="DENY")),
                     grpc.StatusCode.FAILED_PRECONDITION, "cuda:7")
        # FP16 serves once its accuracy check passed; until then (a request
        # never waits for it) a verified dtype serves and says why.
        deadline = time.time() + 60
        r = stub.ModelInfer(with_params(device="cuda:0", precision="FP16"))
        def unverified(r):
            return "precision_reason" in r.parameters and \
                r.parameters["precision_reason"].string_param == "unverified:float16"

        while unverified(r) and time.time() < deadline:
            check(r.parameters["dtype"].string_param != "FP16", "unverified FP16 ran: %s" % r.parameters)
            time.sleep(0.05)
            r = stub.ModelInfer(with_params(device="cuda:0", precision="FP16"))
        check(r.parameters["device"].string_param == "cuda:0" and r.parameters["dtype"].string_param == "FP16" and
              "precision_reason" not in r.parameters and
              r.parameters["requested_device"].string_param == "cuda:0", "cuda fp16 %s" % r.parameters)
        expect_error(lambda: stub.ModelInfer(with_params(device="tpu")), IA, "device")
        expect_error(lambda: stub.ModelInfer(with_params(precision="FP8")), IA, "parameters.precision")
        bad_type = with_params()
        bad_type.parameters["device"].int64_param = 3
        expect_error(lambda: stub.ModelInfer(bad_type), IA, "parameters.device")

        # --- statistics: deltas after N requests
        def stats():
            s = stub.ModelStatistics(pb.ModelStatisticsRequest(name="mlp", version="1")).model_stats
            check(len(s) == 1 and s[0].name == "mlp" and s[0].version == "1", "stats entry %s" % s)
            return s[0]

        before = stats()
        n = 6
        for i in range(n):
            v2_raw("mlp", "x", "FP32", [1, 256], f32_bytes(floats(256, 100 + i)))
        expect_error(lambda: v2_raw("mlp", "x", "FP32", [1, 256], f32_bytes(x[:256]),
                                    model_version="9"), grpc.StatusCode.NOT_FOUND)
        after = stats()
        st, bt = after.inference_stats, before.inference_stats
        check(st.success.count - bt.success.count == n, "success delta %d" % (st.success.count - bt.success.count))
        check(st.success.ns > bt.success.ns and st.compute_infer.ns > bt.compute_infer.ns, "durations grew")
        check(st.queue.count - bt.queue.count == n, "queue count delta")
        check(after.inference_count - before.inference_count == n, "inference_count delta")
        check(1 <= after.execution_count - before.execution_count <= n, "execution_count delta")
        check(after.last_inference > 0, "last_inference")
        check(any(b.batch_size == 1 and b.compute_infer.count > 0 for b in after.batch_stats), "batch_stats")
        all_stats = stub.ModelStatistics(pb.ModelStatisticsRequest()).model_stats
        check({"mlp", "cnn", "versioned"} <= {s.name for s in all_stats}, "every model listed")
        expect_error(lambda: stub.ModelStatistics(pb.ModelStatisticsRequest(name="nosuch")), grpc.StatusCode.NOT_FOUND)

        # --- a stream: many in flight, an in-band error in the middle, ids echoed
        requests = []
        for i in range(12):
            model = "nosuch" if i == 5 else "mlp"
            requests.append(pb.ModelInferRequest(model_name=model, id="s%d" % i, inputs=[
                pb.ModelInferRequest.InferInputTensor(name="x", datatype="FP32", shape=[1, 256])],
                raw_input_contents=[f32_bytes(floats(256, 200 + i))],
                parameters={"device": pb.InferParameter(string_param="cpu")}))
        answers = {}
        for resp in stub.ModelStreamInfer(iter(requests)):
            answers[resp.infer_response.id] = resp
        check(len(answers) == 12, "stream answered %d of 12" % len(answers))
        check("NOT_FOUND" in answers["s5"].error_message and "nosuch" in answers["s5"].error_message,
              "in-band error %r" % answers["s5"].error_message)
        # Stream requests may be batched together, and BLAS rounds a batch of
        # rows differently from one row: compare within float32 tolerance.
        for i in (0, 6, 11):
            single = v2_raw("mlp", "x", "FP32", [1, 256], requests[i].raw_input_contents[0])
            got = struct.unpack("<10f", answers["s%d" % i].infer_response.raw_output_contents[0])
            want = struct.unpack("<10f", single.raw_output_contents[0])
            check(answers["s%d" % i].error_message == "" and
                  all(abs(g - w) <= 1e-5 + 1e-4 * abs(w) for g, w in zip(got, want)),
                  "stream answer s%d differs: %s vs %s" % (i, got, want))
        # The stream stays open after an error: keep sending on the same call.
        q = queue.Queue()

        def gen():
            while True:
                item = q.get()
                if item is None:
                    return
                yield item

        call = stub.ModelStreamInfer(gen(), timeout=60)
        q.put(requests[5])
        first = next(call)
        check(first.error_message != "", "first in-band error")
        q.put(requests[0])
        second = next(call)
        check(second.error_message == "" and second.infer_response.id == "s0", "stream went on after an error")
        # A burst on the open stream: its answers may leave together, but the
        # last must not wait for the client to close (or for the deadline).
        burst = [requests[i] for i in range(12) if i != 5]
        for r in burst:
            q.put(r)
        got = {next(call).infer_response.id for _ in burst}
        check(got == {r.id for r in burst}, "burst on an open stream answered: %s" % sorted(got))
        q.put(None)
        check(list(call) == [], "stream closes cleanly")
        # A message that is not a ModelInferRequest is answered in-band in its
        # place (not taken for the client closing its side), and the stream
        # goes on: raw bytes on the same method.
        raw_stream = channel.stream_stream("/inference.GRPCInferenceService/ModelStreamInfer",
                                           request_serializer=lambda b: b,
                                           response_deserializer=pb.ModelStreamInferResponse.FromString)
        answers = list(raw_stream(iter([requests[0].SerializeToString(), b"\xff\xff\xff\xff not a request",
                                        requests[1].SerializeToString()]), timeout=60))
        check([a.infer_response.id for a in answers] == ["s0", "", "s1"], "answers around an unparsable message: %s" %
              [(a.infer_response.id, a.error_message) for a in answers])
        check(len(answers) == 3 and answers[1].error_message.startswith("INVALID_ARGUMENT: request:") and
              answers[0].error_message == "" and answers[2].error_message == "",
              "unparsable message answered %r" % (answers[1].error_message if len(answers) > 1 else None))
        # So is every unary method, of both services: bytes that are not its
        # request are INVALID_ARGUMENT naming the message they should have
        # been (gRPC's own parsing would answer UNIMPLEMENTED with no message,
        # or INTERNAL), and the server goes on serving.
        garbage = b"\xff\xff\xff\xff not a request"
        for service in (pb.DESCRIPTOR.services_by_name["GRPCInferenceService"],
                        v1.DESCRIPTOR.services_by_name["InferenceService"]):
            for method in service.methods:
                if method.client_streaming or method.server_streaming:
                    continue
                raw = channel.unary_unary("/%s/%s" % (service.full_name, method.name),
                                          request_serializer=lambda b: b, response_deserializer=lambda b: b)
                want = "request: not a valid %s message (it does not parse)" % method.input_type.full_name
                expect_error(lambda: raw(garbage, timeout=60), grpc.StatusCode.INVALID_ARGUMENT, want)
        check(stub.ServerReady(pb.ServerReadyRequest()).ready, "ready after unparsable requests")

        # --- repository index, load and unload
        index = stub.RepositoryIndex(pb.RepositoryIndexRequest()).models
        states = {(m.name, m.version): (m.state, m.reason) for m in index}
        check(states.get(("mlp", "1"), ("",))[0] == "READY", "mlp in index %s" % states)
        check(states.get(("badconfig", "1"), ("",))[0] == "UNAVAILABLE" and states[("badconfig", "1")][1],
              "badconfig in index")
        ready_only = stub.RepositoryIndex(pb.RepositoryIndexRequest(ready=True)).models
        check(all(m.state == "READY" for m in ready_only), "ready=true filter")
        load = pb.RepositoryModelLoadRequest(model_name="cnn")
        load.parameters["device"].string_param = "cpu"
        stub.RepositoryModelLoad(load)
        resident = v1stub.ListModels(v1.ListModelsRequest())
        check(any(m.name == "cnn" and len(m.loaded) > 0 for m in resident.models), "cnn loaded")
        stub.RepositoryModelUnload(pb.RepositoryModelUnloadRequest(model_name="cnn"))
        resident = v1stub.ListModels(v1.ListModelsRequest())
        check(all(not (m.name == "cnn" and len(m.loaded) > 0) for m in resident.models), "cnn unloaded")
        expect_error(lambda: stub.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name="nosuch")),
                     grpc.StatusCode.NOT_FOUND, "nosuch")
        channel.close()
        server.stop()

        # --- tokens guard inference and the repository, not liveness
        infer_tok, admin_tok = "i" * 24, "a" * 24
        open(os.path.join(work, "infer.tok"), "w").write(infer_tok + "\n")
        open(os.path.join(work, "admin.tok"), "w").write(admin_tok + "\n")
        secured = Server(args.server, ["--model-repository=" + models,
                                       "--auth-token-file=" + os.path.join(work, "infer.tok"),
                                       "--admin-token-file=" + os.path.join(work, "admin.tok")],
                         os.path.join(work, "secured.log"))
        servers.append(secured)
        secured.wait_serving()
        ch = grpc.insecure_channel(secured.address)
        s2 = pb_grpc.GRPCInferenceServiceStub(ch)
        bearer = lambda t: [("authorization", "Bearer " + t)]  # noqa: E731
        good = pb.ModelInferRequest(model_name="mlp", inputs=[pb.ModelInferRequest.InferInputTensor(
            name="x", datatype="FP32", shape=[1, 256])], raw_input_contents=[f32_bytes(x[:256])])
        check(s2.ServerLive(pb.ServerLiveRequest()).live, "liveness needs no token")
        expect_error(lambda: s2.ModelInfer(good), grpc.StatusCode.UNAUTHENTICATED)
        check(len(s2.ModelInfer(good, metadata=bearer(infer_tok)).raw_output_contents) == 1, "token infers")
        stream_refused = expect_error(lambda: list(s2.ModelStreamInfer(iter([good]))), grpc.StatusCode.UNAUTHENTICATED)
        check(stream_refused is not None, "stream refused without a token")
        expect_error(lambda: s2.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name="mlp"),
                                                    metadata=bearer(infer_tok)), grpc.StatusCode.PERMISSION_DENIED)
        s2.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name="mlp"), metadata=bearer(admin_tok))
        s2.RepositoryModelUnload(pb.RepositoryModelUnloadRequest(model_name="mlp"), metadata=bearer(admin_tok))
        # The caller is checked before its bytes are read: without a token,
        # bytes that are not a request are refused as the caller, not parsed;
        # with one, they are INVALID_ARGUMENT. Liveness needs none.
        for method, code, token in (("ModelMetadata", grpc.StatusCode.UNAUTHENTICATED, infer_tok),
                                    ("ModelInfer", grpc.StatusCode.UNAUTHENTICATED, infer_tok),
                                    ("RepositoryModelLoad", grpc.StatusCode.UNAUTHENTICATED, admin_tok),
                                    ("ServerLive", grpc.StatusCode.INVALID_ARGUMENT, None)):
            raw = ch.unary_unary("/inference.GRPCInferenceService/" + method, request_serializer=lambda b: b,
                                 response_deserializer=lambda b: b)
            expect_error(lambda: raw(garbage, timeout=60), code)
            if code == grpc.StatusCode.UNAUTHENTICATED:
                expect_error(lambda: raw(garbage, timeout=60, metadata=bearer(token)),
                             grpc.StatusCode.INVALID_ARGUMENT, "request: not a valid inference.")
        ch.close()
        print("open inference protocol conformance: %d checks passed" % checks_made())
    finally:
        for s in servers:
            s.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
