#!/usr/bin/env python3
"""What Triton's own clients rely on, written from Triton's documented
behaviour and checked through the real server with the project's own client
code: a client compiled from the protocol's definitions
(tests/integration/open_inference_reference/) over gRPC, and Python's
http.client over REST.

  - streams: every answer carries triton_final_response, with and without
    triton_enable_empty_final_response; answers keep request order on a
    stream of mixed batch sizes behind a slow request, and a request's error
    comes back in its place; stream_order "completion" opts out;
  - explicit model control: unload makes a model unavailable (ready, index,
    infer) until it is loaded again, also across repository polls; a config
    override is applied and a bad one refused; other load parameters are
    refused by name;
  - the extensions that are not served answer with a status and a reason
    (shared memory, trace), log settings read and change the log level;
  - compressed REST bodies (gzip, deflate), a gzip bomb, an unknown encoding;
  - health answers without a JSON-labelled empty body;
  - top-k classification with and without labels, over gRPC and REST.

Uses Debian's python3-grpcio and python3-protobuf.
"""
import gzip
import http.client
import json
import os
import queue
import shutil
import struct
import sys
import threading
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from igtest import (Server, check, checks_made, expect_error, fail, open_inference_setup, rss_kib,  # noqa: E402
                    memory_bounds_apply, reset_peak)

class Http:
    """One keep-alive REST connection."""

    def __init__(self, address):
        host, port = address.rsplit(":", 1)
        self.conn = http.client.HTTPConnection(host, int(port), timeout=60)

    def call(self, method, path, body=None, headers=None):
        self.conn.request(method, path, body=body, headers=headers or {})
        r = self.conn.getresponse()
        data = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data

    def json(self, method, path, body=None, headers=None, status=200):
        code, _, data = self.call(method, path, body, headers)
        check(code == status, "%s %s: HTTP %d, expected %d: %r" % (method, path, code, status, data[:300]))
        return json.loads(data) if data else None

    def error(self, method, path, status, *needles, body=None, headers=None):
        code, head, data = self.call(method, path, body, headers)
        check(code == status, "%s %s: HTTP %d, expected %d: %r" % (method, path, code, status, data[:300]))
        check(head.get("content-type", "").startswith("application/json"), "error without a JSON type: %s" % head)
        err = json.loads(data).get("error", "")
        for n in needles:
            check(n in err, "%s %s: error %r does not name %r" % (method, path, err, n))


def f32(values):
    return struct.pack("<%df" % len(values), *values)


def read_f32(raw):
    return list(struct.unpack("<%df" % (len(raw) // 4), raw))


def read_bytes_elements(raw):
    out, at = [], 0
    while at < len(raw):
        (n,) = struct.unpack_from("<I", raw, at)
        out.append(raw[at + 4:at + 4 + n].decode())
        at += 4 + n
    return out






def main():
    args, work, models = open_inference_setup("ig_triton_")
    server = None
    try:
        import grpc
        import grpc_service_pb2 as pb
        import grpc_service_pb2_grpc as pb_grpc
        import model_config_pb2 as mc
        from infergate.v1 import inference_pb2 as v1
        from infergate.v1 import inference_pb2_grpc as v1_grpc

        # A classifier: mlp with a label file named by its output, and a
        # copy with a model-wide labels.txt.
        mlp_config = open(os.path.join(models, "mlp", "config.pbtxt")).read()
        for name, labels_file, config_line in [
                ("classifier", "classes.txt", 'outputs { name: "logits" dtype: FLOAT32 dims: [10] '
                                               'label_filename: "classes.txt" }'),
                ("classifier_wide", "labels.txt", 'outputs { name: "logits" dtype: FLOAT32 dims: [10] }')]:
            shutil.copytree(os.path.join(models, "mlp"), os.path.join(models, name))
            config = "\n".join(line for line in mlp_config.splitlines() if not line.startswith("outputs"))
            open(os.path.join(models, name, "config.pbtxt"), "w").write(config + "\n" + config_line + "\n")
            with open(os.path.join(models, name, labels_file), "w") as f:
                f.write("".join("class_%d\n" % i for i in range(10)))

        max_body = 4 << 20
        server = Server(args.server, ["--model-repository=" + models, "--cpu-workers=2",
                                      "--repository-poll-interval=200ms", "--max-receive-bytes=%d" % max_body,
                                      "--max-load-file-bytes=1MiB"],
                        os.path.join(work, "server.log"))
        server.wait_serving()
        channel = grpc.insecure_channel(server.address)
        stub = pb_grpc.GRPCInferenceServiceStub(channel)
        v1stub = v1_grpc.InferenceServiceStub(channel)
        rest = Http(server.http_address)

        def doubles_request(rows, rid, **params):
            r = pb.ModelInferRequest(model_name="doubles", id=rid)
            t = r.inputs.add(name="x", datatype="FP32", shape=[rows, 4])
            r.raw_input_contents.append(f32([float(rows)] * rows * 4))
            for k, v in params.items():
                if isinstance(v, bool):
                    r.parameters[k].bool_param = v
                else:
                    r.parameters[k].string_param = v
            del t
            return r

        def slow_request(rid, **params):
            r = pb.ModelInferRequest(model_name="slow", id=rid)
            r.inputs.add(name="x", datatype="FP32", shape=[2])
            r.raw_input_contents.append(f32([1.0, 2.0]))
            for k, v in params.items():
                r.parameters[k].string_param = v
            return r

        def stream(requests):
            answers = list(stub.ModelStreamInfer(iter(requests), timeout=120))
            check(len(answers) == len(requests), "%d answers for %d requests" % (len(answers), len(requests)))
            return answers

        # --- streams: the final flag on every answer, errors included
        for empty_final in (False, True):
            reqs = [doubles_request(1 + i % 8, str(i), triton_enable_empty_final_response=empty_final)
                    for i in range(6)]
            reqs.insert(3, pb.ModelInferRequest(model_name="nosuch", id="bad"))
            answers = stream(reqs)
            for a in answers:
                flag = a.infer_response.parameters.get("triton_final_response")
                check(flag is not None and flag.WhichOneof("parameter_choice") == "bool_param" and flag.bool_param,
                      "answer %r without triton_final_response: true (empty final %s)"
                      % (a.infer_response.id, empty_final))
            ids = [a.infer_response.id for a in answers]
            check(ids == [r.id for r in reqs], "answers out of request order: %s" % ids)
            bad = answers[3]
            check(bad.error_message and "nosuch" in bad.error_message, "the bad request's error in its place: %r"
                  % bad.error_message)
        wrong_flag = doubles_request(1, "w")
        wrong_flag.parameters["triton_enable_empty_final_response"].string_param = "yes"
        a = stream([wrong_flag])[0]
        check("triton_enable_empty_final_response" in a.error_message, "a non-bool flag is refused: %r"
              % a.error_message)

        # --- streams: request order behind a slow request, mixed batch sizes
        reqs = [slow_request("0")] + [doubles_request(1 + (i * 5) % 8, str(i)) for i in range(1, 25)]
        answers = stream(reqs)
        check([a.infer_response.id for a in answers] == [str(i) for i in range(25)],
              "answers out of request order: %s" % [a.infer_response.id for a in answers])
        for a in answers[1:]:
            rows = a.infer_response.outputs[0].shape[0]
            raw = a.infer_response.raw_output_contents[0]
            code = {"FP32": "f", "FP64": "d"}[a.infer_response.outputs[0].datatype]
            values = struct.unpack("<%d%s" % (rows * 4, code), raw)
            check(all(v == 2.0 * rows for v in values), "answer %s holds another request's rows"
                  % a.infer_response.id)
        # ... and completion order when a request asks for it: the fast
        # answers overtake the slow one (a second of compute on the other worker).
        reqs = [slow_request("0", stream_order="completion")] + \
            [doubles_request(1 + i % 8, str(i), stream_order="completion") for i in range(1, 9)]
        ids = [a.infer_response.id for a in stream(reqs)]
        check(sorted(ids) == sorted(r.id for r in reqs) and ids[0] != "0",
              "stream_order completion: the slow answer came first: %s" % ids)
        bad_order = doubles_request(1, "o", stream_order="sorted")
        check("stream_order" in stream([bad_order])[0].error_message, "a bad stream_order is refused")

        # --- explicit unload and load
        def infer_mlp(model="mlp"):
            r = pb.ModelInferRequest(model_name=model)
            r.inputs.add(name="x", datatype="FP32", shape=[1, 256])
            r.raw_input_contents.append(f32([0.5] * 256))
            return stub.ModelInfer(r, timeout=60)

        def index_state(model):
            return [(m.version, m.state, m.reason) for m in stub.RepositoryIndex(pb.RepositoryIndexRequest()).models
                    if m.name == model]

        infer_mlp()
        check(stub.ModelReady(pb.ModelReadyRequest(name="mlp")).ready, "mlp ready before the unload")
        stub.RepositoryModelUnload(pb.RepositoryModelUnloadRequest(model_name="mlp"))
        check(not stub.ModelReady(pb.ModelReadyRequest(name="mlp")).ready, "unloaded mlp still ready")
        check(index_state("mlp") == [("1", "UNAVAILABLE", "unloaded")], "index after unload: %s" % index_state("mlp"))
        expect_error(infer_mlp, grpc.StatusCode.UNAVAILABLE, "unloaded")
        rest.error("POST", "/v2/models/mlp/infer", 503, "unloaded",
                   body=json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 256],
                                                "data": [0.5] * 256}]}))
        code, head, body = rest.call("GET", "/v2/models/mlp/ready")
        # 400 as Triton answers (its clients read the status only), with the
        # body the protocol's REST specification gives, which KServe's
        # client parses (Triton sends none).
        check(code == 400 and json.loads(body) == {"name": "mlp", "ready": False},
              "REST ready of an unloaded model: %d %s %r" % (code, head, body))
        listed = v1stub.ListModels(v1.ListModelsRequest())
        check(all(not (m.name == "mlp" and len(m.loaded) > 0) for m in listed.models), "unloaded mlp still resident")
        time.sleep(1.0)  # several repository polls: files unchanged, it stays unloaded
        check(not stub.ModelReady(pb.ModelReadyRequest(name="mlp")).ready, "a poll brought the unloaded mlp back")
        stub.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name="mlp"))
        check(stub.ModelReady(pb.ModelReadyRequest(name="mlp")).ready, "mlp not ready after the load")
        check(index_state("mlp") == [("1", "READY", "")], "index after load: %s" % index_state("mlp"))
        infer_mlp()
        # REST unload, then new files on disk bring it back (the poll).
        check(rest.call("POST", "/v2/repository/models/cnn/unload")[0] == 200, "REST unload cnn")
        check(not stub.ModelReady(pb.ModelReadyRequest(name="cnn")).ready, "REST-unloaded cnn still ready")
        cnn_file = os.path.join(models, "cnn", "1", "model.pt")
        os.utime(cnn_file, (time.time() + 5, time.time() + 5))
        deadline = time.time() + 60
        while not stub.ModelReady(pb.ModelReadyRequest(name="cnn")).ready and time.time() < deadline:
            time.sleep(0.1)
        check(stub.ModelReady(pb.ModelReadyRequest(name="cnn")).ready, "a changed model.pt did not bring cnn back")
        # infergate.v1's admin unload does the same.
        v1stub.UnloadModel(v1.UnloadModelRequest(model="embed"))
        check(not stub.ModelReady(pb.ModelReadyRequest(name="embed")).ready, "v1-unloaded embed still ready")
        v1stub.LoadModel(v1.LoadModelRequest(model="embed"))
        check(stub.ModelReady(pb.ModelReadyRequest(name="embed")).ready, "embed not ready after a v1 load")
        # An unload that names a device only drops copies: still served.
        unload_cpu = pb.RepositoryModelUnloadRequest(model_name="mlp")
        unload_cpu.parameters["device"].string_param = "cpu"
        stub.RepositoryModelUnload(unload_cpu)
        check(stub.ModelReady(pb.ModelReadyRequest(name="mlp")).ready, "a device unload took mlp out of service")
        infer_mlp()

        # --- load parameters: a config override, a bad one, unknown ones
        def config_of(model):
            return stub.ModelConfig(pb.ModelConfigRequest(name=model)).config

        check(config_of("mlp").max_batch_size == 64, "mlp's max_batch_size from its config.pbtxt")
        load = pb.RepositoryModelLoadRequest(model_name="mlp")
        load.parameters["config"].string_param = json.dumps({"max_batch_size": 4,
                                                             "dynamic_batching": {"preferred_batch_size": [2, 4]}})
        stub.RepositoryModelLoad(load)
        check(config_of("mlp").max_batch_size == 4, "the override's max_batch_size is not applied")
        check(list(config_of("mlp").dynamic_batching.preferred_batch_size) == [2, 4], "preferred sizes not applied")
        check(len(config_of("mlp").input) == 1, "the override dropped the inputs it did not name")
        too_big = pb.ModelInferRequest(model_name="mlp")
        too_big.inputs.add(name="x", datatype="FP32", shape=[8, 256])
        too_big.raw_input_contents.append(f32([0.0] * 8 * 256))
        expect_error(lambda: stub.ModelInfer(too_big, timeout=60), grpc.StatusCode.INVALID_ARGUMENT)
        time.sleep(0.5)  # polls keep the override
        check(config_of("mlp").max_batch_size == 4, "a poll dropped the override")
        for bad, needle in [("{not json", "parameters.config"),
                            (json.dumps({"sequence_batching": {}}), "sequence_batching"),
                            (json.dumps({"input": [{"name": "x", "data_type": "TYPE_UINT16", "dims": [256]}]}),
                             "input[0].data_type"),
                            (json.dumps({"max_batch_size": 2, "dynamic_batching": {"preferred_batch_size": [8]}}),
                             "preferred_batch_sizes[0]"),
                            (json.dumps({"instance_group": [{"kind": "KIND_GPU", "count": 65}]}),
                             "instance_group[0].count")]:
            bad_load = pb.RepositoryModelLoadRequest(model_name="mlp")
            bad_load.parameters["config"].string_param = bad
            expect_error(lambda: stub.RepositoryModelLoad(bad_load), grpc.StatusCode.INVALID_ARGUMENT, needle)
            rest.error("POST", "/v2/repository/models/mlp/load", 400, needle,
                       body=json.dumps({"parameters": {"config": bad}}))
        check(config_of("mlp").max_batch_size == 4, "a refused override changed the config in force")
        infer_mlp()
        stub.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name="mlp"))
        check(config_of("mlp").max_batch_size == 64, "a load without config did not return to config.pbtxt")
        odd = pb.RepositoryModelLoadRequest(model_name="mlp")
        odd.parameters["colour"].string_param = "blue"
        expect_error(lambda: stub.RepositoryModelLoad(odd), grpc.StatusCode.INVALID_ARGUMENT, "parameters.colour")
        # --- models sent with the load (file: parameters)
        import glob
        import tempfile
        uploads_before = set(glob.glob(os.path.join(tempfile.gettempdir(), "infergate-uploads-*")))
        escapes_before = {p for p in (os.path.join(models, "..", "escape"), os.path.join(tempfile.gettempdir(), "escape"))
                          if os.path.exists(p)}
        doubles_pt = open(os.path.join(models, "doubles", "1", "model.pt"), "rb").read()
        doubles_config = json.dumps({"max_batch_size": 8,
                                     "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [4]}]})

        def upload(model, files, config=doubles_config):
            req = pb.RepositoryModelLoadRequest(model_name=model)
            if config is not None:
                req.parameters["config"].string_param = config
            for path, content in files.items():
                req.parameters["file:" + path].bytes_param = content
            return stub.RepositoryModelLoad(req, timeout=120)

        upload("sent", {"1/model.pt": doubles_pt, "labels.txt": b"a\nb\n"})
        check(stub.ModelReady(pb.ModelReadyRequest(name="sent")).ready, "a model new to the repository, sent")
        r = stub.ModelInfer(doubles_request(3, "s"), timeout=60)
        sent = pb.ModelInferRequest(model_name="sent")
        sent.inputs.add(name="x", datatype="FP32", shape=[3, 4])
        sent.raw_input_contents.append(f32([3.0] * 12))
        got = stub.ModelInfer(sent, timeout=60)
        check(got.raw_output_contents[0] == r.raw_output_contents[0], "the sent model answers as the repository's")
        check(config_of("sent").max_batch_size == 8, "the sent model's config")
        # REST sends file contents in base64, as Triton's HTTP client does.
        import base64
        body = json.dumps({"parameters": {"config": doubles_config,
                                          "file:1/model.pt": base64.b64encode(doubles_pt).decode()}})
        check(rest.call("POST", "/v2/repository/models/sent_rest/load", body)[0] == 200, "REST load with files")
        check(stub.ModelReady(pb.ModelReadyRequest(name="sent_rest")).ready, "REST-sent model ready")
        for files, code, needle in [
                ({"../escape/1/model.pt": doubles_pt}, grpc.StatusCode.INVALID_ARGUMENT, "file:../escape"),
                ({"/tmp/1/model.pt": doubles_pt}, grpc.StatusCode.INVALID_ARGUMENT, "relative"),
                ({"1/./model.pt": doubles_pt}, grpc.StatusCode.INVALID_ARGUMENT, "'.'"),
                ({"notes.txt": b"x"}, grpc.StatusCode.INVALID_ARGUMENT, "no model"),
                ({"1/model.pt": b"not a model"}, grpc.StatusCode.FAILED_PRECONDITION, "does not load"),
                ({"1/model.pt": open(os.path.join(models, "mlp", "1", "model.pt"), "rb").read()},
                 grpc.StatusCode.RESOURCE_EXHAUSTED, "--max-load-file-bytes")]:
            expect_error(lambda: upload("mlp", files, "{}"), code, needle)
        # Uploads are written under the temporary folder (infergate-uploads-*),
        # so an escape would land beside them, as well as beside the repository.
        escapes = [os.path.join(models, "escape"), os.path.join(models, "..", "escape"),
                   os.path.join(tempfile.gettempdir(), "escape")]
        written = [p for p in escapes if os.path.exists(p) and p not in escapes_before]
        check(not written, "an escaping path was written: %s" % written)
        expect_error(lambda: upload("mlp", {"1/model.pt": doubles_pt}, None), grpc.StatusCode.INVALID_ARGUMENT,
                     "parameters.config")
        check(stub.ModelReady(pb.ModelReadyRequest(name="mlp")).ready and config_of("mlp").max_batch_size == 64,
              "a refused upload changed mlp")
        infer_mlp()
        # Sent files replace a repository model until the next load by name.
        upload("embed", {"1/model.pt": doubles_pt})
        check(config_of("embed").input[0].data_type == mc.TYPE_FP32, "embed now serves the sent files")
        stub.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name="embed"))
        check(config_of("embed").input[0].data_type == mc.TYPE_INT64, "embed back on the repository's files")
        unload_dep = pb.RepositoryModelUnloadRequest(model_name="poly64")
        unload_dep.parameters["unload_dependents"].bool_param = True
        stub.RepositoryModelUnload(unload_dep)
        check(not stub.ModelReady(pb.ModelReadyRequest(name="poly64")).ready, "unload_dependents unload")

        # --- extensions that are not served say so; log settings are served
        status = stub.SystemSharedMemoryStatus(pb.SystemSharedMemoryStatusRequest())
        check(len(status.regions) == 0, "shared memory regions listed: %s" % status)
        check(len(stub.CudaSharedMemoryStatus(pb.CudaSharedMemoryStatusRequest()).regions) == 0, "CUDA regions")
        expect_error(lambda: stub.SystemSharedMemoryStatus(pb.SystemSharedMemoryStatusRequest(name="r0")),
                     grpc.StatusCode.NOT_FOUND, "r0")
        expect_error(lambda: stub.SystemSharedMemoryRegister(
            pb.SystemSharedMemoryRegisterRequest(name="r0", key="/k", byte_size=64)),
            grpc.StatusCode.UNIMPLEMENTED, "shared memory is not supported", "r0")
        expect_error(lambda: stub.CudaSharedMemoryRegister(
            pb.CudaSharedMemoryRegisterRequest(name="g0", raw_handle=b"x", byte_size=64)),
            grpc.StatusCode.UNIMPLEMENTED, "CUDA shared memory is not supported")
        stub.SystemSharedMemoryUnregister(pb.SystemSharedMemoryUnregisterRequest())
        stub.CudaSharedMemoryUnregister(pb.CudaSharedMemoryUnregisterRequest())
        # Trace settings (tracing is off here: the level stays OFF, the rest change).
        trace = stub.TraceSetting(pb.TraceSettingRequest())
        check({k: list(v.value) for k, v in trace.settings.items()} ==
              {"trace_level": ["OFF"], "trace_rate": ["1"], "trace_count": ["-1"], "trace_mode": ["opentelemetry"]},
              "trace settings: %s" % trace)
        raise_level = pb.TraceSettingRequest(model_name="mlp")
        raise_level.settings["trace_level"].value.append("TIMESTAMPS")
        expect_error(lambda: stub.TraceSetting(raise_level), grpc.StatusCode.FAILED_PRECONDITION, "--otlp-endpoint")
        rate = pb.TraceSettingRequest(model_name="mlp")
        rate.settings["trace_rate"].value.append("5")
        check(list(stub.TraceSetting(rate).settings["trace_rate"].value) == ["5"], "mlp's trace rate")
        check(list(stub.TraceSetting(pb.TraceSettingRequest()).settings["trace_rate"].value) == ["1"],
              "a model's rate changed the global one")
        clear = pb.TraceSettingRequest(model_name="mlp")
        clear.settings["trace_rate"].SetInParent()
        check(list(stub.TraceSetting(clear).settings["trace_rate"].value) == ["1"], "mlp's rate cleared")
        expect_error(lambda: stub.TraceSetting(pb.TraceSettingRequest(model_name="nosuch")),
                     grpc.StatusCode.NOT_FOUND, "Request for unknown model : 'nosuch'")
        logs = stub.LogSettings(pb.LogSettingsRequest())
        check(logs.settings["log_info"].bool_param and logs.settings["log_verbose_level"].uint32_param == 0,
              "log settings at --log-level=info: %s" % logs)
        change = pb.LogSettingsRequest()
        change.settings["log_verbose_level"].uint32_param = 1
        check(stub.LogSettings(change).settings["log_verbose_level"].uint32_param == 1, "verbose level not applied")
        bad_log = pb.LogSettingsRequest()
        bad_log.settings["log_file"].string_param = "/tmp/x"
        expect_error(lambda: stub.LogSettings(bad_log), grpc.StatusCode.INVALID_ARGUMENT, "log_file")
        check(rest.json("POST", "/v2/logging", json.dumps({"log_info": False}))["log_info"] is False,
              "REST log_info false")
        check(rest.json("GET", "/v2/logging")["log_verbose_level"] == 0, "log_info false turns debug off")
        rest.error("POST", "/v2/logging", 400, "log_colour", body=json.dumps({"log_colour": True}))
        rest.json("POST", "/v2/logging", json.dumps({"log_info": True}))
        check(rest.json("GET", "/v2/systemsharedmemory/status") == [], "REST shared memory status")
        rest.error("POST", "/v2/systemsharedmemory/region/r0/register", 501, "not supported",
                   body=json.dumps({"key": "/k", "offset": 0, "byte_size": 64}))
        rest.error("GET", "/v2/cudasharedmemory/region/g0/status", 404, "g0")
        check(rest.call("POST", "/v2/cudasharedmemory/unregister")[0] == 200, "REST CUDA unregister all")
        check(rest.json("GET", "/v2/trace/setting") == {"trace_level": ["OFF"], "trace_rate": "1",
                                                        "trace_count": "-1", "trace_mode": "opentelemetry"},
              "REST trace settings")
        check(rest.json("POST", "/v2/models/mlp/trace/setting", "{}")["trace_count"] == "-1", "REST POST {}")
        check(rest.json("POST", "/v2/models/mlp/trace/setting", json.dumps({"trace_count": "3"}))["trace_count"] == "3",
              "REST mlp trace count")
        check(rest.json("POST", "/v2/models/mlp/trace/setting", json.dumps({"trace_count": None}))["trace_count"] ==
              "-1", "REST mlp trace count cleared")
        rest.error("POST", "/v2/trace/setting", 400, "Unable to parse 'trace_rate', got: x",
                   body=json.dumps({"trace_rate": "x"}))
        rest.error("POST", "/v2/trace/setting", 400, "trace file location can not be updated",
                   body=json.dumps({"trace_file": "/tmp/t.json"}))
        rest.error("GET", "/v2/models/nosuch/trace/setting", 404, "nosuch")
        shm = pb.ModelInferRequest(model_name="mlp")
        shm_in = shm.inputs.add(name="x", datatype="FP32", shape=[1, 256])
        shm_in.parameters["shared_memory_region"].string_param = "r0"
        expect_error(lambda: stub.ModelInfer(shm), grpc.StatusCode.UNIMPLEMENTED, "shared_memory_region")
        meta = stub.ServerMetadata(pb.ServerMetadataRequest())
        for ext in ("classification", "logging", "trace"):
            check(ext in meta.extensions, "extension %s not advertised: %s" % (ext, list(meta.extensions)))
        for ext in ("system_shared_memory", "cuda_shared_memory"):
            check(ext not in meta.extensions, "extension %s advertised but not served" % ext)

        # --- health: 200, with the REST specification's JSON body (which
        # KServe's client parses; Triton's clients read the status only), typed
        for path, key in (("/v2/health/live", "live"), ("/v2/health/ready", "ready")):
            code, head, body = rest.call("GET", path)
            check(code == 200 and json.loads(body) == {key: True} and head.get("content-type") == "application/json",
                  "%s: %d %s %r" % (path, code, head, body))

        # --- compressed REST bodies
        body = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 4],
                                       "data": [1, 2, 3, 4, 5, 6, 7, 8]}]}).encode()
        plain = rest.json("POST", "/v2/models/doubles/infer", body)["outputs"][0]["data"]
        check(plain == [2.0 * v for v in range(1, 9)], "doubles answer: %s" % plain)
        for encoding, packed in [("gzip", gzip.compress(body)), ("deflate", zlib.compress(body)),
                                 ("deflate", zlib.compress(body)[2:-4]), ("identity", body)]:
            got = rest.json("POST", "/v2/models/doubles/infer", packed, {"Content-Encoding": encoding})
            check(got["outputs"][0]["data"] == plain, "%s body answered %s" % (encoding, got))
        rest.error("POST", "/v2/models/doubles/infer", 415, "br", body=body, headers={"Content-Encoding": "br"})
        rest.error("POST", "/v2/models/doubles/infer", 415, "gzip, gzip", body=body,
                   headers={"Content-Encoding": "gzip, gzip"})
        rest.error("POST", "/v2/models/doubles/infer", 400, "gzip", body=body[:40],
                   headers={"Content-Encoding": "gzip"})
        rest.error("POST", "/v2/models/doubles/infer", 400, "ends before", body=gzip.compress(body)[:-12],
                   headers={"Content-Encoding": "gzip"})
        # A bomb: 1 GiB of zeros in about 1 MiB, against a 4 MiB limit.
        bomb = zlib.compressobj(9, zlib.DEFLATED, 31)
        chunk = bytes(1 << 20)
        packed = b"".join(bomb.compress(chunk) for _ in range(1024)) + bomb.flush()
        check(len(packed) < max_body, "the bomb is larger than the body limit (%d)" % len(packed))
        measure = memory_bounds_apply(server.proc.pid)
        before = rss_kib(server.proc.pid)
        if measure and not reset_peak(server.proc.pid):
            fail("cannot reset the server's peak RSS (/proc/PID/clear_refs)")
        for _ in range(4):
            rest.error("POST", "/v2/models/doubles/infer", 413, "inflates to more than", body=packed,
                       headers={"Content-Encoding": "gzip"})
        # The peak, not what is left after: a bomb inflated whole and freed
        # would pass a reading taken afterwards.
        grown = rss_kib(server.proc.pid, "VmHWM:") - before
        if measure:
            # The limit is 4 MiB: four bombs hold at most that each, never 1 GiB.
            check(grown < 64 << 10, "the bombs grew the server's peak by %d KiB" % grown)
        code, head, _ = rest.call("POST", "/v2/models/doubles/infer", gzip.compress(body),
                                  {"Content-Encoding": "gzip"})
        check(code == 200, "the server answers after the bombs: %d" % code)

        # --- classification
        def classify(model, k, rows=2):
            r = pb.ModelInferRequest(model_name=model)
            r.inputs.add(name="x", datatype="FP32", shape=[rows, 256])
            r.raw_input_contents.append(f32([((i * 37) % 101) / 50.0 - 1.0 for i in range(rows * 256)]))
            out = r.outputs.add(name="logits")
            if k is not None:
                out.parameters["classification"].int64_param = k
            return stub.ModelInfer(r, timeout=60)

        full = classify("mlp", None)
        logits = read_f32(full.raw_output_contents[0])
        for model, labelled in [("mlp", False), ("classifier", True), ("classifier_wide", True)]:
            top = classify(model, 3)
            o = top.outputs[0]
            check(o.datatype == "BYTES" and list(o.shape) == [2, 3], "%s classification: %s" % (model, o))
            got = read_bytes_elements(top.raw_output_contents[0])
            for row in range(2):
                scores = logits[row * 10:(row + 1) * 10]
                best = sorted(range(10), key=lambda i: (-scores[i], i))[:3]
                want = ["%f:%d" % (scores[i], i) + (":class_%d" % i if labelled else "") for i in best]
                check(got[row * 3:(row + 1) * 3] == want, "%s row %d: %s, expected %s"
                      % (model, row, got[row * 3:(row + 1) * 3], want))
        check(list(classify("mlp", 20).outputs[0].shape) == [2, 10], "class_count above the classes")
        bad_k = pb.ModelInferRequest(model_name="mlp")
        bad_k.inputs.add(name="x", datatype="FP32", shape=[1, 256])
        bad_k.raw_input_contents.append(f32([0.0] * 256))
        bad_k.outputs.add(name="logits").parameters["classification"].string_param = "3"
        expect_error(lambda: stub.ModelInfer(bad_k), grpc.StatusCode.INVALID_ARGUMENT,
                     "outputs[0].parameters.classification")
        rest_in = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 256],
                               "data": [((i * 37) % 101) / 50.0 - 1.0 for i in range(512)]}]}
        rest_top = rest.json("POST", "/v2/models/classifier/infer", json.dumps(dict(rest_in, outputs=[
            {"name": "logits", "parameters": {"classification": 3}}])))
        grpc_top = read_bytes_elements(classify("classifier", 3).raw_output_contents[0])
        out = rest_top["outputs"][0]
        check(out["datatype"] == "BYTES" and out["shape"] == [2, 3] and out["data"] == grpc_top,
              "REST classification %s, gRPC %s" % (out, grpc_top))
        code, head, data = rest.call("POST", "/v2/models/classifier/infer", json.dumps(dict(rest_in, outputs=[
            {"name": "logits", "parameters": {"classification": 3, "binary_data": True}}])))
        n = int(head["inference-header-content-length"])
        check(code == 200 and read_bytes_elements(data[n:]) == grpc_top, "REST binary classification")
        rest.error("POST", "/v2/models/mlp/infer", 400, "outputs[0].parameters.classification",
                   body=json.dumps(dict(rest_in, outputs=[{"name": "logits", "parameters": {"classification": -1}}])))
        v1req = v1.InferRequest(model="classifier", class_count=2)
        t = v1req.inputs.add(name="x", dtype=1, shape=[2, 256])
        t.data = f32([((i * 37) % 101) / 50.0 - 1.0 for i in range(512)])
        v1top = v1stub.Infer(v1req, timeout=60)
        check(len(v1top.classifications) == 1 and len(v1top.classifications[0].rows) == 2, "v1 classification")
        first = v1top.classifications[0].rows[0].classes[0]
        check("%f:%d:%s" % (first.score, first.index, first.label) == grpc_top[0],
              "v1 top class %s vs %s" % (first, grpc_top[0]))
        meta_config = stub.ModelConfig(pb.ModelConfigRequest(name="classifier")).config
        check(meta_config.output[0].label_filename == "classes.txt", "label_filename in ModelConfig")

        channel.close()
        check(server.stop() == 0, "the server did not exit 0 on SIGTERM")
        uploads_after = set(glob.glob(os.path.join(tempfile.gettempdir(), "infergate-uploads-*")))
        check(uploads_after <= uploads_before, "the upload folders outlived the server: %s"
              % (uploads_after - uploads_before))
        print("PASS: %d checks" % checks_made())
    finally:
        if server is not None and server.proc.poll() is None:
            server.proc.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
