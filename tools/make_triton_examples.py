#!/usr/bin/env python3
"""Writes a model repository laid out as Triton's example repository is
(the one its quick-start and example clients use), with TorchScript models
in place of the originals and every config.pbtxt written the way Triton
documents it, `platform: "pytorch_libtorch"` being the only change a user
makes:

  simple               INT32 [16] x 2 -> sum and difference, batching to 8
  simple_int8          the same in INT8
  simple_string        TYPE_STRING [16] x 2 of decimal numbers -> their sum
                       and difference as strings (List[str] in and out)
  simple_identity      TYPE_STRING [-1] -> the same strings
  densenet_onnx        FORMAT_NCHW [3,224,224] FP32, reshaped to
                       [1,3,224,224] for the model, 1000 scores reshaped
                       back from [1,1000,1,1], with labels
  inception_onnx       FORMAT_NHWC [299,299,3] named "input:0", 1001
                       softmax scores from [1,1001], with labels
  simple_sequence,     sequence batching (which infergate refuses, clearly):
  simple_dyna_sequence written so a test sees the refusal

The image models are colour classifiers, so their answers can be checked:
an image's mean red, green and blue over [0, 1] (after the clients'
scaling) score classes 0, 1 and 2 (inception: 1, 2 and 3, class 0 being
its background), every other class scoring less.

  make_triton_examples.py DIR

Uses Debian's python3-torch.
"""
import os
import sys
from typing import List, Tuple

import torch


class SumDiff(torch.nn.Module):
    def forward(self, INPUT0: torch.Tensor, INPUT1: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        return INPUT0 + INPUT1, INPUT0 - INPUT1


class PassThrough(torch.nn.Module):
    def forward(self, INPUT: torch.Tensor) -> torch.Tensor:
        return INPUT


class StringSumDiff(torch.nn.Module):
    def forward(self, INPUT0: List[str], INPUT1: List[str]) -> Tuple[List[str], List[str]]:
        sums: List[str] = []
        differences: List[str] = []
        for i in range(len(INPUT0)):
            a = int(INPUT0[i])
            b = int(INPUT1[i])
            sums.append(str(a + b))
            differences.append(str(a - b))
        return sums, differences


class StringIdentity(torch.nn.Module):
    def forward(self, INPUT0: List[str]) -> List[str]:
        return INPUT0


class ColourClassifier(torch.nn.Module):
    """Scores `classes` classes from an image's mean colour; channels_last
    takes NHWC, else NCHW. `first` is the class red scores."""

    def __init__(self, classes: int, first: int, channels_last: bool, softmax: bool, out_shape: List[int]):
        super().__init__()
        weight = torch.full((classes, 3), -1.0)
        bias = torch.full((classes,), -1.0)
        for c in range(3):
            weight[first + c] = torch.tensor([-1.0, -1.0, -1.0])
            weight[first + c][c] = 3.0
            bias[first + c] = 0.0
        self.register_buffer("weight", weight)
        self.register_buffer("bias", bias)
        self.channels_last = channels_last
        self.softmax = softmax
        self.out_shape = out_shape

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        dims = [1, 2] if self.channels_last else [2, 3]
        colour = image.float().mean(dim=dims)  # [1, 3]
        scores = torch.nn.functional.linear(colour, self.weight, self.bias)
        if self.softmax:
            scores = torch.softmax(scores, dim=1)
        return scores.reshape(self.out_shape)


def io_block(kind, name, data_type, dims, extra=""):
    return ("  {\n    name: \"%s\"\n    data_type: %s\n%s    dims: [ %s ]\n  }" %
            (name, data_type, extra, ", ".join(str(d) for d in dims)))


def config(name, max_batch_size, inputs, outputs, tail=""):
    return ("name: \"%s\"\nplatform: \"pytorch_libtorch\"\nmax_batch_size: %d\ninput [\n%s\n]\noutput [\n%s\n]\n%s" %
            (name, max_batch_size, ",\n".join(inputs), ",\n".join(outputs), tail))


def write(root, name, module, text, files=None):
    os.makedirs(os.path.join(root, name, "1"), exist_ok=True)
    torch.jit.save(torch.jit.script(module.eval()), os.path.join(root, name, "1", "model.pt"))
    with open(os.path.join(root, name, "config.pbtxt"), "w") as f:
        f.write(text)
    for file_name, content in (files or {}).items():
        with open(os.path.join(root, name, file_name), "w") as f:
            f.write(content)
    print("wrote", os.path.join(root, name))


def labels(count, first):
    names = ["CLASS %d" % i for i in range(count)]
    if first > 0:
        names[0] = "BACKGROUND"
    names[first:first + 3] = ["RED", "GREEN", "BLUE"]
    return "\n".join(names) + "\n"


SEQUENCE_CONTROLS = """sequence_batching {
  control_input [
    {
      name: "START"
      control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ]
    },
    {
      name: "READY"
      control [ { kind: CONTROL_SEQUENCE_READY int32_false_true: [ 0, 1 ] } ]
    }
  ]
}
"""


def write_sum_diff(root, name, type_name):
    """Triton's `simple` (or `simple_int8`): two [16] inputs, their sum and difference, batching to 8."""
    write(root, name, SumDiff(), config(
        name, 8, [io_block("input", "INPUT0", type_name, [16]), io_block("input", "INPUT1", type_name, [16])],
        [io_block("output", "OUTPUT0", type_name, [16]), io_block("output", "OUTPUT1", type_name, [16])]))


def main():
    root = sys.argv[1]
    os.makedirs(root, exist_ok=True)
    for name, type_name in (("simple", "TYPE_INT32"), ("simple_int8", "TYPE_INT8")):
        write_sum_diff(root, name, type_name)
    write(root, "simple_string", StringSumDiff(), config(
        "simple_string", 8,
        [io_block("input", "INPUT0", "TYPE_STRING", [16]), io_block("input", "INPUT1", "TYPE_STRING", [16])],
        [io_block("output", "OUTPUT0", "TYPE_STRING", [16]), io_block("output", "OUTPUT1", "TYPE_STRING", [16])]))
    write(root, "simple_identity", StringIdentity(), config(
        "simple_identity", 8, [io_block("input", "INPUT0", "TYPE_STRING", [-1])],
        [io_block("output", "OUTPUT0", "TYPE_STRING", [-1])]))
    write(root, "densenet_onnx", ColourClassifier(1000, 0, False, False, [1, 1000, 1, 1]), config(
        "densenet_onnx", 0,
        [io_block("input", "data_0", "TYPE_FP32", [3, 224, 224],
                  "    format: FORMAT_NCHW\n    reshape { shape: [ 1, 3, 224, 224 ] }\n")],
        [io_block("output", "fc6_1", "TYPE_FP32", [1000],
                  "    reshape { shape: [ 1, 1000, 1, 1 ] }\n    label_filename: \"densenet_labels.txt\"\n")]),
        {"densenet_labels.txt": labels(1000, 0)})
    write(root, "inception_onnx", ColourClassifier(1001, 1, True, True, [1, 1001]), config(
        "inception_onnx", 0,
        [io_block("input", "input:0", "TYPE_FP32", [299, 299, 3],
                  "    format: FORMAT_NHWC\n    reshape { shape: [ 1, 299, 299, 3 ] }\n")],
        [io_block("output", "InceptionV3/Predictions/Softmax:0", "TYPE_FP32", [1001],
                  "    reshape { shape: [ 1, 1001 ] }\n    label_filename: \"inception_labels.txt\"\n")]),
        {"inception_labels.txt": labels(1001, 1)})
    for name in ("simple_sequence", "simple_dyna_sequence"):
        write(root, name, PassThrough(), config(
            name, 8, [io_block("input", "INPUT", "TYPE_INT32", [1])],
            [io_block("output", "OUTPUT", "TYPE_INT32", [1])], SEQUENCE_CONTROLS))


if __name__ == "__main__":
    main()
