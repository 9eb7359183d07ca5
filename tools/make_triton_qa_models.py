#!/usr/bin/env python3
"""Writes the model repositories Triton's HTTP and gRPC protocol QA suites
(`qa/L0_http/http_test.py`, `qa/L0_grpc/python_unit_test.py`) start their
server with, under the names those suites call, with TorchScript identity
models in place of Triton's ONNX and Python ones and each config.pbtxt
written as Triton's generators write it, `platform: "pytorch_libtorch"`
being the change:

  DIR/http  (qa/L0_http's python_unit_test_models)
    onnx_zero_1_float32           FP32 [-1] -> the same, batching to 8
    onnx_zero_1_float32_queue     the same, a queue of one and a 1 s batch delay
    onnx_zero_1_float16           FP16 [-1, -1] -> the same
    onnx_zero_3_float32           three FP32 [-1] -> the same three
    onnx_zero_1_object            TYPE_STRING [-1] -> the same
    onnx_zero_1_object_1_element  TYPE_STRING [1] -> the same
    simple_identity               TYPE_STRING [-1] -> the same
    simple_identity_int64         INT64 [-1] -> the same
  DIR/grpc  (qa/L0_grpc's grpc_test_models)
    simple                        INT32 [16] x 2 -> sum and difference
    string_identity               TYPE_STRING [-1] -> the same, no batching

The suites' other servers use Triton's example repository
(tools/make_triton_examples.py).

  make_triton_qa_models.py DIR

Uses Debian's python3-torch.
"""
import os
import sys
from typing import Tuple

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_triton_examples import StringIdentity, config, io_block, write, write_sum_diff  # noqa: E402


class Identity(torch.nn.Module):
    def forward(self, INPUT0: torch.Tensor) -> torch.Tensor:
        return INPUT0


class Identity3(torch.nn.Module):
    def forward(self, INPUT0: torch.Tensor, INPUT1: torch.Tensor,
                INPUT2: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return INPUT0, INPUT1, INPUT2


QUEUE_OF_ONE = """dynamic_batching {
    max_queue_delay_microseconds: 1000000
    preferred_batch_size: [ 8 ]
    default_queue_policy {
        max_queue_size: 1
    }
}
"""


def identity(root, name, data_type, dims, count=1, max_batch_size=8, tail=""):
    inputs = [io_block("input", "INPUT%d" % i, data_type, dims) for i in range(count)]
    outputs = [io_block("output", "OUTPUT%d" % i, data_type, dims) for i in range(count)]
    if data_type == "TYPE_STRING":
        module = StringIdentity()
    else:
        module = Identity() if count == 1 else Identity3()
    write(root, name, module, config(name, max_batch_size, inputs, outputs, tail))


def main():
    http = os.path.join(sys.argv[1], "http")
    identity(http, "onnx_zero_1_float32", "TYPE_FP32", [-1])
    identity(http, "onnx_zero_1_float32_queue", "TYPE_FP32", [-1], tail=QUEUE_OF_ONE)
    identity(http, "onnx_zero_1_float16", "TYPE_FP16", [-1, -1])
    identity(http, "onnx_zero_3_float32", "TYPE_FP32", [-1], count=3)
    identity(http, "onnx_zero_1_object", "TYPE_STRING", [-1])
    identity(http, "onnx_zero_1_object_1_element", "TYPE_STRING", [1])
    identity(http, "simple_identity", "TYPE_STRING", [-1])
    identity(http, "simple_identity_int64", "TYPE_INT64", [-1])

    grpc = os.path.join(sys.argv[1], "grpc")
    write_sum_diff(grpc, "simple", "TYPE_INT32")
    identity(grpc, "string_identity", "TYPE_STRING", [-1], max_batch_size=0)


if __name__ == "__main__":
    main()
