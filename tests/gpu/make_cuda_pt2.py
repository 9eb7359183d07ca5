#!/usr/bin/env python3
"""Writes AOTInductor packages built for a real CUDA device, with the
machine's own PyTorch, into a model repository (tests/gpu/cuda_check.sh):

  DIR/mlp_pt2_cuda/1/model.pt2      one CUDA build of make_pt2_models.py's
                                    16 -> 32 -> 4 mlp
  DIR/mlp_pt2_gpu_variants/1/model.pt2  variants "cpu" (a CPU build) and
                                    "cuda" (a CUDA build) of the same mlp

Both carry their signature in the package metadata (pt2_signature.py), so
the folders have no config.pbtxt.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
import torch  # noqa: E402

import make_pt2_models  # noqa: E402
import pt2_signature  # noqa: E402


def package_path(root, name):
    folder = os.path.join(root, name, "1")
    os.makedirs(folder, exist_ok=True)
    return os.path.join(folder, "model.pt2")


def exported_on(device):
    return make_pt2_models.exported(make_pt2_models.model().to(device), device)


def main(root):
    assert torch.cuda.is_available(), "no CUDA device for torch"
    cuda_program = exported_on("cuda")
    signature = pt2_signature.metadata(cuda_program, outputs=["y"])
    with torch.no_grad():
        torch._inductor.aoti_compile_and_package(
            cuda_program, package_path=package_path(root, "mlp_pt2_cuda"),
            inductor_configs={"aot_inductor.metadata": signature})
        print("wrote mlp_pt2_cuda", flush=True)
        files = {}
        for device, program in [("cpu", exported_on("cpu")), ("cuda", cuda_program)]:
            files[device] = torch._inductor.aot_compile(
                program.module(), (torch.randn(2, 16, device=device),),
                options={"aot_inductor.package": True, "aot_inductor.metadata": signature})
        torch._inductor.package.package_aoti(package_path(root, "mlp_pt2_gpu_variants"), files)
        print("wrote mlp_pt2_gpu_variants", flush=True)
        # A fixed batch of 2 rows (raw little-endian float32, for
        # infergate-cli's --input x=2x16:FILE) and its answer in FP32 on the CPU.
        x = torch.arange(32, dtype=torch.float32).reshape(2, 16) / 10
        with open(os.path.join(root, "..", "mlp_pt2_x_2x16.bin"), "wb") as f:
            f.write(x.numpy().tobytes())
        print("reference y:", [round(v, 5) for v in make_pt2_models.model()(x).flatten().tolist()], flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
