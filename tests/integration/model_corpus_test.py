#!/usr/bin/env python3
"""Models saved the way PyTorch 2.x users save them, served and checked.

Debian 13's PyTorch (python3-torch 2.6) builds and saves each model at test
time (nothing is committed as a binary): a scripted nn.TransformerEncoder, a
traced attention block on F.scaled_dot_product_attention, a ResNet-style
conv net with BatchNorm, an embedding + LayerNorm + GELU text encoder, and a
model with two inputs and a dict output. The real server serves them on the
CPU and on simulated mps and cuda:0, over infergate.v1, the Open Inference
Protocol's gRPC and its REST API. Every answer must equal PyTorch's own
answer for the same model in the dtype the server reports it ran in, within
that dtype's tolerance. LibTorch 1.13 loads none of the first two.

A model saved by a newer PyTorch than the server's LibTorch (an unknown op,
a newer file format) must be refused at load with a message that names the
op or the file version and the server's LibTorch version.
"""
import json
import os
import shutil
import struct
import sys
import tempfile
import urllib.error
import urllib.request
import zipfile
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from igtest import Server, generate_stubs, reference_stubs, required_arguments  # noqa: E402

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from typing import Dict  # noqa: E402

BATCH = 2
SEQ = 8
DIM = 32
VOCAB = 100


class Attention(nn.Module):
    """One self-attention block as transformers since PyTorch 2.0 write it."""

    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(DIM, 3 * DIM)
        self.out = nn.Linear(DIM, DIM)
        self.norm = nn.LayerNorm(DIM)

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = q.view(b, s, 4, DIM // 4).transpose(1, 2)
        k = k.view(b, s, 4, DIM // 4).transpose(1, 2)
        v = v.view(b, s, 4, DIM // 4).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.norm(x + self.out(y.transpose(1, 2).reshape(b, s, DIM)))


class Block(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.c1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.b1 = nn.BatchNorm2d(channels)
        self.c2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.b2 = nn.BatchNorm2d(channels)

    def forward(self, x):
        return F.relu(x + self.b2(self.c2(F.relu(self.b1(self.c1(x))))))


class ResNetish(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        self.blocks = nn.Sequential(Block(16), Block(16))
        self.head = nn.Linear(16, 10)

    def forward(self, image):
        h = self.blocks(self.stem(image))
        return self.head(F.adaptive_avg_pool2d(h, 1).flatten(1))


class TextEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.norm = nn.LayerNorm(DIM)
        self.proj = nn.Linear(DIM, DIM)

    def forward(self, ids):
        return self.proj(F.gelu(self.norm(self.embed(ids)))).mean(dim=1)


class TwoInputsDictOutput(nn.Module):
    def __init__(self):
        super().__init__()
        self.mix = nn.Linear(DIM, DIM)

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> Dict[str, torch.Tensor]:
        return {"mixed": self.mix(a) * torch.sigmoid(b), "norm": ((a - b) ** 2).sum(dim=-1, keepdim=True).sqrt()}


def init_batchnorm_statistics(module):
    """Non-trivial running statistics, as a trained network has."""
    g = torch.Generator().manual_seed(3)
    for m in module.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)


def make_corpus(root):
    """Saves each model and its config; returns {name: (inputs, outputs)}."""
    torch.manual_seed(0)
    corpus = {}

    def save(name, module, config, inputs, outputs):
        os.makedirs(os.path.join(root, name, "1"))
        module.save(os.path.join(root, name, "1", "model.pt"))
        with open(os.path.join(root, name, "config.pbtxt"), "w") as f:
            f.write(config)
        corpus[name] = (inputs, outputs)

    layer = nn.TransformerEncoderLayer(d_model=DIM, nhead=4, dim_feedforward=64, dropout=0.0, batch_first=True)
    encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False).eval()
    scripted = torch.jit.script(encoder)
    # forward(src, mask=None, src_key_padding_mask=None, is_causal=None):
    # the optional arguments stay at their defaults unless declared.
    save("transformer", scripted,
         'max_batch_size: 8\ninputs { name: "src" dtype: FLOAT32 dims: [%d, %d] }\n'
         'outputs { name: "y" dtype: FLOAT32 dims: [%d, %d] }\n' % (SEQ, DIM, SEQ, DIM),
         [("src", "float32", [SEQ, DIM])], ["y"])
    # The same encoder given its padding mask (past the skipped `mask`).
    save("transformer_padded", scripted,
         'max_batch_size: 8\ninputs { name: "src" dtype: FLOAT32 dims: [%d, %d] }\n'
         'inputs { name: "src_key_padding_mask" dtype: BOOL dims: [%d] }\n'
         'outputs { name: "y" dtype: FLOAT32 dims: [%d, %d] }\n' % (SEQ, DIM, SEQ, SEQ, DIM),
         [("src", "float32", [SEQ, DIM]), ("src_key_padding_mask", "bool", [SEQ])], ["y"])

    attention = Attention().eval()
    save("attention", torch.jit.trace(attention, torch.randn(1, SEQ, DIM)),
         'max_batch_size: 8\ninputs { name: "x" dtype: FLOAT32 dims: [%d, %d] }\n'
         'outputs { name: "y" dtype: FLOAT32 dims: [%d, %d] }\n' % (SEQ, DIM, SEQ, DIM),
         [("x", "float32", [SEQ, DIM])], ["y"])

    resnet = ResNetish()
    init_batchnorm_statistics(resnet)
    resnet.eval()
    save("resnet", torch.jit.trace(resnet, torch.randn(1, 3, 32, 32)),
         'max_batch_size: 8\ninputs { name: "image" dtype: FLOAT32 dims: [3, 32, 32] }\n'
         'outputs { name: "logits" dtype: FLOAT32 dims: [10] }\n',
         [("image", "float32", [3, 32, 32])], ["logits"])

    save("text_encoder", torch.jit.script(TextEncoder().eval()),
         'max_batch_size: 8\ninputs { name: "ids" dtype: INT64 dims: [%d] }\n'
         'outputs { name: "embedding" dtype: FLOAT32 dims: [%d] }\n' % (SEQ, DIM),
         [("ids", "int64", [SEQ])], ["embedding"])

    save("two_inputs", torch.jit.script(TwoInputsDictOutput().eval()),
         'max_batch_size: 8\ninputs { name: "a" dtype: FLOAT32 dims: [%d] }\n'
         'inputs { name: "b" dtype: FLOAT32 dims: [%d] }\n'
         'outputs { name: "mixed" dtype: FLOAT32 dims: [%d] }\n'
         'outputs { name: "norm" dtype: FLOAT32 dims: [1] }\n' % (DIM, DIM, DIM),
         [("a", "float32", [DIM]), ("b", "float32", [DIM])], ["mixed", "norm"])
    return corpus


def make_newer_than_libtorch(root, template):
    """Two archives a newer PyTorch could write, made from `template` (a
    TorchScript archive): one calling an op this LibTorch lacks, one with a
    file format version beyond any LibTorch's."""
    def rewrite(name, edit):
        os.makedirs(os.path.join(root, name, "1"))
        with zipfile.ZipFile(template) as src, \
                zipfile.ZipFile(os.path.join(root, name, "1", "model.pt"), "w") as dst:
            for item in src.infolist():
                dst.writestr(item, edit(item.filename, src.read(item.filename)))
        with open(os.path.join(root, name, "config.pbtxt"), "w") as f:
            f.write('inputs { name: "a" dtype: FLOAT32 dims: [%d] }\ninputs { name: "b" dtype: FLOAT32 dims: [%d] }\n'
                    % (DIM, DIM))

    def unknown_op(filename, data):
        if filename.endswith(".py") and b"torch.sigmoid" in data:
            return data.replace(b"torch.sigmoid", b"torch.sigmoid_from_the_future")
        return data

    def newer_format(filename, data):
        return b"99\n" if filename.endswith("/version") or filename == "version" else data

    rewrite("future_op", unknown_op)
    rewrite("future_format", newer_format)


DTYPES = {"FP32": torch.float32, "FP16": torch.float16, "BF16": torch.bfloat16}
# Largest error allowed, relative to the reference output's largest
# magnitude: the server and PyTorch run the same kernels in the same dtype,
# so only batching order and summation differ.
TOLERANCE = {"FP32": 1e-4, "FP16": 2e-2, "BF16": 5e-2}


def reference(model_file, inputs, dtype_name):
    """PyTorch's answer for `inputs` ({forward() argument: tensor}) with the
    model in `dtype_name`, as the server runs it: floating parameters,
    buffers and inputs cast to it."""
    m = torch.jit.load(model_file).eval()
    dtype = DTYPES[dtype_name]
    m = m.to(dtype)
    kwargs = {name: t.to(dtype) if t.is_floating_point() else t for name, t in inputs.items()}
    with torch.inference_mode():
        out = m(**kwargs)
    if isinstance(out, dict):
        return {k: v.float() for k, v in out.items()}
    if isinstance(out, (tuple, list)):
        return [v.float() for v in out]
    return out.float()


def random_input(dtype, shape, seed):
    g = torch.Generator().manual_seed(seed)
    if dtype == "int64":
        return torch.randint(0, VOCAB, [BATCH] + shape, generator=g)
    if dtype == "bool":  # a padding mask: the first half of each row is never padding
        mask = torch.rand([BATCH] + shape, generator=g) > 0.5
        mask[..., : shape[-1] // 2] = False
        return mask
    return torch.randn([BATCH] + shape, generator=g)


def main():
    args = required_arguments("--server", "--proto-dir", "--reference-dir")

    work = tempfile.mkdtemp(prefix="ig_corpus_")
    server = None
    failures = []
    checked = 0
    try:
        import grpc
        generate_stubs(args.proto_dir, os.path.join(work, "stubs"))
        reference_stubs(args.reference_dir, os.path.join(work, "ref"))
        import grpc_service_pb2 as pb
        import grpc_service_pb2_grpc as pb_grpc
        from infergate.v1 import inference_pb2 as v1
        from infergate.v1 import inference_pb2_grpc as v1_grpc
        from infergate.v1 import tensor_pb2 as v1t

        models = os.path.join(work, "models")
        os.makedirs(models)
        corpus = make_corpus(models)
        make_newer_than_libtorch(models, os.path.join(models, "two_inputs", "1", "model.pt"))
        print("PyTorch %s saved %d models" % (torch.__version__, len(corpus)))

        server = Server(args.server, ["--model-repository=" + models, "--simulate-devices=mps,cuda:0",
                                      "--simulate-mps-unsupported-ops="], os.path.join(work, "server.log"))
        server.wait_serving()
        channel = grpc.insecure_channel(server.address)
        v1stub = v1_grpc.InferenceServiceStub(channel)
        v2stub = pb_grpc.GRPCInferenceServiceStub(channel)

        v1_dtype = {"float32": v1t.FLOAT32, "int64": v1t.INT64, "bool": v1t.BOOL}
        v2_dtype = {"float32": "FP32", "int64": "INT64", "bool": "BOOL"}
        v1_dtype_name = {v1t.FLOAT32: "FP32", v1t.FLOAT16: "FP16", v1t.BFLOAT16: "BF16"}

        def raw(t):
            return t.contiguous().numpy().tobytes()

        def floats_of(data, shape):
            n = 1
            for d in shape:
                n *= d
            return torch.tensor(struct.unpack("<%df" % n, data), dtype=torch.float32).reshape(shape)

        def via_v1(model, tensors, device):
            req = v1.InferRequest(model=model, device=device)
            for (name, dtype, _), t in tensors:
                req.inputs.add(name=name, dtype=v1_dtype[dtype], shape=list(t.shape), data=raw(t))
            resp = v1stub.Infer(req, timeout=120)
            outs = {o.name: floats_of(o.data, list(o.shape)) for o in resp.outputs}
            return outs, v1_dtype_name.get(resp.placement.dtype, "?"), resp.placement.device

        def via_v2(model, tensors, device):
            req = pb.ModelInferRequest(model_name=model)
            req.parameters["device"].string_param = device
            for (name, dtype, _), t in tensors:
                req.inputs.add(name=name, datatype=v2_dtype[dtype], shape=list(t.shape))
                req.raw_input_contents.append(raw(t))
            resp = v2stub.ModelInfer(req, timeout=120)
            outs = {o.name: floats_of(data, list(o.shape)) for o, data in zip(resp.outputs, resp.raw_output_contents)}
            return outs, resp.parameters["dtype"].string_param, resp.parameters["device"].string_param

        def via_rest(model, tensors, device):
            body = {"inputs": [{"name": name, "datatype": v2_dtype[dtype], "shape": list(t.shape),
                                "data": t.flatten().tolist()} for (name, dtype, _), t in tensors],
                    "parameters": {"device": device}}
            req = urllib.request.Request("http://%s/v2/models/%s/infer" % (server.http_address, model),
                                         data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=120) as r:
                resp = json.loads(r.read())
            outs = {o["name"]: torch.tensor(o["data"], dtype=torch.float32).reshape(o["shape"])
                    for o in resp["outputs"]}
            return outs, resp["parameters"]["dtype"], resp["parameters"]["device"]

        for model, (inputs, outputs) in corpus.items():
            model_file = os.path.join(models, model, "1", "model.pt")
            for device in ["cpu", "mps", "cuda:0"]:
                for protocol, call in [("v1", via_v1), ("v2-grpc", via_v2), ("v2-rest", via_rest)]:
                    seed = zlib.crc32(("%s/%s/%s" % (model, device, protocol)).encode()) & 0xFFFF
                    tensors = [(spec, random_input(spec[1], spec[2], seed + i)) for i, spec in enumerate(inputs)]
                    where = "%s on %s over %s" % (model, device, protocol)
                    try:
                        got, dtype, ran_on = call(model, tensors, device)
                    except (grpc.RpcError, urllib.error.URLError) as e:
                        failures.append("%s: %s" % (where, getattr(e, "details", lambda: e)()))
                        continue
                    if ran_on != device:
                        failures.append("%s ran on %s" % (where, ran_on))
                    want = reference(model_file, {spec[0]: t for spec, t in tensors}, dtype)
                    if not isinstance(want, dict):
                        want = dict(zip(outputs, want if isinstance(want, list) else [want]))
                    for name in outputs:
                        checked += 1
                        if name not in got:
                            failures.append("%s: no output %s (got %s)" % (where, name, list(got)))
                            continue
                        w, g = want[name], got[name]
                        if list(w.shape) != list(g.shape):
                            failures.append("%s: %s has shape %s, PyTorch %s" % (where, name, list(g.shape),
                                                                                list(w.shape)))
                            continue
                        err = (g - w).abs().max().item()
                        scale = max(w.abs().max().item(), 1.0)
                        ok = err <= TOLERANCE[dtype] * scale and torch.isfinite(g).all().item()
                        print("%-40s %-9s %s max error %.2e (scale %.2f)%s" % (where, name, dtype, err, scale,
                                                                           "" if ok else "  FAIL"))
                        if not ok:
                            failures.append("%s: %s in %s differs from PyTorch by %.3g (tolerance %.3g x %.2f)" %
                                            (where, name, dtype, err, TOLERANCE[dtype], scale))

        # A model from a newer PyTorch: a clear load error, naming the op or
        # the file version and this LibTorch.
        for model, needles in [("future_op", ["sigmoid_from_the_future", "LibTorch"]),
                               ("future_format", ["version", "99", "LibTorch"])]:
            req = pb.ModelInferRequest(model_name=model)
            req.inputs.add(name="a", datatype="FP32", shape=[DIM])
            req.inputs.add(name="b", datatype="FP32", shape=[DIM])
            req.raw_input_contents.extend([b"\0" * 4 * DIM, b"\0" * 4 * DIM])
            try:
                v2stub.ModelInfer(req, timeout=120)
                failures.append("%s served a model this LibTorch cannot load" % model)
            except grpc.RpcError as e:
                msg = e.details()
                print("%s: %s: %s" % (model, e.code(), msg))
                if e.code() == grpc.StatusCode.INTERNAL:
                    failures.append("%s: INTERNAL for a model from a newer PyTorch: %s" % (model, msg))
                for n in needles:
                    if n not in msg:
                        failures.append("%s: the load error does not name %r: %s" % (model, n, msg))
                if "def forward" in msg or "Traceback" in msg:
                    failures.append("%s: the load error carries TorchScript source: %s" % (model, msg))
        channel.close()
    finally:
        if server is not None:
            server.stop_noting(failures)
        shutil.rmtree(work, ignore_errors=True)
    if failures:
        for f in failures:
            print("FAIL: " + f)
        print("%d passed, %d failed" % (checked, len(failures)))
        sys.exit(1)
    print("model corpus: %d outputs checked against PyTorch %s" % (checked, torch.__version__))


if __name__ == "__main__":
    main()
