#!/usr/bin/env python3
"""The churn benchmark's models with real ratios (tools/make_churn_models.py
--mix real) and what bench/churn.py reads of them.

  - the full-size conv net and encoder are what the docs say (parameters,
    bytes, GFLOP per row), counted from the modules themselves;
  - a small mix (--scale) written to a folder: the kinds in their shares,
    models.json's bytes those of the saved modules, its inputs those of the
    configs, compute per byte far above the GEMV layers';
  - churn.py's read_models and model_request over it, and over a folder
    from before models.json (GEMV configs only);
  - the real server, on the CPU and a simulated cuda:0, answers one row of
    each model as churn.py sends it, as PyTorch does.

  churn_models_test.py --server BUILD/service/infergate --proto-dir proto
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import churn  # noqa: E402
import igtest  # noqa: E402
import make_churn_models  # noqa: E402
import torch  # noqa: E402

ARGS = None
GEMV_FLOP_PER_BYTE = 0.5  # a multiply and an add per 4-byte weight


module_bytes = make_churn_models.module_bytes


class FullSize(unittest.TestCase):
    """What the generator's docstring (and the docs) say of the full-size
    models."""

    def check_full_size(self, module, params_m, megabytes, spec, gflop, flop_per_byte_over):
        """`module` has about params_m million parameters and `megabytes` MB
        of weights; one row of `spec` costs about `gflop` GFLOP, over
        flop_per_byte_over times a GEMV layer's FLOP a byte of weights."""
        params = sum(p.numel() for p in module.parameters())
        self.assertAlmostEqual(params / 1e6, params_m[0], delta=params_m[1])
        self.assertAlmostEqual(module_bytes(module) / 1e6, megabytes, delta=1)
        flops = make_churn_models.gflop(module.eval(), make_churn_models.example_row(spec))
        if flops is not None:
            self.assertAlmostEqual(flops, gflop[0], delta=gflop[1])
            self.assertGreater(flops * 1e9 / module_bytes(module), flop_per_byte_over * GEMV_FLOP_PER_BYTE)

    def test_the_conv_net_is_resnet50_sized(self):
        module, spec = make_churn_models.conv_spec(1.0)
        self.assertEqual(spec["dims"], [3, 224, 224])
        # 80 FLOP a byte of weights, against a GEMV layer's 0.5
        self.check_full_size(module, (25.6, 0.1), 102, spec, (8.2, 0.1), 100)

    def test_the_encoder_is_bert_base_sized(self):
        module, spec = make_churn_models.encoder_spec(1.0)
        self.assertEqual(spec, {"name": "ids", "dtype": "INT64", "dims": [128]})
        # 50 FLOP a byte of weights, against a GEMV layer's 0.5
        self.check_full_size(module, (109.5, 0.5), 438, spec, (21.7, 0.2), 90)

    def test_a_gemv_layer_computes_half_a_flop_a_byte(self):
        module, spec = make_churn_models.gemv_spec(20)
        width = spec["dims"][0]
        self.assertAlmostEqual(module_bytes(module) / 1e6, 20, delta=0.1)
        flops = make_churn_models.gflop(module.eval(), make_churn_models.example_row(spec))
        if flops is not None:
            self.assertAlmostEqual(flops * 1e9, 2 * width * width, delta=1e-3 * width * width)
            self.assertAlmostEqual(flops * 1e9 / module_bytes(module), GEMV_FLOP_PER_BYTE, delta=0.01)


class SmallMix(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.folder = os.path.join(cls.tmp.name, "models")
        subprocess.run([sys.executable, os.path.join(ROOT, "tools", "make_churn_models.py"), cls.folder,
                        "--mix", "real", "--scale", "0.1", "--count", "6", "--min-mb", "1", "--max-mb", "2"],
                       check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(cls.folder, "models.json")) as f:
            cls.manifest = json.load(f)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_kinds_in_their_shares(self):
        self.assertEqual(self.manifest["format"], "infergate-churn-models/1")
        self.assertEqual(self.manifest["mix"], "real")
        kinds = [m["kind"] for m in self.manifest["models"]]
        self.assertEqual(kinds, ["gemv"] * 3 + ["conv"] * 2 + ["encoder"])
        self.assertEqual([m["name"] for m in self.manifest["models"]],
                         ["churn_00", "churn_01", "churn_02", "churn_03_conv", "churn_04_conv", "churn_05_encoder"])

    def test_bytes_and_inputs_are_the_saved_models(self):
        for m in self.manifest["models"]:
            with self.subTest(model=m["name"]):
                module = torch.jit.load(os.path.join(self.folder, m["name"], "1", "model.pt"))
                self.assertEqual(module_bytes(module), m["bytes"])
                config = open(os.path.join(self.folder, m["name"], "config.pbtxt")).read()
                self.assertIn('inputs { name: "%s" dtype: %s dims: [%s] }' % (
                    m["input"]["name"], m["input"]["dtype"], ", ".join(str(d) for d in m["input"]["dims"])), config)
                self.assertIn("precision: FP32", config)
                out = module(make_churn_models.example_row(m["input"]))
                self.assertEqual(out.shape[0], 1)

    def test_every_model_has_its_compute_counted(self):
        for m in self.manifest["models"]:
            with self.subTest(model=m["name"]):
                if m["gflop"] is None:
                    self.skipTest("this torch has no FLOP counter")
                self.assertGreater(m["gflop"], 0)

    def test_churn_reads_the_manifest(self):
        specs = churn.read_models(self.folder)
        self.assertEqual(sorted(specs), [m["name"] for m in self.manifest["models"]])
        self.assertEqual(specs["churn_05_encoder"]["input"]["dtype"], "INT64")
        self.assertIn("(3 GEMV layers, 2 conv nets, 1 encoder)", churn.mix_text(specs))

    def test_churn_reads_a_folder_from_before_the_manifest(self):
        with tempfile.TemporaryDirectory() as old:
            for name, width in (("churn_00", 100), ("churn_01", 200)):
                os.makedirs(os.path.join(old, name, "1"))
                with open(os.path.join(old, name, "config.pbtxt"), "w") as f:
                    f.write('max_batch_size: 8\ninputs { name: "x" dtype: FLOAT32 dims: [%d] }\n' % width)
            specs = churn.read_models(old)
            self.assertEqual(specs["churn_01"]["input"], {"name": "x", "dtype": "FLOAT32", "dims": [200]})
            self.assertEqual(specs["churn_01"]["bytes"], (200 * 200 + 200) * 4)
            self.assertEqual(churn.mix_text(specs), "")

    def test_the_server_answers_each_kind_as_churn_asks(self):
        igtest.generate_stubs(ARGS.proto_dir, os.path.join(self.tmp.name, "stubs"))
        import grpc
        from infergate.v1 import inference_pb2 as v1
        from infergate.v1 import inference_pb2_grpc as v1_grpc
        from infergate.v1 import tensor_pb2
        specs = churn.read_models(self.folder)
        server = igtest.Server(ARGS.server, ["--model-repository=" + self.folder, "--repository-poll-interval=0",
                                             "--simulate-devices=cuda:0=64000000"],
                               os.path.join(self.tmp.name, "server.log"))
        failures = []
        try:
            server.wait_serving()
            stub = v1_grpc.InferenceServiceStub(grpc.insecure_channel(server.address))
            for name, spec in sorted(specs.items()):
                module = torch.jit.load(os.path.join(self.folder, name, "1", "model.pt"))
                with torch.no_grad():
                    expected = module(make_churn_models.example_row(spec["input"]))
                for device in ("cpu", "cuda:0"):
                    with self.subTest(model=name, device=device):
                        request = churn.model_request(v1, tensor_pb2, name, spec, device)
                        self.assertEqual(len(request.inputs[0].data),
                                         math.prod(spec["input"]["dims"]) * churn.ELEMENT_BYTES[spec["input"]["dtype"]])
                        answer = stub.Infer(request, timeout=120)
                        self.assertEqual(answer.placement.device, device)
                        out = answer.outputs[0]
                        self.assertEqual(list(out.shape), list(expected.shape))
                        got = torch.frombuffer(bytearray(out.data), dtype=torch.float32).reshape(expected.shape)
                        self.assertTrue(torch.allclose(got, expected, rtol=1e-3, atol=1e-4),
                                        "%s on %s: largest difference %g" % (
                                            name, device, (got - expected).abs().max().item()))
        except AssertionError as e:
            failures.append(str(e))
            raise
        finally:
            server.stop_noting(failures)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--proto-dir", required=True)
    ARGS, rest = ap.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest)
