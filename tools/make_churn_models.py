#!/usr/bin/env python3
"""Makes the churn benchmark's model repository (bench/churn.py): COUNT
TorchScript models, churn_00 .. churn_NN, whose parameters take MIN_MB to
MAX_MB (spread evenly), each one square linear layer with a ReLU, so that a
request costs about one read of its weights. FP32 throughout (the config
says so), so that a model takes the same bytes on every device.

    make_churn_models.py OUT_DIR [--count 24] [--min-mb 20] [--max-mb 200]

Prints one line per model: name, input width, parameter bytes."""
import argparse
import math
import os

import torch


class Layer(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc = torch.nn.Linear(width, width)

    def forward(self, x):
        return torch.relu(self.fc(x))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir")
    ap.add_argument("--count", type=int, default=24)
    ap.add_argument("--min-mb", type=float, default=20)
    ap.add_argument("--max-mb", type=float, default=200)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    if args.count < 1 or args.min_mb <= 0 or args.max_mb < args.min_mb:
        ap.error("--count must be at least 1 and 0 < --min-mb <= --max-mb")
    torch.manual_seed(args.seed)
    for i in range(args.count):
        mb = args.min_mb + (args.max_mb - args.min_mb) * (i / max(1, args.count - 1))
        width = max(8, int(math.sqrt(mb * 1e6 / 4)))
        name = "churn_%02d" % i
        model_dir = os.path.join(args.out_dir, name)
        os.makedirs(os.path.join(model_dir, "1"), exist_ok=True)
        with torch.no_grad():
            module = torch.jit.script(Layer(width).eval())
        module.save(os.path.join(model_dir, "1", "model.pt"))
        with open(os.path.join(model_dir, "config.pbtxt"), "w") as f:
            f.write("max_batch_size: 8\nprecision: FP32\n")
            f.write('inputs { name: "x" dtype: FLOAT32 dims: [%d] }\n' % width)
        print("%s %d %d" % (name, width, (width * width + width) * 4))


if __name__ == "__main__":
    main()
