#!/usr/bin/env python3
"""Makes the churn benchmark's model repository (bench/churn.py): COUNT
TorchScript models, FP32 throughout (the config says so, so that a model
takes the same bytes on every device), and models.json, what churn.py reads
of them (below).

    make_churn_models.py OUT_DIR [--count 24] [--min-mb 20] [--max-mb 200]
                         [--mix gemv|real] [--scale 1]

--mix gemv (the default): churn_00 .. churn_NN, whose parameters take MIN_MB
to MAX_MB (spread evenly), each one square linear layer with a ReLU, so that
a request costs about one read of its weights (a GEMV): compute per byte far
below any real model's.

--mix real: models with the compute per byte of real ones beside GEMV
layers. A third of COUNT (at least one) are ResNet-50-like conv nets
(churn_NN_conv: the bottleneck stages 3-4-6-3 of ResNet-50, batch norm, a
1000-way head; 25.6 M parameters, 102 MB, and 8.2 GFLOP, 4.1 billion
multiply-adds, per 224x224 image), a sixth (at least one) BERT-base-like
encoders (churn_NN_encoder: 30,522 token embeddings, 512 positions, 12
layers of width 768 with 12 heads and a 3,072 feed-forward, a pooler;
109 M parameters, 438 MB, and 21.7 GFLOP for its 128 tokens, INT64 token
ids in), the rest GEMV layers of MIN_MB to MAX_MB as above.
--scale S shrinks the conv nets' and encoders' widths (and the images and
token counts) by S, for tests (their parameters by about S squared).

models.json: {"format": "infergate-churn-models/1", "mix": ..., "models":
[{"name", "kind" (gemv, conv, encoder), "input": {"name", "dtype", "dims"
(one row's, without the batch)}, "bytes" (parameters and buffers), "gflop"
(one row's forward pass, counted by torch's FLOP counter where it has one,
else null)}]}. Prints one line per model: name, kind, bytes, GFLOP."""
import argparse
import json
import math
import os

import torch
import torch.nn.functional as F

FORMAT = "infergate-churn-models/1"


class Layer(torch.nn.Module):
    """One square linear layer and a ReLU: a GEMV per row."""

    def __init__(self, width):
        super().__init__()
        self.fc = torch.nn.Linear(width, width)

    def forward(self, x):
        return torch.relu(self.fc(x))


class Bottleneck(torch.nn.Module):
    """ResNet's bottleneck block: 1x1 down, 3x3 (with the stride), 1x1 up,
    batch norm after each, the input added back (through a 1x1 projection
    where the shape changes)."""

    def __init__(self, cin, mid, cout, stride):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(cin, mid, 1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(mid)
        self.conv2 = torch.nn.Conv2d(mid, mid, 3, stride=stride, padding=1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(mid)
        self.conv3 = torch.nn.Conv2d(mid, cout, 1, bias=False)
        self.bn3 = torch.nn.BatchNorm2d(cout)
        self.project = stride != 1 or cin != cout
        self.down = torch.nn.Sequential(torch.nn.Conv2d(cin, cout, 1, stride=stride, bias=False),
                                        torch.nn.BatchNorm2d(cout)) if self.project else torch.nn.Identity()

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = torch.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return torch.relu(y + self.down(x))


class ConvNet(torch.nn.Module):
    """ResNet-50's shape: a 7x7 stem, four stages of 3, 4, 6 and 3
    bottlenecks (widths 64-512, out 4x), global pooling, a 1000-way head;
    `base` 64 is ResNet-50's own width."""

    def __init__(self, base):
        super().__init__()
        self.stem = torch.nn.Sequential(torch.nn.Conv2d(3, base, 7, stride=2, padding=3, bias=False),
                                        torch.nn.BatchNorm2d(base), torch.nn.ReLU(),
                                        torch.nn.MaxPool2d(3, stride=2, padding=1))
        blocks = []
        cin = base
        for stage, count in enumerate((3, 4, 6, 3)):
            mid = base * 2 ** stage
            for i in range(count):
                blocks.append(Bottleneck(cin, mid, mid * 4, 2 if i == 0 and stage > 0 else 1))
                cin = mid * 4
        self.blocks = torch.nn.Sequential(*blocks)
        self.head = torch.nn.Linear(cin, 1000)

    def forward(self, x):
        y = self.blocks(self.stem(x))
        return self.head(torch.flatten(F.adaptive_avg_pool2d(y, 1), 1))


class EncoderLayer(torch.nn.Module):
    """A post-norm transformer encoder layer as BERT's: self-attention, then
    a GELU feed-forward, each added back and layer-normed."""

    def __init__(self, width, heads, ffn):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.out = torch.nn.Linear(width, width)
        self.norm1 = torch.nn.LayerNorm(width)
        self.up = torch.nn.Linear(width, ffn)
        self.down = torch.nn.Linear(ffn, width)
        self.norm2 = torch.nn.LayerNorm(width)

    def forward(self, x):
        b, t, w = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, w // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, t, w)
        x = self.norm1(x + self.out(a))
        return self.norm2(x + self.down(F.gelu(self.up(x))))


class Encoder(torch.nn.Module):
    """BERT-base's shape: token and position embeddings, `layers` encoder
    layers, a tanh pooler over the first token."""

    def __init__(self, vocab, positions, width, heads, ffn, layers):
        super().__init__()
        self.tokens = torch.nn.Embedding(vocab, width)
        self.positions = torch.nn.Embedding(positions, width)
        self.norm = torch.nn.LayerNorm(width)
        self.layers = torch.nn.ModuleList([EncoderLayer(width, heads, ffn) for _ in range(layers)])
        self.pooler = torch.nn.Linear(width, width)

    def forward(self, ids):
        at = torch.arange(ids.shape[1], device=ids.device)
        x = self.norm(self.tokens(ids) + self.positions(at).unsqueeze(0))
        for layer in self.layers:
            x = layer(x)
        return torch.tanh(self.pooler(x[:, 0]))


def conv_spec(scale):
    base = max(4, int(round(64 * scale)))
    image = max(32, int(224 * scale) // 32 * 32)
    return ConvNet(base), {"name": "x", "dtype": "FLOAT32", "dims": [3, image, image]}


def encoder_spec(scale):
    heads = max(1, int(round(12 * scale)))
    width = 64 * heads
    tokens = max(8, int(128 * scale))
    model = Encoder(max(100, int(30522 * scale)), max(tokens, int(512 * scale)), width, heads, 4 * width,
                    max(2, int(round(12 * scale))))
    return model, {"name": "ids", "dtype": "INT64", "dims": [tokens]}


def gemv_spec(mb):
    width = max(8, int(math.sqrt(mb * 1e6 / 4)))
    return Layer(width), {"name": "x", "dtype": "FLOAT32", "dims": [width]}


def example_row(spec):
    dims = [1] + spec["dims"]
    if spec["dtype"] == "INT64":
        return torch.zeros(dims, dtype=torch.int64)
    return torch.zeros(dims)


def module_bytes(module):
    """The bytes of a module's parameters and buffers."""
    return sum(t.numel() * t.element_size() for t in list(module.parameters()) + list(module.buffers()))


def gflop(module, row):
    """One row's forward pass in GFLOP (torch's counter; None without one)."""
    try:
        from torch.utils.flop_counter import FlopCounterMode
    except ImportError:
        return None
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        module(row)
    return round(counter.get_total_flops() / 1e9, 4)


def plan(args):
    """(name, kind, maker) per model, in name order."""
    if args.mix == "gemv":
        counts = {"conv": 0, "encoder": 0}
    else:
        counts = {"conv": max(1, args.count // 3), "encoder": max(1, args.count // 6)}
    gemvs = args.count - counts["conv"] - counts["encoder"]
    if gemvs < 1:
        raise SystemExit("--count %d leaves no GEMV layer beside the mix's conv nets and encoders" % args.count)
    kinds = ["gemv"] * gemvs + ["conv"] * counts["conv"] + ["encoder"] * counts["encoder"]
    out, g = [], 0
    for i, kind in enumerate(kinds):
        if kind == "gemv":
            mb = args.min_mb + (args.max_mb - args.min_mb) * (g / max(1, gemvs - 1))
            g += 1
            out.append(("churn_%02d" % i, kind, lambda mb=mb: gemv_spec(mb)))
        elif kind == "conv":
            out.append(("churn_%02d_conv" % i, kind, lambda: conv_spec(args.scale)))
        else:
            out.append(("churn_%02d_encoder" % i, kind, lambda: encoder_spec(args.scale)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir")
    ap.add_argument("--count", type=int, default=24)
    ap.add_argument("--min-mb", type=float, default=20)
    ap.add_argument("--max-mb", type=float, default=200)
    ap.add_argument("--mix", choices=("gemv", "real"), default="gemv")
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    if args.count < 1 or args.min_mb <= 0 or args.max_mb < args.min_mb:
        ap.error("--count must be at least 1 and 0 < --min-mb <= --max-mb")
    if not 0 < args.scale <= 1:
        ap.error("--scale must be in (0, 1]")
    torch.manual_seed(args.seed)
    manifest = {"format": FORMAT, "mix": args.mix, "models": []}
    for name, kind, make in plan(args):
        module, spec = make()
        module.eval()
        row = example_row(spec)
        flops = round(2 * spec["dims"][0] ** 2 / 1e9, 4) if kind == "gemv" else gflop(module, row)
        with torch.no_grad():
            scripted = torch.jit.script(module)
            scripted(row)  # runs as scripted, or fails here rather than in the server
        model_dir = os.path.join(args.out_dir, name)
        os.makedirs(os.path.join(model_dir, "1"), exist_ok=True)
        scripted.save(os.path.join(model_dir, "1", "model.pt"))
        nbytes = module_bytes(module)
        with open(os.path.join(model_dir, "config.pbtxt"), "w") as f:
            f.write("max_batch_size: 8\nprecision: FP32\n")
            f.write('inputs { name: "%s" dtype: %s dims: [%s] }\n' % (
                spec["name"], spec["dtype"], ", ".join(str(d) for d in spec["dims"])))
        manifest["models"].append({"name": name, "kind": kind, "input": spec, "bytes": nbytes, "gflop": flops})
        print("%s %s %d %s" % (name, kind, nbytes, flops))
    with open(os.path.join(args.out_dir, "models.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
