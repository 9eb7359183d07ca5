#!/usr/bin/env python3
"""The two supported builds, each given the files the other's PyTorch saves.

Run by the PyPI-LibTorch build (tests/pypi/run.sh) with that build's
Python, whose torch (today 2.15) is the newer; --other-python is Debian's
(python3-torch 2.6) and --other-server the default build, on Debian's
LibTorch 2.6. Each PyTorch saves the model corpus (model_corpus_test.py's
TorchScript models: scripted and traced transformers, attention, a conv
net, a text encoder, two inputs and a dict output) and an AOTInductor .pt2
package (tools/make_pt2_models.py --mlp); each server is given the other's.

What must hold, row by row as docs/setup.md's table states it:
- every TorchScript file of the corpus, saved by either PyTorch, is served
  by the other build and answers as the PyTorch that reads it answers
  (within FP32 tolerance): a refusal fails the test;
- a .pt2 package from the newer PyTorch is refused by the older server,
  and one from the older PyTorch by the newer server, each with a clear
  status (FAILED_PRECONDITION or INVALID_ARGUMENT, never INTERNAL) naming
  the server's LibTorch version and saying the package came from another
  PyTorch (a package records no version of its own);
- neither server dies: both exit 0 on SIGTERM at the end.
It prints the table of what each build did with each file.
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from igtest import Server, generate_stubs, reference_stubs, required_arguments  # noqa: E402

import torch  # noqa: E402
import model_corpus_test as corpus_test  # noqa: E402

MLP_INPUT = (3, 16)


def run(cmd, log):
    with open(log, "a") as f:
        subprocess.run(cmd, check=True, stdout=f, stderr=subprocess.STDOUT)


def save_files(python, make_pt2, root, log):
    """With `python`'s torch: the corpus into ROOT (returns its spec and the
    torch version) and ROOT/mlp_pt2 with an input and its answer beside it."""
    script = ("import json, sys, torch; sys.path.insert(0, %r); import model_corpus_test as m; "
              "c = m.make_corpus(%r); print(json.dumps({'version': torch.__version__, 'corpus': c}))"
              % (HERE, root))
    out = subprocess.run([python, "-c", script], check=True, capture_output=True, text=True)
    made = json.loads(out.stdout.strip().splitlines()[-1])
    run([python, make_pt2, "--mlp", root], log)
    tools = os.path.dirname(make_pt2)
    answer = ("import sys, torch; sys.path.insert(0, %r); import make_pt2_models as m; torch.manual_seed(1); "
              "x = torch.randn(%d, %d); y = m.model()(x).detach(); "
              "open(%r, 'wb').write(x.numpy().tobytes() + y.numpy().tobytes())"
              % (tools, MLP_INPUT[0], MLP_INPUT[1], os.path.join(root, "mlp_pt2.io")))
    run([python, "-c", answer], log)
    return made["version"], {k: (v[0], v[1]) for k, v in made["corpus"].items()}


def main():
    args = required_arguments("--server", "--other-server", "--other-python", "--proto-dir", "--reference-dir",
                              "--make-pt2-models")
    work = tempfile.mkdtemp(prefix="ig_cross_")
    failures = []
    table = []
    try:
        import grpc
        generate_stubs(args.proto_dir, os.path.join(work, "stubs"))
        reference_stubs(args.reference_dir, os.path.join(work, "ref"))
        import grpc_service_pb2 as pb
        import grpc_service_pb2_grpc as pb_grpc

        log = os.path.join(work, "make.log")
        newer_dir, older_dir = os.path.join(work, "newer"), os.path.join(work, "older")
        try:
            newer_version, newer_corpus = save_files(sys.executable, args.make_pt2_models, newer_dir, log)
            older_version, older_corpus = save_files(args.other_python, args.make_pt2_models, older_dir, log)
        except subprocess.CalledProcessError as e:
            print(open(log).read()[-6000:] if os.path.exists(log) else "")
            print(getattr(e, "stderr", "") or "")
            raise
        print("files saved by PyTorch %s (this build's) and %s (the other build's)" % (newer_version, older_version))

        def serve_and_check(server_bin, models, saved_by, corpus, pt2_must_be_refused):
            server = Server(server_bin, ["--model-repository=" + models],
                            os.path.join(work, "server-%s.log" % os.path.basename(models)))
            try:
                return check_served(server, models, saved_by, corpus, pt2_must_be_refused)
            finally:
                server.stop_noting(failures, "the server given files saved by %s" % saved_by)

        def check_served(server, models, saved_by, corpus, pt2_must_be_refused):
            server.wait_serving()
            channel = grpc.insecure_channel(server.address)
            stub = pb_grpc.GRPCInferenceServiceStub(channel)
            meta = stub.ServerMetadata(pb.ServerMetadataRequest(), timeout=30)
            server_name = "infergate %s" % meta.version

            def infer(model, tensors):
                req = pb.ModelInferRequest(model_name=model)
                for name, t in tensors:
                    dt = {torch.float32: "FP32", torch.int64: "INT64", torch.bool: "BOOL"}[t.dtype]
                    req.inputs.add(name=name, datatype=dt, shape=list(t.shape))
                    req.raw_input_contents.append(t.contiguous().numpy().tobytes())
                resp = stub.ModelInfer(req, timeout=120)
                return {o.name: torch.tensor(struct.unpack("<%df" % (len(d) // 4), d)).reshape(list(o.shape))
                        for o, d in zip(resp.outputs, resp.raw_output_contents)}

            def refused_clearly(where, e, extra_needles):
                msg = e.details() or ""
                ok = e.code() in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.INVALID_ARGUMENT)
                if not ok:
                    failures.append("%s: refused with %s, not a clear load error: %s" % (where, e.code(), msg))
                for n in ["LibTorch"] + extra_needles:
                    if n not in msg:
                        failures.append("%s: the refusal does not name %r: %s" % (where, n, msg))
                return "refused (%s): %s" % (e.code().name, msg[:300])

            for model, (inputs, outputs) in sorted(corpus.items()):
                where = "TorchScript %s saved by %s, on the server built against the other LibTorch" % (model, saved_by)
                tensors = [(spec[0], corpus_test.random_input(spec[1], spec[2], 7 + i)) for i, spec in enumerate(inputs)]
                try:
                    got = infer(model, tensors)
                except grpc.RpcError as e:
                    table.append((saved_by, model, refused_clearly(where, e, [])))
                    failures.append("%s: refused, where docs/setup.md says it is served: %s" % (where, e.details()))
                    continue
                want = corpus_test.reference(os.path.join(models, model, "1", "model.pt"), dict(tensors), "FP32")
                if not isinstance(want, dict):
                    want = dict(zip(outputs, want if isinstance(want, list) else [want]))
                worst = 0.0
                for name in outputs:
                    if name not in got or list(got[name].shape) != list(want[name].shape):
                        failures.append("%s: output %s missing or misshapen" % (where, name))
                        continue
                    err = (got[name] - want[name]).abs().max().item()
                    scale = max(want[name].abs().max().item(), 1.0)
                    worst = max(worst, err / scale)
                    if err > corpus_test.TOLERANCE["FP32"] * scale:
                        failures.append("%s: %s differs from PyTorch %s by %.3g" % (where, name, torch.__version__, err))
                table.append((saved_by, model, "served; answers match PyTorch %s (largest relative error %.1e)"
                              % (torch.__version__, worst)))

            io = open(os.path.join(models, "mlp_pt2.io"), "rb").read()
            n_in = MLP_INPUT[0] * MLP_INPUT[1]
            x = torch.tensor(struct.unpack("<%df" % n_in, io[:4 * n_in])).reshape(MLP_INPUT)
            y = torch.tensor(struct.unpack("<%df" % (len(io) // 4 - n_in), io[4 * n_in:])).reshape(MLP_INPUT[0], -1)
            where = ".pt2 package saved by %s, on the server built against the other LibTorch" % saved_by
            try:
                got = infer("mlp_pt2", [("x", x)])["y"]
                if pt2_must_be_refused:
                    failures.append("%s: served (a package from another PyTorch must be refused)" % where)
                err = (got - y).abs().max().item()
                if err > 1e-4 * max(y.abs().max().item(), 1.0):
                    failures.append("%s: differs from the exporting PyTorch by %.3g" % (where, err))
                table.append((saved_by, "mlp_pt2 (.pt2)", "served; answers match the exporting PyTorch (%.1e)" % err))
            except grpc.RpcError as e:
                table.append((saved_by, "mlp_pt2 (.pt2)", refused_clearly(where, e, [])))
                msg = e.details() or ""
                if "records no PyTorch version" not in msg and "other than this server" not in msg:
                    failures.append("%s: the refusal does not say the package came from another PyTorch: %s"
                                    % (where, msg))
            channel.close()
            return server_name

        older_server = serve_and_check(args.other_server, newer_dir, "PyTorch " + newer_version, newer_corpus, True)
        newer_server = serve_and_check(args.server, older_dir, "PyTorch " + older_version, older_corpus, True)
        print("\n%s (LibTorch %s) and %s (LibTorch %s), each given the other PyTorch's files:"
              % (older_server, older_version, newer_server, newer_version))
        for saved_by, model, what in table:
            print("  saved by %-15s %-22s %s" % (saved_by, model, what))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if failures:
        for f in failures:
            print("FAIL: " + f)
        sys.exit(1)
    print("cross-version: %d files, each served or refused as docs/setup.md says" % len(table))


if __name__ == "__main__":
    main()
