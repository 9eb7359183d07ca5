#!/usr/bin/env python3
"""The accuracy contract through the real server, with models PyTorch 2.x
saves at test time (nothing committed as a binary).

- `overflow`: activations pass 65,504, so FP16 answers inf/NaN on any CPU
  or GPU; BF16 (FP32's exponent range) is fine. On simulated mps and
  cuda:0, under AUTO and with explicit FP16, every answer must be within
  tolerance of FP32 and the placement must say which dtype ran and why;
  explicit FP16 under DENY is refused with FAILED_PRECONDITION.
- `fewconv`: a conv net with one input channel in BF16 (oneDNN 3.7's BF16
  convolution is wrong on CPUs with AVX-512 BF16): within tolerance on
  every machine, whichever dtype the server ends up using.
- `gentle`: a model FP16 and BF16 serve well keeps them, exactly the dtypes
  a server without checks uses.
- Restart with the state file: nothing is checked again; the same bytes as a
  new version are not checked either (keyed by the file's hash); another
  key (edited in the state file) is.
- `drift`: FP16 is right on the check inputs (in [-1, 1)) and overflows on
  inputs of magnitude 100: the running check marks it inaccurate after such
  a request, and later requests get a verified dtype.
"""
import json
import os
import re
import shutil
import struct
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from igtest import Server, fail, generate_stubs, required_arguments  # noqa: E402

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

# The server's defaults (accuracy_tolerance.cc): abs + rel * max|FP32|.
TOLERANCE = {"FLOAT16": (1e-3, 1e-2), "BFLOAT16": (1e-2, 5e-2), "FLOAT32": (1e-5, 1e-5)}


class Overflow(nn.Module):
    """Scales up past FP16's range, then back down: FP32 and BF16 are fine."""

    def __init__(self):
        super().__init__()
        self.up = nn.Linear(16, 16)
        self.down = nn.Linear(16, 4)
        with torch.no_grad():
            self.up.weight.copy_(torch.randn(16, 16) * 2e4)
            self.down.weight.copy_(torch.randn(4, 16) * 1e-4)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


class FewConv(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 4, 3, padding=1)

    def forward(self, x):
        return self.c2(torch.relu(self.c1(x)))


class Gentle(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(16, 32)
        self.b = nn.Linear(32, 4)

    def forward(self, x):
        return self.b(torch.tanh(self.a(x)))


class Cancel(nn.Module):
    """(x + 48) - 48: BF16's 8 bits lose x's low bits (spacing 0.25 at 48);
    FP16's 11 keep them to 0.016, within this model's tolerance of 3%."""

    def __init__(self):
        super().__init__()
        self.offset = nn.Parameter(torch.full((16,), 48.0))

    def forward(self, x):
        return (x + self.offset) - self.offset


class Drift(nn.Module):
    """x * 1000 then / 1000: exact on small inputs, inf in FP16 past |x| 65."""

    def __init__(self):
        super().__init__()
        self.up = nn.Linear(8, 8, bias=False)
        self.down = nn.Linear(8, 8, bias=False)
        with torch.no_grad():
            self.up.weight.copy_(torch.eye(8) * 1000)
            self.down.weight.copy_(torch.eye(8) / 1000)

    def forward(self, x):
        return self.down(self.up(x))


def save(root, name, module, example, config, version=1):
    torch.manual_seed(hash(name) % 1000)
    os.makedirs(os.path.join(root, name, str(version)), exist_ok=True)
    torch.jit.trace(module.eval(), example).save(os.path.join(root, name, str(version), "model.pt"))
    with open(os.path.join(root, name, "config.pbtxt"), "w") as f:
        f.write(config)


def make_models(root):
    torch.manual_seed(7)
    save(root, "overflow", Overflow(), torch.randn(1, 16),
         'max_batch_size: 4\ninputs { name: "x" dtype: FLOAT32 dims: [16] }\n'
         'outputs { name: "y" dtype: FLOAT32 dims: [4] }\n')
    save(root, "fewconv", FewConv(), torch.randn(1, 1, 16, 16),
         'max_batch_size: 4\ninputs { name: "x" dtype: FLOAT32 dims: [1, 16, 16] }\n'
         'outputs { name: "features" dtype: FLOAT32 dims: [4, 16, 16] }\n')
    save(root, "gentle", Gentle(), torch.randn(1, 16),
         'max_batch_size: 4\ninputs { name: "x" dtype: FLOAT32 dims: [16] }\n'
         'outputs { name: "y" dtype: FLOAT32 dims: [4] }\n')
    save(root, "cancel", Cancel(), torch.randn(1, 16),
         'max_batch_size: 4\ninputs { name: "x" dtype: FLOAT32 dims: [16] }\n'
         'outputs { name: "y" dtype: FLOAT32 dims: [16] }\n'
         'accuracy { max_rel_error: 0.03 }\n')
    save(root, "drift", Drift(), torch.randn(1, 8),
         'max_batch_size: 4\ninputs { name: "x" dtype: FLOAT32 dims: [8] }\n'
         'outputs { name: "y" dtype: FLOAT32 dims: [8] }\n'
         'accuracy { running_check_every: 1 }\n')


def main():
    args = required_arguments("--server", "--proto-dir")
    work = tempfile.mkdtemp(prefix="ig_accuracy_")
    servers = []
    try:
        import grpc
        generate_stubs(args.proto_dir, os.path.join(work, "stubs"))
        from infergate.v1 import inference_pb2 as v1
        from infergate.v1 import inference_pb2_grpc as v1_grpc
        from infergate.v1 import model_config_pb2 as v1c
        from infergate.v1 import tensor_pb2 as v1t

        models = os.path.join(work, "models")
        make_models(models)
        state = os.path.join(work, "state")
        names = {v1t.FLOAT32: "FLOAT32", v1t.FLOAT16: "FLOAT16", v1t.BFLOAT16: "BFLOAT16"}

        def start(extra=()):
            server = Server(args.server, ["--model-repository=" + models, "--simulate-devices=mps,cuda:0",
                                          "--state-file=" + state, "--repository-poll-interval=0"] + list(extra),
                            os.path.join(work, "server%d.log" % len(servers)))
            servers.append(server)
            server.wait_serving()
            return server, v1_grpc.InferenceServiceStub(grpc.insecure_channel(server.address))

        served_versions = {}  # model: the version its last answer came from

        def infer(stub, model, x, device, precision=v1c.AUTO, fallback=v1.ALLOW):
            req = v1.InferRequest(model=model, device=device, precision=precision, fallback=fallback)
            req.inputs.add(name="", dtype=v1t.FLOAT32, shape=list(x.shape), data=x.contiguous().numpy().tobytes())
            resp = stub.Infer(req, timeout=120)
            out = resp.outputs[0]
            n = 1
            for d in out.shape:
                n *= d
            y = torch.tensor(struct.unpack("<%df" % n, out.data)).reshape(list(out.shape))
            served_versions[model] = resp.placement.model_version
            return y, names.get(resp.placement.dtype, "?"), resp.placement.precision_reason

        def checks(stub, model):
            for m in stub.ListModels(v1.ListModelsRequest(), timeout=30).models:
                if m.name == model:
                    return {(c.device, names.get(c.dtype, "?")): c for c in m.precision_checks}
            return {}

        def settle(stub, model, x, device, precision=v1c.AUTO):
            """Requests until the dtype they get reflects every check on the
            device: none is running, the request's reason is not
            "unverified", and no check started or finished while it was
            served (a request never waits for a check, and a check it starts
            can finish before its answer is read)."""
            deadline = time.time() + 120
            while True:
                before = {k: c.state for k, c in checks(stub, model).items() if k[0] == device}
                y, dtype, reason = infer(stub, model, x, device, precision)
                after = {k: c.state for k, c in checks(stub, model).items() if k[0] == device}
                busy = "checking" in after.values()
                if before == after and not busy and not reason.startswith("unverified"):
                    return y, dtype, reason
                if time.time() > deadline:
                    fail("%s on %s never settled in 120 s: checks %s, last answer %s %r" %
                         (model, device, after, dtype, reason))
                time.sleep(0.05)

        def expect_close(what, got, want, dtype):
            atol, rtol = TOLERANCE[dtype]
            err = (got - want).abs().max().item()
            allowed = atol + rtol * want.abs().max().item()
            if not torch.isfinite(got).all() or err > allowed:
                fail("%s: error %g (allowed %g in %s): got %s, FP32 %s" % (what, err, allowed, dtype, got, want))

        def fp32(model, x):
            m = torch.jit.load(os.path.join(models, model, "1", "model.pt")).eval()
            with torch.inference_mode():
                return m(x)

        def metric(server, results=("passed", "failed"), kind="check", **labels):
            """The sum of infergate_precision_checks_total over series of
            `kind` (check: before a dtype serves; running: a served request
            re-run) whose result is in `results` and whose labels include
            `labels`."""
            labels["kind"] = kind
            with urllib.request.urlopen("http://%s/metrics" % server.metrics_address, timeout=30) as r:
                text = r.read().decode()
            total = 0.0
            for line in text.splitlines():
                m = re.match(r"infergate_precision_checks_total\{(.*)\} (\S+)$", line)
                if not m:
                    continue
                have = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
                if have.get("result") in results and all(have.get(k) == v for k, v in labels.items()):
                    total += float(m.group(2))
            return total

        server, stub = start()
        x = torch.rand(2, 16) * 2 - 1
        want = fp32("overflow", x)

        # 1. FP16 overflow: first answer before the check is FP32 and says so.
        y, dtype, reason = infer(stub, "overflow", x, "mps")
        if dtype != "FLOAT32" or not reason.startswith("unverified:"):
            fail("overflow on mps before any check: ran %s with reason %r, expected FLOAT32 'unverified:...'" %
                 (dtype, reason))
        expect_close("overflow mps first answer", y, want, dtype)
        for device in ("mps", "cuda:0"):
            y, dtype, reason = settle(stub, "overflow", x, device)
            expect_close("overflow on %s under AUTO" % device, y, want, dtype)
            print("overflow on %s AUTO: ran %s (%s)" % (device, dtype, reason or "as picked"))
            c = checks(stub, "overflow")[(device, "FLOAT16" if device == "mps" else "BFLOAT16")]
            if device == "mps":
                if c.state != "inaccurate" or dtype != "BFLOAT16" or not reason.startswith("inaccurate:float16"):
                    fail("overflow on mps: FP16 check %s, ran %s, reason %r" % (c.state, dtype, reason))
            elif c.state != "verified" or dtype != "BFLOAT16" or reason:
                fail("overflow on cuda:0: BF16 check %s, ran %s, reason %r" % (c.state, dtype, reason))
            y, dtype, reason = settle(stub, "overflow", x, device, v1c.FP16)
            expect_close("overflow on %s asking FP16" % device, y, want, dtype)
            if dtype == "FLOAT16" or "inaccurate:float16" not in reason or "NaN or inf" not in reason:
                fail("overflow on %s asking FP16: ran %s, reason %r" % (device, dtype, reason))
            print("overflow on %s FP16: ran %s (%s)" % (device, dtype, reason))
            try:
                infer(stub, "overflow", x, device, v1c.FP16, v1.DENY)
                fail("overflow on %s: FP16 under DENY was served" % device)
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.FAILED_PRECONDITION or "accuracy" not in e.details():
                    fail("overflow FP16 DENY: %s %s" % (e.code(), e.details()))
        # The verified check's error is exported (a README promise): overflow's
        # BF16 check on cuda:0, finite and within BF16's relative tolerance.
        with urllib.request.urlopen("http://%s/metrics" % server.metrics_address, timeout=30) as r:
            scraped = r.read().decode()
        errors = [float(m.group(1)) for m in re.finditer(
            r'^infergate_precision_check_relative_error\{(?=[^}]*model="overflow")(?=[^}]*device="cuda:0")[^}]*\} (\S+)$',
            scraped, re.M)]
        if not errors or not all(0 <= e <= TOLERANCE["BFLOAT16"][1] for e in errors):
            fail("infergate_precision_check_relative_error for overflow on cuda:0: %s" % errors)
        # Visible through the Open Inference Protocol: metadata and config parameters.
        def rest(path):
            with urllib.request.urlopen("http://%s%s" % (server.http_address, path), timeout=30) as r:
                return json.loads(r.read())
        meta = rest("/v2/models/overflow")["parameters"]
        config = rest("/v2/models/overflow/config")["parameters"]
        if not meta.get("accuracy:mps:float16", "").startswith("inaccurate: NaN or inf") or \
                not meta.get("accuracy:cuda:0:bfloat16", "").startswith("verified: error") or \
                not config.get("accuracy:mps:float16", {}).get("string_value", "").startswith("inaccurate"):
            fail("accuracy parameters: metadata %s, config %s" % (meta, config))

        # BF16 serves this model well: AUTO on cuda:0 keeps it (never FP32 everywhere).
        y, dtype, reason = settle(stub, "overflow", x, "cuda:0")
        if dtype != "BFLOAT16":
            fail("overflow on cuda:0: BF16 is accurate for it, yet it ran %s (%s)" % (dtype, reason))

        # 2. A few-channel conv net: within tolerance on any CPU, whether or
        # not its BF16 convolution is broken.
        img = torch.rand(2, 1, 16, 16) * 2 - 1
        want = fp32("fewconv", img)
        for precision in (v1c.AUTO, v1c.BF16):
            y, dtype, reason = settle(stub, "fewconv", img, "cuda:0", precision)
            expect_close("fewconv on cuda:0 (%s)" % precision, y, want, dtype)
            print("fewconv on cuda:0 precision %d: ran %s (%s)" % (precision, dtype, reason or "as picked"))
        c = checks(stub, "fewconv")[("cuda:0", "BFLOAT16")]
        print("fewconv BF16 check on this CPU: %s, %s" % (c.state, c.detail))

        # BF16 refused, FP16 kept: AUTO on cuda:0 (BF16) moves to FP16, not FP32.
        c = torch.rand(2, 16) * 2 - 1
        y, dtype, reason = settle(stub, "cancel", c, "cuda:0")
        err = (y - c).abs().max().item()
        if dtype != "FLOAT16" or not reason.startswith("inaccurate:bfloat16") or err > 1e-3 + 0.03:
            fail("cancel on cuda:0: ran %s (%r), error %g" % (dtype, reason, err))
        print("cancel on cuda:0 AUTO: ran %s (%s)" % (dtype, reason))

        # 3. A model reduced precision serves well keeps it.
        g = torch.rand(2, 16) * 2 - 1
        want = fp32("gentle", g)
        kept = {}
        for device in ("mps", "cuda:0"):
            y, dtype, reason = settle(stub, "gentle", g, device)
            expect_close("gentle on %s" % device, y, want, dtype)
            kept[device] = dtype
            if reason:
                fail("gentle on %s: ran %s with reason %r" % (device, dtype, reason))
        if kept != {"mps": "FLOAT16", "cuda:0": "BFLOAT16"}:
            fail("gentle lost its reduced precision: %s" % kept)
        for precision, expected in ((v1c.FP16, "FLOAT16"), (v1c.BF16, "BFLOAT16")):
            y, dtype, reason = settle(stub, "gentle", g, "mps", precision)
            if dtype != expected or reason:
                fail("gentle on mps asking %s: ran %s (%r)" % (expected, dtype, reason))

        # 5. Running check: right on the check inputs, overflows on large ones.
        small = torch.rand(1, 8) * 2 - 1
        y, dtype, reason = settle(stub, "drift", small, "mps", v1c.FP16)
        if dtype != "FLOAT16":
            fail("drift on mps: FP16 should pass its check on small inputs: ran %s (%r)" % (dtype, reason))
        # While one running check waits or runs, the ones wanted meanwhile are
        # dropped, not queued (result="dropped"): requests from 8 callers at
        # once want one each.
        import concurrent.futures
        before = metric(server, ("dropped",), kind="running", model="drift")
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            ran = list(pool.map(lambda _: infer(stub, "drift", small, "mps", v1c.FP16)[1], range(160)))
        if set(ran) != {"FLOAT16"}:
            fail("drift's concurrent small requests ran %s" % sorted(set(ran)))
        dropped = metric(server, ("dropped",), kind="running", model="drift") - before
        if dropped < 1 or dropped >= 160:
            fail("running checks dropped while another was pending: %d of 160" % dropped)
        print("drift: %d of 160 running checks dropped while another was pending" % dropped)
        large = torch.full((1, 8), 100.0)
        y, dtype, reason = infer(stub, "drift", large, "mps", v1c.FP16)
        print("drift on a large input, before the running check: %s ran %s" % (y.tolist(), dtype))
        # A running check is dropped while the server's CPU has other work
        # (another dtype's check, say), so large requests keep coming until
        # one is checked.
        deadline = time.time() + 60
        next_request = time.time() + 0.5
        while checks(stub, "drift")[("mps", "FLOAT16")].state != "inaccurate":
            if time.time() > deadline:
                fail("the running check did not mark drift's FP16 inaccurate: %s" % checks(stub, "drift"))
            if time.time() > next_request:
                infer(stub, "drift", large, "mps", v1c.FP16)
                next_request = time.time() + 0.5
            time.sleep(0.05)
        # settle: the first such request starts BF16's check, which must end
        # before the restart below counts checks.
        y, dtype, reason = settle(stub, "drift", large, "mps", v1c.FP16)
        expect_close("drift after the running check", y, large, dtype)
        if dtype == "FLOAT16" or not reason.startswith("inaccurate:float16"):
            fail("drift after the running check: ran %s (%r)" % (dtype, reason))
        if metric(server, ("failed",), kind="running", model="drift") < 1:
            fail("no failed running check counted for drift")
        print("drift: the running check caught it; now %s (%s)" % (dtype, reason))
        ran_before = metric(server)
        if server.stop() != 0:
            fail("server did not stop cleanly")

        # 4. Restart with the state file: nothing is checked again.
        server, stub = start()
        x = torch.rand(2, 16) * 2 - 1
        for model, device in (("overflow", "mps"), ("overflow", "cuda:0"), ("gentle", "mps"), ("gentle", "cuda:0")):
            settle(stub, model, x, device)
        y, dtype, reason = settle(stub, "drift", small, "mps", v1c.FP16)
        if dtype == "FLOAT16":
            fail("drift's running-check verdict was not kept across the restart")
        if metric(server) != 0:
            fail("checks ran again after a restart with the state file (before: %g)" % ran_before)
        # The same bytes as a new version: same hash, not checked again.
        shutil.copytree(os.path.join(models, "gentle", "1"), os.path.join(models, "gentle", "2"))
        # New bytes (retrained): checked.
        torch.manual_seed(99)
        save(models, "overflow", Overflow(), torch.randn(1, 16),
             open(os.path.join(models, "overflow", "config.pbtxt")).read(), version=2)
        server.stop()
        # Another key: the state file says these results came from another CPU.
        text = open(state).read()
        edited = re.sub(r"(accuracy\tmps\tcpu:[^\t]*)", r"\1+another_cpu", text, count=0)
        if edited == text:
            fail("no accuracy lines in the state file:\n" + text)
        with open(state, "w") as f:
            f.write(edited)
        server, stub = start()
        settle(stub, "gentle", g, "cuda:0")
        if served_versions.get("gentle") != 2:
            fail("gentle's answers came from version %s, not the new version 2" % served_versions.get("gentle"))
        if metric(server, model="gentle", device="cuda:0") != 0:
            fail("gentle version 2 (same bytes) on cuda:0 was checked again")
        settle(stub, "gentle", g, "mps")
        if metric(server, model="gentle", device="mps") < 1:
            fail("gentle on mps was not checked again under another CPU's key")
        settle(stub, "overflow", x, "cuda:0")
        if metric(server, model="overflow", device="cuda:0") < 1:
            fail("overflow version 2 (new bytes) was not checked")
        if server.stop() != 0:
            fail("server did not stop cleanly")

        # --precision-checks=false: the contract is off; the policy's pick
        # (FP16 on mps, for the overflow model that a check refuses) serves
        # from the first answer, unchecked and without a reason, and no check
        # runs.
        server, stub = start(["--precision-checks=false"])
        y, dtype, reason = infer(stub, "overflow", x, "mps")
        if dtype != "FLOAT16" or reason:
            fail("with --precision-checks=false, overflow on mps ran %s with reason %r" % (dtype, reason))
        if metric(server) != 0:
            fail("a check ran with --precision-checks=false")
        if server.stop() != 0:
            fail("server did not stop cleanly")
        print("accuracy contract: all checks passed")
    finally:
        for s in servers:
            if s.proc.poll() is None:
                s.proc.kill()
        if os.environ.get("KEEP_WORK"):
            print("work kept in", work)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
