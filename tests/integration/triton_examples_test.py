#!/usr/bin/env python3
"""Triton's example model repository, served as a Triton user would serve it,
and what NVIDIA's example clients do with it, written here with the
project's own code (nothing of NVIDIA's is used or downloaded).

tools/make_triton_examples.py writes the eight example models (TorchScript in
place of the originals, each config.pbtxt as Triton's repository has it but
for the platform line). Then, over the Open Inference Protocol's gRPC (the
reference stubs) and REST (JSON and the binary extension):

  simple, simple_int8     sums and differences, raw and typed contents
  simple_string           decimal strings summed: raw BYTES (4-byte
                          lengths), bytes_contents, JSON strings, binary
  simple_identity         10,000 random strings (empty, long, non-ASCII)
                          back unchanged, over gRPC and REST, and over
                          infergate.v1, KServe V1 and /predictions
  densenet_onnx,          format and reshape echoed in ModelConfig; a red
  inception_onnx          (green) image classified RED (GREEN), by argmax
                          and through the classification extension
  simple_sequence, ...    refused, naming sequence_batching
  errors                  Triton's texts, which clients match on: unknown
                          model or version, contents both raw and typed, input count,
                          name, shape, byte size, a load that fails
  model control           unload, load, the repository index

Uses Debian's python3-grpcio and python3-protobuf; the models need
python3-torch.
"""
import http.client
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from igtest import (Server, check, checks_made, generate_stubs, reference_stubs,  # noqa: E402
                    required_arguments)


def serialized(strings):
    """BYTES on the wire: each element its 4-byte little-endian length, then its bytes."""
    return b"".join(struct.pack("<I", len(s)) + s for s in strings)


def parse_serialized(raw):
    out, at = [], 0
    while at < len(raw):
        (n,) = struct.unpack_from("<I", raw, at)
        out.append(raw[at + 4:at + 4 + n])
        at += 4 + n
    return out


def random_strings(rng, count):
    """Empty, short, long and non-ASCII strings (valid UTF-8: the model takes str)."""
    alphabet = "abcXYZ019 \t\n\"\\/{}é日本語🙂\u00a0\u2028"
    out = []
    for i in range(count):
        kind = i % 10
        if kind == 0:
            out.append("")
        elif kind == 1:
            out.append("".join(rng.choice(alphabet) for _ in range(rng.randint(200, 2000))))
        else:
            out.append("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 24))))
    return out


def image(height, width, colour, channels_last):
    """An image of one colour (three values over [0, 1]) as FP32 bytes."""
    if channels_last:
        return struct.pack("<%df" % (3 * height * width), *(colour * (height * width)))
    plane = height * width
    return b"".join(struct.pack("<%df" % plane, *([c] * plane)) for c in colour)


def main():
    args = required_arguments("--server", "--proto-dir", "--reference-dir", "--make-triton-examples")
    work = tempfile.mkdtemp(prefix="ig_tritonexamples_")
    server = None
    try:
        models = os.path.join(work, "models")
        subprocess.run([sys.executable, args.make_triton_examples, models], check=True, stdout=subprocess.DEVNULL)
        generate_stubs(args.proto_dir, os.path.join(work, "stubs"))
        reference_stubs(args.reference_dir, os.path.join(work, "ref"))
        import grpc
        import grpc_service_pb2 as pb
        import grpc_service_pb2_grpc as pb_grpc
        import model_config_pb2 as mc

        server = Server(args.server, ["--model-repository=" + models], os.path.join(work, "server.log"))
        server.wait_serving()
        channel = grpc.insecure_channel(server.address, options=[("grpc.max_receive_message_length", 64 << 20),
                                                                  ("grpc.max_send_message_length", 64 << 20)])
        stub = pb_grpc.GRPCInferenceServiceStub(channel)
        host, port = server.http_address.rsplit(":", 1)

        def rest(method, path, body=None, headers=None):
            conn = http.client.HTTPConnection(host, int(port), timeout=120)
            conn.request(method, path, body, headers or {})
            r = conn.getresponse()
            data = r.read()
            answer = (r.status, {k.lower(): v for k, v in r.getheaders()}, data)
            conn.close()
            return answer

        def rest_json(path, document):
            status, _, body = rest("POST", path, json.dumps(document))
            return status, json.loads(body) if body else {}

        def grpc_error(request_fn):
            try:
                request_fn()
            except grpc.RpcError as e:
                return e.code(), e.details()
            return grpc.StatusCode.OK, ""

        def infer(model, inputs, outputs=(), **extra):
            """inputs: (name, datatype, shape, raw bytes or None, typed contents setter or None)."""
            req = pb.ModelInferRequest(model_name=model, **extra)
            for name, datatype, shape, raw, typed in inputs:
                t = req.inputs.add(name=name, datatype=datatype, shape=shape)
                if typed:
                    typed(t.contents)
                if raw is not None:
                    req.raw_input_contents.append(raw)
            for name, params in outputs:
                o = req.outputs.add(name=name)
                for k, v in params.items():
                    o.parameters[k].int64_param = v
            return req

        def answered(response):
            return {o.name: (o.datatype, list(o.shape), response.raw_output_contents[i])
                    for i, o in enumerate(response.outputs)}

        # --- the server and the models, as the health and metadata examples read them
        check(stub.ServerLive(pb.ServerLiveRequest()).live and stub.ServerReady(pb.ServerReadyRequest()).ready,
              "server not live and ready")
        meta = stub.ServerMetadata(pb.ServerMetadataRequest())
        check(meta.name == "infergate" and "model_repository" in meta.extensions and
              "classification" in meta.extensions, "server metadata: %s" % meta)
        for name in ("simple", "simple_int8", "simple_string", "simple_identity", "densenet_onnx", "inception_onnx"):
            check(stub.ModelReady(pb.ModelReadyRequest(name=name)).ready, "%s not ready" % name)
        meta = stub.ModelMetadata(pb.ModelMetadataRequest(name="simple"))
        check([(t.name, t.datatype, list(t.shape)) for t in meta.inputs] ==
              [("INPUT0", "INT32", [-1, 16]), ("INPUT1", "INT32", [-1, 16])], "simple metadata: %s" % meta)
        meta = stub.ModelMetadata(pb.ModelMetadataRequest(name="simple_string"))
        check([t.datatype for t in list(meta.inputs) + list(meta.outputs)] == ["BYTES"] * 4,
              "simple_string metadata: %s" % meta)

        # --- simple and simple_int8: raw and typed contents
        a = list(range(16))
        b = [1] * 16
        raw32 = lambda v: struct.pack("<16i", *v)  # noqa: E731
        got = answered(stub.ModelInfer(infer("simple", [("INPUT0", "INT32", [1, 16], raw32(a), None),
                                                        ("INPUT1", "INT32", [1, 16], raw32(b), None)])))
        check(got["OUTPUT0"] == ("INT32", [1, 16], raw32([x + 1 for x in a])) and
              got["OUTPUT1"] == ("INT32", [1, 16], raw32([x - 1 for x in a])), "simple raw: %s" % got)
        got = answered(stub.ModelInfer(infer("simple", [
            ("INPUT0", "INT32", [1, 16], None, lambda c: c.int_contents.extend(a)),
            ("INPUT1", "INT32", [1, 16], None, lambda c: c.int_contents.extend(b))])))
        check(got["OUTPUT0"][2] == raw32([x + 1 for x in a]), "simple int_contents: %s" % got)
        raw8 = lambda v: struct.pack("<16b", *v)  # noqa: E731
        got = answered(stub.ModelInfer(infer("simple_int8", [
            ("INPUT0", "INT8", [1, 16], None, lambda c: c.int_contents.extend(a)),
            ("INPUT1", "INT8", [1, 16], None, lambda c: c.int_contents.extend(b))])))
        check(got["OUTPUT0"] == ("INT8", [1, 16], raw8([x + 1 for x in a])) and
              got["OUTPUT1"][2] == raw8([x - 1 for x in a]), "simple_int8 int_contents: %s" % got)
        status, body = rest_json("/v2/models/simple/infer", {"inputs": [
            {"name": "INPUT0", "datatype": "INT32", "shape": [1, 16], "data": a},
            {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16], "data": b}]})
        outs = {o["name"]: o for o in body.get("outputs", [])}
        check(status == 200 and outs["OUTPUT0"]["data"] == [x + 1 for x in a] and
              outs["OUTPUT1"]["data"] == [x - 1 for x in a], "simple REST JSON: %d %s" % (status, body))

        # --- strings: simple_string over every encoding
        sa = [str(x).encode() for x in a]
        sb = [b"1"] * 16
        sums = [str(x + 1).encode() for x in a]
        diffs = [str(x - 1).encode() for x in a]
        got = answered(stub.ModelInfer(infer("simple_string", [("INPUT0", "BYTES", [1, 16], serialized(sa), None),
                                                               ("INPUT1", "BYTES", [1, 16], serialized(sb), None)])))
        check(got["OUTPUT0"][0] == "BYTES" and got["OUTPUT0"][1] == [1, 16] and
              parse_serialized(got["OUTPUT0"][2]) == sums and parse_serialized(got["OUTPUT1"][2]) == diffs,
              "simple_string raw: %s" % got)
        got = answered(stub.ModelInfer(infer("simple_string", [
            ("INPUT0", "BYTES", [1, 16], None, lambda c: c.bytes_contents.extend(sa)),
            ("INPUT1", "BYTES", [1, 16], None, lambda c: c.bytes_contents.extend(sb))])))
        check(parse_serialized(got["OUTPUT0"][2]) == sums, "simple_string bytes_contents: %s" % got)
        status, body = rest_json("/v2/models/simple_string/infer", {"inputs": [
            {"name": "INPUT0", "datatype": "BYTES", "shape": [1, 16], "data": [s.decode() for s in sa]},
            {"name": "INPUT1", "datatype": "BYTES", "shape": [1, 16], "data": [s.decode() for s in sb]}]})
        outs = {o["name"]: o for o in body.get("outputs", [])}
        check(status == 200 and outs["OUTPUT0"]["datatype"] == "BYTES" and
              outs["OUTPUT0"]["data"] == [s.decode() for s in sums] and
              outs["OUTPUT1"]["data"] == [s.decode() for s in diffs], "simple_string REST JSON: %d %s" % (status, body))
        # The binary extension, as tritonclient.http sends it: a JSON header,
        # then each input's bytes; the answer's outputs binary too.
        header = json.dumps({"inputs": [
            {"name": "INPUT0", "datatype": "BYTES", "shape": [1, 16],
             "parameters": {"binary_data_size": len(serialized(sa))}},
            {"name": "INPUT1", "datatype": "BYTES", "shape": [1, 16],
             "parameters": {"binary_data_size": len(serialized(sb))}}],
            "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}},
                        {"name": "OUTPUT1", "parameters": {"binary_data": True}}]}).encode()
        status, headers, data = rest("POST", "/v2/models/simple_string/infer",
                                     header + serialized(sa) + serialized(sb),
                                     {"Inference-Header-Content-Length": str(len(header)),
                                      "Content-Type": "application/octet-stream"})
        check(status == 200 and "inference-header-content-length" in headers, "binary answer: %d %r" % (status, data[:200]))
        if status == 200:
            json_length = int(headers["inference-header-content-length"])
            doc = json.loads(data[:json_length])
            at = json_length
            binary = {}
            for o in doc["outputs"]:
                size = o["parameters"]["binary_data_size"]
                binary[o["name"]] = data[at:at + size]
                at += size
            check(parse_serialized(binary["OUTPUT0"]) == sums and parse_serialized(binary["OUTPUT1"]) == diffs,
                  "simple_string binary: %s" % doc)

        # --- simple_identity: 10,000 random strings back unchanged, gRPC and REST
        rng = random.Random(69)
        strings = random_strings(rng, 10000)
        encoded = [s.encode() for s in strings]
        got = answered(stub.ModelInfer(infer("simple_identity",
                                             [("INPUT0", "BYTES", [1, len(encoded)], serialized(encoded), None)])))
        check(got["OUTPUT0"][1] == [1, 10000] and parse_serialized(got["OUTPUT0"][2]) == encoded,
              "simple_identity gRPC: 10,000 strings did not come back unchanged")
        status, body = rest_json("/v2/models/simple_identity/infer", {"inputs": [
            {"name": "INPUT0", "datatype": "BYTES", "shape": [1, len(strings)], "data": strings}]})
        check(status == 200 and body["outputs"][0]["data"] == strings,
              "simple_identity REST: 10,000 strings did not come back unchanged (%d)" % status)
        # The same strings over infergate.v1 (a BYTES tensor: 4-byte lengths,
        # then the bytes), KServe V1 (instances of JSON strings) and
        # TorchServe's /predictions (one instance, a JSON list).
        from infergate.v1 import inference_pb2 as v1
        from infergate.v1 import inference_pb2_grpc as v1_grpc
        from infergate.v1 import tensor_pb2
        v1_request = v1.InferRequest(model="simple_identity")
        v1_request.inputs.add(name="INPUT0", dtype=tensor_pb2.BYTES, shape=[1, len(encoded)], data=serialized(encoded))
        v1_answer = v1_grpc.InferenceServiceStub(channel).Infer(v1_request, timeout=120)
        check(len(v1_answer.outputs) == 1 and v1_answer.outputs[0].dtype == tensor_pb2.BYTES and
              list(v1_answer.outputs[0].shape) == [1, 10000] and parse_serialized(v1_answer.outputs[0].data) == encoded,
              "simple_identity infergate.v1: 10,000 strings did not come back unchanged")
        rows = [strings[:5000], strings[5000:]]
        status, body = rest_json("/v1/models/simple_identity:predict", {"instances": rows})
        check(status == 200 and body.get("predictions") == rows,
              "simple_identity KServe V1: the strings did not come back unchanged (%d)" % status)
        status, _, data = rest("POST", "/predictions/simple_identity", json.dumps(strings[:1000]),
                               {"Content-Type": "application/json"})
        check(status == 200 and json.loads(data) == strings[:1000],
              "simple_identity /predictions: the strings did not come back unchanged (%d %r)" % (status, data[:200]))
        # Invalid UTF-8 where the model takes str: refused, naming the element.
        code, details = grpc_error(lambda: stub.ModelInfer(infer("simple_identity", [
            ("INPUT0", "BYTES", [1, 2], serialized([b"ok", b"\xff\xfe"]), None)])))
        check(code == grpc.StatusCode.INVALID_ARGUMENT and "INPUT0" in details and "1" in details and
              "UTF-8" in details, "invalid UTF-8: %s %s" % (code, details))
        # A length prefix running past the message: refused, naming the input and element.
        code, details = grpc_error(lambda: stub.ModelInfer(infer("simple_identity", [
            ("INPUT0", "BYTES", [1, 2], serialized([b"ok"]) + struct.pack("<I", 1000) + b"x", None)])))
        check(code == grpc.StatusCode.INVALID_ARGUMENT and "element 1" in details, "cut string: %s %s" % (code, details))

        # --- the image models: format and reshape as written, answers by colour
        config = stub.ModelConfig(pb.ModelConfigRequest(name="densenet_onnx")).config
        check(config.input[0].format == mc.ModelInput.FORMAT_NCHW and
              list(config.input[0].reshape.shape) == [1, 3, 224, 224] and
              list(config.output[0].reshape.shape) == [1, 1000, 1, 1] and
              config.output[0].label_filename == "densenet_labels.txt", "densenet_onnx config: %s" % config)
        config = stub.ModelConfig(pb.ModelConfigRequest(name="inception_onnx")).config
        check(config.input[0].format == mc.ModelInput.FORMAT_NHWC and config.input[0].name == "input:0",
              "inception_onnx config: %s" % config)
        status, _, data = rest("GET", "/v2/models/densenet_onnx/config")
        doc = json.loads(data) if status == 200 else {}
        check(status == 200 and doc["input"][0].get("format") == "FORMAT_NCHW" and
              doc["input"][0]["reshape"]["shape"] == [1, 3, 224, 224], "densenet_onnx REST config: %d %s" % (status, data[:400]))

        red, green = [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]
        response = stub.ModelInfer(infer("densenet_onnx", [("data_0", "FP32", [3, 224, 224],
                                                            image(224, 224, red, False), None)]))
        out = answered(response)["fc6_1"]
        scores = struct.unpack("<1000f", out[2])
        check(out[1] == [1000] and scores.index(max(scores)) == 0, "densenet_onnx: red is class %d, shape %s" %
              (scores.index(max(scores)), out[1]))
        response = stub.ModelInfer(infer("densenet_onnx", [("data_0", "FP32", [3, 224, 224],
                                                            image(224, 224, red, False), None)],
                                         outputs=[("fc6_1", {"classification": 3})]))
        top = parse_serialized(answered(response)["fc6_1"][2])
        check(len(top) == 3 and top[0].decode().endswith(":0:RED"), "densenet_onnx classification: %s" % top)
        response = stub.ModelInfer(infer("inception_onnx", [("input:0", "FP32", [299, 299, 3],
                                                             image(299, 299, green, True), None)],
                                         outputs=[("InceptionV3/Predictions/Softmax:0", {"classification": 1})]))
        top = parse_serialized(answered(response)["InceptionV3/Predictions/Softmax:0"][2])
        check(len(top) == 1 and top[0].decode().endswith(":2:GREEN"), "inception_onnx classification: %s" % top)
        status, body = rest_json("/v2/models/inception_onnx/infer", {
            "inputs": [{"name": "input:0", "datatype": "FP32", "shape": [299, 299, 3],
                        "data": list(struct.unpack("<%df" % (299 * 299 * 3), image(299, 299, red, True)))}],
            "outputs": [{"name": "InceptionV3/Predictions/Softmax:0", "parameters": {"classification": 2}}]})
        check(status == 200 and body["outputs"][0]["data"][0].endswith(":1:RED"),
              "inception_onnx REST classification: %d %s" % (status, str(body)[:300]))

        # --- sequence models: refused, naming the field infergate does not serve
        index = {m.name: (m.state, m.reason) for m in stub.RepositoryIndex(pb.RepositoryIndexRequest()).models}
        check(len(index) == 8, "repository index: %s" % index)
        for name in ("simple_sequence", "simple_dyna_sequence"):
            state, reason = index.get(name, ("", ""))
            check(state == "UNAVAILABLE" and "sequence_batching" in reason and "not supported" in reason,
                  "%s: %s %r" % (name, state, reason))

        # --- Triton's error texts, on gRPC and REST (infergate's detail may follow)
        ok_inputs = [("INPUT0", "INT32", [1, 16], raw32(a), None), ("INPUT1", "INT32", [1, 16], raw32(b), None)]
        cases = [
            ("unknown model", infer("nope", ok_inputs), grpc.StatusCode.NOT_FOUND, 404,
             "Request for unknown model: 'nope' is not found"),
            ("an unknown version", infer("simple", ok_inputs, model_version="9"), grpc.StatusCode.NOT_FOUND, 404,
             "Request for unknown model: 'simple' version 9 is not found"),
            ("raw and typed contents", infer("simple", [
                ("INPUT0", "INT32", [1, 16], raw32(a), lambda c: c.int_contents.extend(a)),
                ("INPUT1", "INT32", [1, 16], raw32(b), None)]), grpc.StatusCode.INVALID_ARGUMENT, None,
             "contents field must not be specified when using raw_input_contents for 'INPUT0' for model 'simple'"),
            ("an input missing", infer("simple", ok_inputs[:1]), grpc.StatusCode.INVALID_ARGUMENT, 400,
             "expected 2 inputs but got 1 inputs for model 'simple'"),
            ("an unknown input", infer("simple", [ok_inputs[0], ("INPUTX", "INT32", [1, 16], raw32(b), None)]),
             grpc.StatusCode.INVALID_ARGUMENT, 400, "unexpected inference input 'INPUTX' for model 'simple'"),
            ("a wrong datatype", infer("simple", [("INPUT0", "FP32", [1, 16], raw32(a), None), ok_inputs[1]]),
             grpc.StatusCode.INVALID_ARGUMENT, 400,
             "inference input 'INPUT0' data-type is 'FP32', but model 'simple' expects 'INT32'"),
            ("a wrong shape", infer("simple", [("INPUT0", "INT32", [1, 15], raw32(a)[:60], None), ok_inputs[1]]),
             grpc.StatusCode.INVALID_ARGUMENT, 400,
             "unexpected shape for input 'INPUT0' for model 'simple'. Expected [-1,16], got [1,15]"),
            ("a byte size mismatch", infer("simple", [("INPUT0", "INT32", [1, 16], raw32(a)[:60], None), ok_inputs[1]]),
             grpc.StatusCode.INVALID_ARGUMENT, None,
             "input byte size mismatch for input 'INPUT0' for model 'simple'. Expected 64, got 60"),
            ("too big a batch", infer("simple", [("INPUT0", "INT32", [9, 16], raw32(a) * 9, None),
                                                 ("INPUT1", "INT32", [9, 16], raw32(b) * 9, None)]),
             grpc.StatusCode.INVALID_ARGUMENT, 400, "inference request batch-size must be <= 8 for 'simple'"),
        ]
        for what, request, code, http_status, text in cases:
            got_code, details = grpc_error(lambda: stub.ModelInfer(request))
            check(got_code == code and details.startswith(text), "gRPC %s: %s %r, wanted %s %r" %
                  (what, got_code, details, code, text))
            if http_status is None:
                continue  # a gRPC-only form (raw contents)
            document = {"inputs": [{"name": t.name, "datatype": t.datatype, "shape": list(t.shape),
                                    "data": list(struct.unpack("<%di" % (len(request.raw_input_contents[i]) // 4),
                                                               request.raw_input_contents[i]))}
                                   for i, t in enumerate(request.inputs)]}
            version = "/versions/" + request.model_version if request.model_version else ""
            status, body = rest_json("/v2/models/%s%s/infer" % (request.model_name, version), document)
            check(status == http_status and body.get("error", "").startswith(text),
                  "REST %s: %d %s, wanted %d %r" % (what, status, body, http_status, text))

        # --- model control: unload and load again; a load that fails says so
        stub.RepositoryModelUnload(pb.RepositoryModelUnloadRequest(model_name="simple"))
        check(not stub.ModelReady(pb.ModelReadyRequest(name="simple")).ready, "simple ready after unload")
        stub.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name="simple"))
        check(stub.ModelReady(pb.ModelReadyRequest(name="simple")).ready, "simple not ready after load")
        code, details = grpc_error(lambda: stub.RepositoryModelLoad(
            pb.RepositoryModelLoadRequest(model_name="simple_sequence")))
        check(code != grpc.StatusCode.OK and "failed to load" in details and "sequence_batching" in details,
              "loading simple_sequence: %s %r" % (code, details))
        status, body = rest_json("/v2/repository/models/simple_sequence/load", {})
        check(status == 400 and "failed to load" in body.get("error", ""), "REST load: %d %s" % (status, body))

        channel.close()
        check(server.stop() == 0, "server exit code")
        print("PASS: %d checks" % checks_made())
    finally:
        if server is not None and server.proc.poll() is None:
            server.proc.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
