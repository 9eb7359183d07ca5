#!/usr/bin/env python3
"""KServe's `pytorch` model format without TorchServe, through the real
server: a TorchServe model store laid out as KServe mounts it
(config/config.properties with KServe's own sample keys, model-store/*.mar),
with archives written at test time the way torch-model-archiver writes them
(a zip of MAR-INF/MANIFEST.json, the serialized TorchScript file and extra
files) around models saved by Debian 13's PyTorch:

  - a base_handler model answers as PyTorch's module does over TorchServe's
    REST API (/predictions/{model}[/{version}]), KServe V1
    (/v1/models/{model}:predict, also with {"data": ...} instances and more
    instances than one batch holds), and the Open Inference Protocol;
  - TorchServe's version names choose the archive; the snapshot's default
    version answers when none is named;
  - the snapshot's batchSize and maxBatchDelay are served: concurrent
    requests run in batches of at most batchSize, and some of more than one;
  - /ping, /models, /models/{m}[/all], /v1/models/{m} answer as TorchServe
    and KServe do;
  - a custom-handler archive, an eager model, a zip-slip archive and an
    oversized one are refused with the reason named, nothing is written
    outside the server's work folder, and the other models serve;
  - bad bodies get 400 naming what is wrong, an unknown model 404;
  - the work folder is gone after the server exits.
"""
import concurrent.futures
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from igtest import Server, check, checks_made, fail, generate_stubs, required_arguments  # noqa: E402


def write_mar(path, model_name, version, serialized_name, serialized_bytes, handler, extra=None,
              model_file=None, raw_entries=None, config_file=None):
    """An archive as torch-model-archiver writes it (deflated zip, manifest
    first, files at the root)."""
    manifest = {"createdOn": "26/11/2026 12:00:00", "runtime": "python",
                "model": {"modelName": model_name, "serializedFile": serialized_name, "handler": handler,
                          "modelVersion": version},
                "archiverVersion": "0.12.0"}
    if model_file:
        manifest["model"]["modelFile"] = model_file
    if config_file:
        manifest["model"]["configFile"] = config_file
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("MAR-INF/MANIFEST.json", json.dumps(manifest, indent=2))
        z.writestr(serialized_name, serialized_bytes)
        for name, data in (extra or {}).items():
            z.writestr(name, data)
        for name, data in (raw_entries or []):
            z.writestr(zipfile.ZipInfo(name), data)


def http(base, method, path, body=None, headers=None):
    """(status, parsed JSON or text) of one request."""
    data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            status, text = r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode()
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


def close(a, b, tol=1e-4):
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(close(x, y, tol) for x, y in zip(a, b))
    return abs(a - b) <= tol * (1 + abs(b))


def make_images():
    """A JPEG and a PNG of odd sizes (the centre crop's rounding), and a
    grayscale JPEG, an RGBA PNG and two palette PNGs, drawn with Pillow."""
    import random
    from PIL import Image, ImageDraw
    rng = random.Random(5)
    out = {}
    for name, size, fmt in (("photo.jpg", (333, 250), "JPEG"), ("drawing.png", (281, 500), "PNG")):
        img = Image.new("RGB", size)
        draw = ImageDraw.Draw(img)
        for _ in range(40):
            x0, y0 = rng.randrange(size[0]), rng.randrange(size[1])
            draw.ellipse([x0, y0, x0 + rng.randrange(10, 120), y0 + rng.randrange(10, 120)],
                         fill=(rng.randrange(256), rng.randrange(256), rng.randrange(256)))
        buf = io.BytesIO()
        img.save(buf, fmt, **({"quality": 90} if fmt == "JPEG" else {}))
        out[name] = buf.getvalue()
        if fmt == "JPEG":
            gray = io.BytesIO()
            img.convert("L").save(gray, "JPEG")
            out["gray.jpg"] = gray.getvalue()
        else:
            rgba = io.BytesIO()
            img.convert("RGBA").save(rgba, "PNG")
            out["alpha.png"] = rgba.getvalue()
            # Palette PNGs: 256 colours, and 16 with a transparent entry
            # (tRNS), which RGB drops as it drops alpha.
            palette = io.BytesIO()
            img.convert("P", palette=Image.ADAPTIVE, colors=256).save(palette, "PNG")
            out["palette.png"] = palette.getvalue()
            clear = io.BytesIO()
            img.convert("P", palette=Image.ADAPTIVE, colors=16).save(clear, "PNG", transparency=3)
            out["palette-trns.png"] = clear.getvalue()
    return out


def torchserve_top5(model, labels, image_bytes, convert_rgb=False):
    """What TorchServe's image_classifier answers: its own pipeline
    (Pillow, torchvision's transforms), softmax and top 5 by label; with
    `convert_rgb`, the image converted to RGB by Pillow first."""
    import torch
    import torch.nn.functional as F
    from PIL import Image
    from torchvision import transforms
    pipeline = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224), transforms.ToTensor(),
                                   transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])])
    image = Image.open(io.BytesIO(image_bytes))
    x = torch.stack([pipeline(image.convert("RGB") if convert_rgb else image)])
    with torch.no_grad():
        probs, classes = torch.topk(F.softmax(model(x), dim=1), 5, dim=1)
    return [(labels[str(c)][-1], p) for c, p in zip(classes[0].tolist(), probs[0].tolist())]


# Probabilities may differ from TorchServe's by this much: the pixels are
# the same (libjpeg-turbo, Pillow's resampling reproduced), so what is left
# is float rounding in the model.
PROBABILITY_TOLERANCE = 1e-5


def same_top5(got, want):
    """`got` (the server's {label: p}, in order) against TorchServe's list."""
    return isinstance(got, dict) and list(got.keys()) == [l for l, _ in want] and \
        all(abs(got[l] - p) <= PROBABILITY_TOLERANCE for l, p in want)


def check_image_classifier(base, grpc_address, api, ts, model, labels, images):
    import base64
    import grpc
    for name in ("photo.jpg", "drawing.png"):
        want = torchserve_top5(model, labels, images[name])
        status, got = http(base, "POST", "/predictions/clf", images[name], {"Content-Type": "application/octet-stream"})
        check(status == 200 and same_top5(got, want), "%s, raw body: %r, TorchServe says %r" % (name, got, want))
        boundary = "----infergate-test"
        form = ("--%s\r\nContent-Disposition: form-data; name=\"data\"; filename=\"%s\"\r\n"
                "Content-Type: application/octet-stream\r\n\r\n" % (boundary, name)).encode() + images[name] + \
            ("\r\n--%s--\r\n" % boundary).encode()
        status, got = http(base, "POST", "/predictions/clf/1.0", form,
                           {"Content-Type": "multipart/form-data; boundary=" + boundary})
        check(status == 200 and same_top5(got, want), "%s, multipart form: %r" % (name, got))
        answer = api.Predictions(ts.PredictionsRequest(model_name="clf", input={"data": images[name]}), timeout=60)
        check(same_top5(json.loads(answer.prediction), want), "%s over gRPC: %r" % (name, answer.prediction))
    b64 = {n: base64.b64encode(b).decode() for n, b in images.items()}
    status, got = http(base, "POST", "/v1/models/clf:predict",
                       {"instances": [{"data": b64["photo.jpg"]}, {"b64": b64["drawing.png"]}]})
    check(status == 200 and same_top5(got["predictions"][0], torchserve_top5(model, labels, images["photo.jpg"])) and
          same_top5(got["predictions"][1], torchserve_top5(model, labels, images["drawing.png"])),
          "KServe V1 with two base64 images: %r" % (got,))
    # Images TorchServe's own pipeline fails on are converted to RGB here,
    # as Pillow's convert("RGB") does (grey replicated, alpha dropped, a
    # palette looked up).
    for name in ("gray.jpg", "alpha.png", "palette.png", "palette-trns.png"):
        want = torchserve_top5(model, labels, images[name], convert_rgb=True)
        status, got = http(base, "POST", "/predictions/clf", images[name])
        check(status == 200 and same_top5(got, want), "%s: %r, Pillow's RGB through TorchServe's pipeline says %r"
              % (name, got, want))
    # Broken images are refused, naming why.
    status, body = http(base, "POST", "/predictions/clf", images["photo.jpg"][:len(images["photo.jpg"]) // 2])
    check(status == 400 and "truncated" in body["message"], "a truncated JPEG: %r" % (body,))
    status, body = http(base, "POST", "/predictions/clf", images["drawing.png"][:200])
    check(status == 400 and "PNG" in body["message"], "a truncated PNG: %r" % (body,))
    status, body = http(base, "POST", "/predictions/clf", b"GIF89a not served")
    check(status == 400 and "not a JPEG or PNG" in body["message"], "not an image: %r" % (body,))
    status, body = http(base, "POST", "/v1/models/clf:predict", {"instances": [{"data": "!!notbase64!!"}]})
    check(status == 400 and "instances[0]" in body["error"], "bad base64: %r" % (body,))


def main():
    args = required_arguments("--server", "--proto-dir")
    work = tempfile.mkdtemp(prefix="ig_torchserve_")
    server = None
    try:
        import torch
        generate_stubs(args.proto_dir, os.path.join(work, "stubs"))
        torch.manual_seed(7)
        # Two versions of one model, and the module each answers as.
        modules = {}
        store = os.path.join(work, "mnt", "models")
        os.makedirs(os.path.join(store, "config"))
        os.makedirs(os.path.join(store, "model-store"))
        for version, mar in (("1.0", "mlp.mar"), ("2.0", "mlp_v2.mar")):
            m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3)).eval()
            modules[version] = m
            buf = io.BytesIO()
            torch.jit.save(torch.jit.script(m), buf)
            # Version 2.0 carries a model-config.yaml, which is not read (a
            # warning says so; the snapshot's settings apply).
            write_mar(os.path.join(store, "model-store", mar), "mlp", version, "mlp.pt", buf.getvalue(),
                      "base_handler", **({"config_file": "model-config.yaml",
                                          "extra": {"model-config.yaml": "batchSize: 99\nmaxBatchDelay: 1\n"}}
                                         if version == "2.0" else {}))
        # Archives that must be refused, each for its own reason.
        tiny = io.BytesIO()
        torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), tiny)
        write_mar(os.path.join(store, "model-store", "custom.mar"), "custom", "1.0", "model.pt", tiny.getvalue(),
                  "my_handler.py", extra={"my_handler.py": "from ts.torch_handler.base_handler import BaseHandler\n"})
        write_mar(os.path.join(store, "model-store", "eager.mar"), "eager", "1.0", "weights.pth", b"state dict",
                  "base_handler", model_file="net.py", extra={"net.py": "import torch\n"})
        write_mar(os.path.join(store, "model-store", "slip.mar"), "slip", "1.0", "model.pt", tiny.getvalue(),
                  "base_handler", raw_entries=[("../../escaped.txt", b"owned")])
        write_mar(os.path.join(store, "model-store", "big.mar"), "big", "1.0", "model.pt", tiny.getvalue(),
                  "base_handler", extra={"padding.bin": b"\0" * (4 << 20)})
        # An image classifier: TorchServe's image_classifier handler around a
        # small convolutional model, with ImageNet-style labels.
        torch.manual_seed(11)
        clf = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 5, stride=4), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(3),
                                  torch.nn.Flatten(), torch.nn.Linear(36, 12)).eval()
        with torch.no_grad():
            clf[4].weight.mul_(20)
        buf = io.BytesIO()
        torch.jit.save(torch.jit.script(clf), buf)
        labels = {str(i): ["n%08d" % i, "class_%d" % i] for i in range(12)}
        write_mar(os.path.join(store, "model-store", "clf.mar"), "clf", "1.0", "clf.pt", buf.getvalue(),
                  "image_classifier", extra={"index_to_name.json": json.dumps(labels)})
        images = make_images()
        snapshot = {"name": "startup.cfg", "modelCount": 7, "models": {
            "clf": {"1.0": {"defaultVersion": True, "marName": "clf.mar", "batchSize": 8, "maxBatchDelay": 5}},
            "mlp": {"1.0": {"defaultVersion": True, "marName": "mlp.mar", "minWorkers": 1, "maxWorkers": 5,
                            "batchSize": 4, "maxBatchDelay": 200, "responseTimeout": 60},
                    "2.0": {"marName": "mlp_v2.mar", "minWorkers": 1, "maxWorkers": 1, "batchSize": 4,
                            "maxBatchDelay": 200, "responseTimeout": 60}},
            "custom": {"1.0": {"defaultVersion": True, "marName": "custom.mar"}},
            "eager": {"1.0": {"defaultVersion": True, "marName": "eager.mar"}},
            "slip": {"1.0": {"defaultVersion": True, "marName": "slip.mar"}},
            "big": {"1.0": {"defaultVersion": True, "marName": "big.mar"}}}}
        with open(os.path.join(store, "config", "config.properties"), "w") as f:
            f.write("inference_address=http://0.0.0.0:8085\nmanagement_address=http://0.0.0.0:8085\n"
                    "metrics_address=http://0.0.0.0:8082\ngrpc_inference_port=7070\ngrpc_management_port=7071\n"
                    "enable_envvars_config=true\ninstall_py_dep_per_model=true\nenable_metrics_api=true\n"
                    "metrics_mode=prometheus\nNUM_WORKERS=1\nnumber_of_netty_threads=4\njob_queue_size=10\n"
                    "load_models=all\nmodel_store=/mnt/models/model-store\n"
                    "model_snapshot=" + json.dumps(snapshot) + "\n")

        tmp = os.path.join(work, "tmp")
        os.makedirs(tmp)
        os.environ["TMPDIR"] = tmp
        log = os.path.join(work, "server.log")
        server = Server(args.server, ["--model-repository=" + store, "--mar-max-bytes=1MiB", "--log-level=info",
                                      "--torchserve-metrics"], log)
        server.wait_serving()
        base = "http://" + server.http_address
        text = open(log).read()
        laid_out = re.search(r"laid out in (\S+)/repository", text)
        check(laid_out is not None, "the server names its work folder:\n" + text[-2000:])
        work_folder = laid_out.group(1)
        check("TorchServe archive mlp_v2.mar: its configFile 'model-config.yaml' is not read" in text,
              "no warning that mlp_v2.mar's model-config.yaml is not read:\n" + text[-2000:])
        check(work_folder.startswith(tmp), "the work folder %s is under TMPDIR" % work_folder)

        # Health, listings.
        check(http(base, "GET", "/ping") == (200, {"status": "Healthy"}), "/ping: %r" % (http(base, "GET", "/ping"),))
        status, listed = http(base, "GET", "/models")
        check(status == 200 and {"modelName": "mlp", "modelUrl": "mlp.mar"} in listed["models"],
              "/models lists mlp from mlp.mar: %r" % (listed,))
        status, described = http(base, "GET", "/models/mlp")
        check(status == 200 and len(described) == 1 and described[0]["modelVersion"] == "1.0" and
              described[0]["batchSize"] == 4 and described[0]["maxBatchDelay"] == 200,
              "/models/mlp describes the default version 1.0 with its batch size and delay: %r" % (described,))
        status, both = http(base, "GET", "/models/mlp/all")
        check(status == 200 and sorted(d["modelVersion"] for d in both) == ["1.0", "2.0"], "/models/mlp/all: %r" % both)
        check(http(base, "GET", "/v1/models/mlp") == (200, {"name": "mlp", "ready": True}), "V1 model ready")
        check(http(base, "GET", "/v1/models/nope")[0] == 404, "V1 unknown model: 404")

        # One instance over every protocol, against PyTorch.
        x = [[0.5, -1.0, 2.0, 0.25], [1.0, 1.0, -0.5, 0.0], [0.0, 0.1, 0.2, 0.3], [3.0, -2.0, 1.0, 0.5],
             [-1.0, -1.0, -1.0, -1.0], [0.7, 0.7, 0.7, 0.7]]
        with torch.no_grad():
            want = {v: m(torch.tensor(x)).tolist() for v, m in modules.items()}
        status, got = http(base, "POST", "/predictions/mlp", x[0])
        check(status == 200 and close(got, want["1.0"][0]), "TorchServe REST, default version: %r %r" % (status, got))
        status, got = http(base, "POST", "/predictions/mlp/2.0", {"data": x[1]})
        check(status == 200 and close(got, want["2.0"][1]), "TorchServe REST, version 2.0, {data}: %r" % (got,))
        status, got = http(base, "POST", "/predictions/mlp/1.0", x[2], {"Content-Type": "application/json"})
        check(status == 200 and close(got, want["1.0"][2]), "TorchServe REST, version 1.0: %r" % (got,))
        status, got = http(base, "POST", "/v1/models/mlp:predict", {"instances": x})
        check(status == 200 and close(got["predictions"], want["1.0"]),
              "KServe V1, 6 instances (two batches of at most 4): %r" % (got,))
        status, got = http(base, "POST", "/v1/models/mlp:predict", {"instances": [{"data": r} for r in x[:2]]})
        check(status == 200 and close(got["predictions"], want["1.0"][:2]), "KServe V1 {data} instances: %r" % (got,))
        oip = {"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": x[3]}]}
        status, got = http(base, "POST", "/v2/models/mlp/versions/2/infer", oip)
        check(status == 200 and close(got["outputs"][0]["data"], want["2.0"][3]),
              "Open Inference Protocol, version 2 (TorchServe's 2.0): %r" % (got,))

        # The snapshot's batching: 16 single requests, 8 at a time, run in
        # batches of at most batchSize 4. (At most 8 in flight: job_queue_size
        # is 10, and on a slow machine 16 at once can rightly fill the queue
        # and get 429.)
        def predict(i):
            return http(base, "POST", "/predictions/mlp", x[i % len(x)])
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(predict, range(16)))
        wrong = [(i, s, g, want["1.0"][i % len(x)]) for i, (s, g) in enumerate(answers)
                 if not (s == 200 and close(g, want["1.0"][i % len(x)]))]
        check(not wrong, "concurrent predictions answer right; wrong (index, status, got, expected): %r" % (wrong,))
        status, stats = http(base, "GET", "/v2/models/mlp/versions/1/stats")
        sizes = [b["batch_size"] for b in stats["model_stats"][0]["batch_stats"]]
        check(sizes and max(sizes) <= 4, "no batch holds more than batchSize 4: %r" % sizes)
        check(any(s > 1 for s in sizes), "maxBatchDelay 200 ms lets batches form: %r" % sizes)

        # Refused archives: named reasons, the other models unaffected.
        text = open(log).read()
        for mar, needle in (("custom.mar", "my_handler.py"), ("eager.mar", "net.py"),
                            ("slip.mar", "outside the archive's folder"), ("big.mar", "limit of 1048576 bytes")):
            check(re.search(r"TorchServe archive %s is not served: .*%s" % (re.escape(mar), re.escape(needle)), text),
                  "the log names why %s is refused (%s)" % (mar, needle))
        status, body = http(base, "POST", "/predictions/custom", [1.0, 2.0])
        check(status == 400 and body["type"] == "BadRequestException" and "my_handler.py" in body["message"] and
              "torch.jit.script" in body["message"], "a refused model's requests say why: %r %r" % (status, body))
        status, body = http(base, "POST", "/predictions/big", [1.0, 2.0])
        check(status == 400 and "1048576" in body["message"], "oversized: %r" % (body,))
        for root, _, files in os.walk(work):
            check("escaped.txt" not in files, "zip-slip wrote %s/escaped.txt" % root)

        # Bad requests name what is wrong.
        status, body = http(base, "POST", "/predictions/nope", [1.0])
        check(status == 404 and body["type"] == "ModelNotFoundException", "unknown model: %r %r" % (status, body))
        status, body = http(base, "POST", "/predictions/mlp", b"[1, 2")
        check(status == 400 and "not valid JSON" in body["message"], "broken JSON: %r" % (body,))
        status, body = http(base, "POST", "/predictions/mlp", [[1.0, 2.0], [3.0]])
        check(status == 400 and "body[1]" in body["message"], "a ragged list names where: %r" % (body,))
        status, body = http(base, "POST", "/predictions/mlp", ["a", "b", "c", "d"])
        check(status == 400 and "body[0]" in body["message"] and "number" in body["message"], "strings: %r" % (body,))
        status, body = http(base, "POST", "/predictions/mlp", [1.0, 2.0])
        # The archive declares no input shape, so the model itself refuses
        # it (as under TorchServe: 500, with the model's own words).
        check(status == 500 and "shapes cannot be multiplied" in body["message"], "a shape the model refuses: %r" % (body,))
        status, body = http(base, "POST", "/v1/models/mlp:predict", {"inputs": x})
        check(status == 400 and "instances" in body["error"], "V1 without instances: %r" % (body,))
        status, body = http(base, "POST", "/v1/models/mlp:predict", {"instances": [x[0], x[0][:3]]})
        check(status == 400 and "instances[1]" in body["error"], "V1 instances of two shapes: %r" % (body,))
        status, body = http(base, "POST", "/predictions/mlp/9.9", x[0])
        check(status == 404 and "9.9" in body["message"], "unknown version: %r" % (body,))
        check(http(base, "GET", "/predictions/mlp")[0] == 405, "GET on predictions: 405")

        # TorchServe's gRPC API, with stubs from its proto.
        import grpc
        stubs = os.path.join(work, "ts_stubs")
        os.makedirs(stubs)
        subprocess.run(["protoc", "-I", args.proto_dir, "--python_out", stubs, "--grpc_python_out", stubs,
                        "--plugin=protoc-gen-grpc_python=" + shutil.which("grpc_python_plugin"),
                        "torchserve/inference.proto"], check=True)
        sys.path.insert(0, stubs)
        from torchserve import inference_pb2 as ts, inference_pb2_grpc as ts_grpc
        from google.protobuf import empty_pb2
        channel = grpc.insecure_channel(server.address)
        api = ts_grpc.InferenceAPIsServiceStub(channel)
        health = json.loads(api.Ping(empty_pb2.Empty(), timeout=30).health)
        check(health == {"status": "Healthy"}, "gRPC Ping: %r" % (health,))
        answer = api.Predictions(ts.PredictionsRequest(model_name="mlp", input={"data": json.dumps(x[4]).encode()}),
                                 timeout=30)
        check(close(json.loads(answer.prediction), want["1.0"][4]), "gRPC Predictions: %r" % (answer.prediction,))
        answer = api.Predictions(ts.PredictionsRequest(model_name="mlp", model_version="2.0",
                                                       input={"body": json.dumps(x[5]).encode()}), timeout=30)
        check(close(json.loads(answer.prediction), want["2.0"][5]), "gRPC Predictions 2.0: %r" % (answer.prediction,))
        for bad, code, needle in (
                (ts.PredictionsRequest(model_name="nope", input={"data": b"[1]"}), grpc.StatusCode.NOT_FOUND, "nope"),
                (ts.PredictionsRequest(model_name="mlp", input={"x": b"[1]"}), grpc.StatusCode.INVALID_ARGUMENT,
                 "\"data\""),
                (ts.PredictionsRequest(model_name="mlp", input={"data": b"[1, 2"}), grpc.StatusCode.INVALID_ARGUMENT,
                 "input[\"data\"]"),
                (ts.PredictionsRequest(model_name="custom", input={"data": b"[1, 2]"}),
                 grpc.StatusCode.FAILED_PRECONDITION, "my_handler.py")):
            try:
                api.Predictions(bad, timeout=30)
                fail("expected %s for %r" % (code, bad))
            except grpc.RpcError as e:
                check(e.code() == code and needle in (e.details() or ""), "gRPC refusal: %s %s" % (e.code(), e.details()))

        # TorchServe's streaming RPCs are not served: UNIMPLEMENTED, saying so.
        for stream in (lambda: list(api.StreamPredictions(ts.PredictionsRequest(model_name="mlp"), timeout=30)),
                       lambda: list(api.StreamPredictions2(iter([ts.PredictionsRequest(model_name="mlp")]),
                                                          timeout=30))):
            try:
                stream()
                fail("a TorchServe streaming RPC answered")
            except grpc.RpcError as e:
                check(e.code() == grpc.StatusCode.UNIMPLEMENTED, "streaming RPC: %s %s" % (e.code(), e.details()))

        check_image_classifier(base, server.address, api, ts, clf, labels, images)
        channel.close()

        # TorchServe's metric names, by TorchServe's version names, beside infergate's.
        metrics = urllib.request.urlopen("http://%s/metrics" % server.metrics_address, timeout=30).read().decode()
        def value(name, model, version):
            m = re.search(r'^%s\{model_name="%s",model_version="%s"\} (\S+)$' % (name, model, version), metrics, re.M)
            return float(m.group(1)) if m else None
        requests_v2 = value("ts_inference_requests_total", "mlp", "2.0")
        check(requests_v2 == 3, "ts_inference_requests_total for mlp 2.0 (REST, OIP, gRPC): %r" % requests_v2)
        check((value("ts_inference_requests_total", "mlp", "1.0") or 0) >= 20, "mlp 1.0 requests counted")
        # TorchServe's latency names are infergate's duration sums, in microseconds.
        def total(pattern):
            return sum(float(v) for v in re.findall(pattern, metrics, re.M))
        for ts_name, ig_name, model in (("ts_inference_latency_microseconds", "infergate_request_duration_seconds",
                                         "mlp"),
                                        ("ts_queue_latency_microseconds", "infergate_queue_duration_seconds", "clf")):
            ts_total = total(r'^%s\{model_name="%s",model_version="[^"]*"\} (\S+)$' % (ts_name, model))
            ig_total = total(r'^%s_sum\{[^}]*model="%s"[^}]*\} (\S+)$' % (ig_name, model)) * 1e6
            check(ts_total > 0 and abs(ts_total - ig_total) <= 2 + 1e-6 * ig_total,
                  "%s for %s is %.1f us; %s sums to %.1f us" % (ts_name, model, ts_total, ig_name, ig_total))
        check("infergate_requests_total{" in metrics, "infergate's own names stay")
        decoded = re.search(r'^infergate_handler_input_duration_seconds_count\{model="clf"\} (\S+)$', metrics, re.M)
        check(decoded and float(decoded.group(1)) >= 8, "the image handler's input time is measured per image")

        code = server.stop()
        server = None
        check(code == 0, "clean exit: %r" % code)
        check(not os.path.exists(work_folder), "the work folder %s is removed at exit" % work_folder)

        # DELETE /models/{model} is an admin call: refused without the admin
        # token (403 on a default server, 401 with a token file and no
        # token), done with it.
        admin_token = "torchserve-test-admin-0123456789"
        with open(os.path.join(work, "admin.tok"), "w") as f:
            f.write(admin_token + "\n")
        server = Server(args.server, ["--model-repository=" + store, "--open-admin-api=false",
                                      "--admin-token-file=" + os.path.join(work, "admin.tok")],
                        os.path.join(work, "server-admin.log"))
        server.wait_serving()
        base = "http://" + server.http_address
        status, body = http(base, "DELETE", "/models/mlp")
        check(status in (401, 403), "DELETE /models/mlp without the admin token: %d %r" % (status, body))
        status, body = http(base, "DELETE", "/models/mlp", headers={"Authorization": "Bearer not-the-token-000000"})
        check(status in (401, 403), "DELETE /models/mlp with a wrong token: %d %r" % (status, body))
        check(http(base, "GET", "/models/mlp")[0] == 200, "a refused DELETE unregistered mlp")
        # Registering and scaling (POST /models?url=, PUT /models/{model}) are
        # admin calls too, and not served even with the token: archives come
        # from the store, workers from the server's flags.
        for method, path in (("POST", "/models?url=mlp.mar"), ("PUT", "/models/mlp?min_worker=2")):
            status, body = http(base, method, path)
            check(status in (401, 403), "%s %s without the admin token: %d %r" % (method, path, status, body))
            status, body = http(base, method, path, headers={"Authorization": "Bearer " + admin_token})
            check(status == 501 and "POST and PUT /models are not served" in body.get("message", ""),
                  "%s %s with the admin token: %d %r" % (method, path, status, body))
        check(http(base, "GET", "/models/mlp")[0] == 200, "a refused POST or PUT changed mlp")
        status, body = http(base, "DELETE", "/models/mlp", headers={"Authorization": "Bearer " + admin_token})
        check(status == 200, "DELETE /models/mlp with the admin token: %d %r" % (status, body))
        code = server.stop()
        server = None
        check(code == 0, "clean exit with tokens: %r" % code)
        print("PASS: %d checks" % checks_made())
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
