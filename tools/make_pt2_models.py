#!/usr/bin/env python3
"""Writes AOTInductor (.pt2) demo models into a model repository, the way a
PyTorch 2.x user makes them: torch.export with a dynamic batch dimension,
then torch._inductor's aoti_compile_and_package (one CPU build), or
aot_compile per variant and package_aoti (several builds in one package).

  make_pt2_models.py DIR
  make_pt2_models.py --mlp DIR                 only DIR/mlp_pt2 (one compile)
  make_pt2_models.py --demo-mlp MODEL_PT DIR   the demo mlp (make-demo-models'
                                               256-512-512-10) as DIR/mlp_pt2,
                                               same weights, for the benchmark
  make_pt2_models.py --demo-cnn MODEL_PT DIR   likewise make-demo-models' cnn
                                               (3x64x64 images) as DIR/cnn_pt2

  --threads N first (any form): compile with torch.set_num_threads(N).

  Each form's folders are compiled once per content: kept under
  $INFERGATE_PT2_CACHE (default ~/.cache/infergate/pt2), named by a hash of
  this script, pt2_signature.py, the form, its input file, the thread count
  and this torch (its version and path), and copied from there afterwards.
  A compile takes 20-50 s; the tests and the benchmark ask for the same
  packages in every build tree and every run. INFERGATE_PT2_CACHE=off
  compiles every time.
  Inductor writes the compiling process's thread count into a CPU build's
  loops, which then run on that many threads each call wherever the
  package is served; for infergate, N should be its intra-op threads per
  CPU worker.

  DIR/mlp_pt2/1/model.pt2           the CPU build, with its config.pbtxt
  DIR/mlp_pt2_bare/1/model.pt2      the same package with no config.pbtxt:
                                    the server reads its signature from the
                                    package's metadata (pt2_signature.py)
  DIR/mlp_pt2_variants/1/model.pt2  variants "cpu" and "cuda"; with no GPU
                                    here the "cuda" one is a CPU build, which
                                    only a simulated cuda device runs
  DIR/mlp_pt2_torchscript/1/model.pt  the same network as TorchScript

Needs Debian 13's python3-torch, python3-setuptools and g++.
"""
import contextlib
import fcntl
import hashlib
import os
import shutil
import sys
import tempfile

import torch

import pt2_signature

MAX_BATCH = 64
CONFIG = """max_batch_size: %d
inputs { name: "x" dtype: FLOAT32 dims: [16] }
outputs { name: "y" dtype: FLOAT32 dims: [4] }
""" % MAX_BATCH


class Mlp(torch.nn.Module):
    """16 -> 32 -> 4 with ReLU; weights from a fixed seed."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(20261126)
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(32, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class FromTorchScript(torch.nn.Module):
    """A network whose weights are taken, by name, from a TorchScript file
    make-demo-models wrote."""

    def __init__(self, model_pt, names):
        super().__init__()
        params = dict(torch.jit.load(model_pt).named_parameters())
        for name in names:
            self.register_buffer(name, params[name].detach().clone())


class DemoMlp(FromTorchScript):
    """make-demo-models' mlp, its weights taken from its TorchScript file."""

    def __init__(self, model_pt):
        super().__init__(model_pt, ["w1", "b1", "w2", "b2", "w3", "b3"])

    def forward(self, x):
        h = torch.relu(torch.nn.functional.linear(x, self.w1, self.b1))
        h = torch.relu(torch.nn.functional.linear(h, self.w2, self.b2))
        return torch.nn.functional.linear(h, self.w3, self.b3)


class DemoCnn(FromTorchScript):
    """make-demo-models' cnn, its weights taken from its TorchScript file."""

    def __init__(self, model_pt):
        super().__init__(model_pt, ["c1w", "c1b", "c2w", "c2b", "fw", "fb"])

    def forward(self, image):
        f = torch.nn.functional
        h = f.max_pool2d(torch.relu(f.conv2d(image, self.c1w, self.c1b, 1, 1)), 2)
        h = f.max_pool2d(torch.relu(f.conv2d(h, self.c2w, self.c2b, 1, 1)), 2)
        return f.linear(torch.flatten(h, 1), self.fw, self.fb)


def inductor_configs(configs):
    """`configs`, and where this PyTorch has the option (2.6 has not), a
    compiled library that links no LibTorch: its runtime functions are then
    taken from the process that opens it. Linked, the library names the
    libtorch that the compiler found first, which beside another LibTorch
    (Debian's in /usr/lib, when PyPI's torch runs from a virtual
    environment) is the wrong one, and infergate refuses it."""
    if hasattr(torch._inductor.config.aot_inductor, "link_libtorch"):
        configs = dict(configs, **{"aot_inductor.link_libtorch": False})
    return configs


@contextlib.contextmanager
def one_compile_at_a_time():
    """Holds a lock beside Inductor's cache folder (/tmp/torchinductor_$USER,
    shared by every process of the user) while compiling. Two runs compiling
    the same graph at once (tests side by side) wrote the same cache files,
    and one package came out with metadata lacking its AOTI_DEVICE_KEY."""
    from torch._inductor.runtime.runtime_utils import cache_dir
    with open(cache_dir().rstrip("/") + ".infergate.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def demo_package(module, example, input_name, max_batch, config, root, name):
    """`module` exported with a dynamic batch dimension up to `max_batch`
    and compiled into ROOT/NAME/1/model.pt2 with `config` beside it."""
    batch = torch.export.Dim("batch", min=1, max=max_batch)
    program = torch.export.export(module.eval(), (example,), dynamic_shapes={input_name: {0: batch}})
    with torch.no_grad(), one_compile_at_a_time():
        torch._inductor.aoti_compile_and_package(
            program, package_path=write(root, name, "model.pt2", config),
            inductor_configs=inductor_configs({"aot_inductor.metadata":
                                               pt2_signature.metadata(program, outputs=["logits"])}))


def demo_mlp(model_pt, root):
    config = ('max_batch_size: %d\ninputs { name: "x" dtype: FLOAT32 dims: [256] }\n'
              'outputs { name: "logits" dtype: FLOAT32 dims: [10] }\n'
              'dynamic_batching { max_queue_delay_us: 500 }\nwarmup: true\n' % MAX_BATCH)
    demo_package(DemoMlp(model_pt), torch.randn(2, 256), "x", MAX_BATCH, config, root, "mlp_pt2")


def demo_cnn(model_pt, root):
    # As make-demo-models' cnn config, less its priority levels.
    config = ('max_batch_size: 32\ninputs { name: "image" dtype: FLOAT32 dims: [3, 64, 64] }\n'
              'outputs { name: "logits" dtype: FLOAT32 dims: [10] }\n'
              'dynamic_batching { max_queue_delay_us: 1000 }\nwarmup: true\n')
    demo_package(DemoCnn(model_pt), torch.randn(2, 3, 64, 64), "image", 32, config, root, "cnn_pt2")


def model():
    return Mlp().eval()


def exported(module, device="cpu"):
    """`module` exported with a dynamic batch, from an example on `device`
    (where the module's parameters must be too)."""
    batch = torch.export.Dim("batch", min=1, max=MAX_BATCH)
    return torch.export.export(module, (torch.randn(2, 16, device=device),), dynamic_shapes={"x": {0: batch}})


def write(root, name, filename, config=CONFIG):
    folder = os.path.join(root, name, "1")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(root, name, "config.pbtxt"), "w") as f:
        f.write(config)
    return os.path.join(folder, filename)


def mlp(root, program, signature):
    """ROOT/mlp_pt2: the CPU build of `program`, carrying `signature` (its
    max_batch_size, inputs and outputs); returns the package's path."""
    with torch.no_grad(), one_compile_at_a_time():
        return torch._inductor.aoti_compile_and_package(
            program, package_path=write(root, "mlp_pt2", "model.pt2"),
            inductor_configs=inductor_configs({"aot_inductor.metadata": signature}))


def mlp_signature(program):
    return pt2_signature.metadata(program, outputs=["y"])


def main(root):
    module = model()
    program = exported(module)
    signature = mlp_signature(program)
    package = mlp(root, program, signature)
    with torch.no_grad(), one_compile_at_a_time():
        os.makedirs(os.path.join(root, "mlp_pt2_bare", "1"))
        shutil.copy(package, os.path.join(root, "mlp_pt2_bare", "1", "model.pt2"))
        # Several builds in one package, each named after the device kind it serves.
        files = {name: torch._inductor.aot_compile(program.module(), (torch.randn(2, 16),),
                                                   options=inductor_configs({"aot_inductor.package": True,
                                                                             "aot_inductor.metadata": signature}))
                 for name in ["cpu", "cuda"]}
        torch._inductor.package.package_aoti(write(root, "mlp_pt2_variants", "model.pt2"), files)
    torch.jit.script(module).save(write(root, "mlp_pt2_torchscript", "model.pt"))


def made_once(form, root, make, input_file=None):
    """make(ROOT) for this `form`, or, when an earlier run made the same
    (see the module's docstring), its folders copied into ROOT."""
    cache = os.environ.get("INFERGATE_PT2_CACHE", os.path.expanduser("~/.cache/infergate/pt2"))
    if cache == "off":
        return make(root)
    here = os.path.dirname(os.path.abspath(__file__))
    key = hashlib.sha256()
    for part in (os.path.join(here, "make_pt2_models.py"), os.path.join(here, "pt2_signature.py"), input_file):
        if part:
            with open(part, "rb") as f:
                key.update(f.read())
    key.update(("%s|%s|%s|%d" % (form, torch.__version__, torch.__file__, torch.get_num_threads())).encode())
    made = os.path.join(cache, key.hexdigest()[:24])
    if not os.path.isdir(made):
        try:
            os.makedirs(cache, exist_ok=True)
            scratch = tempfile.mkdtemp(prefix="making-", dir=cache)
        except OSError as e:  # no cache to write to: compile in place
            print("make_pt2_models: no cache at %s (%s); compiling" % (cache, e), file=sys.stderr)
            return make(root)
        try:
            make(scratch)
            try:
                os.rename(scratch, made)  # whole or not at all; a run beside this one may win
            except OSError:
                pass
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(made, root, dirs_exist_ok=True)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--threads":
        torch.set_num_threads(int(sys.argv[2]))
        del sys.argv[1:3]
    if len(sys.argv) == 4 and sys.argv[1] == "--demo-mlp":
        made_once("demo-mlp", sys.argv[3], lambda root: demo_mlp(sys.argv[2], root), input_file=sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "--demo-cnn":
        made_once("demo-cnn", sys.argv[3], lambda root: demo_cnn(sys.argv[2], root), input_file=sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "--mlp":
        def only_mlp(root):
            program = exported(model())
            mlp(root, program, mlp_signature(program))
        made_once("mlp", sys.argv[2], only_mlp)
    elif len(sys.argv) == 2:
        made_once("all", sys.argv[1], main)
    else:
        sys.exit(__doc__)
