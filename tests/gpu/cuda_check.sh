#!/usr/bin/env bash
# Builds infergate against the CUDA-enabled PyTorch of a machine with an
# NVIDIA GPU and runs the CUDA path for real: device discovery (LibTorch and
# NVML), placement, each precision against the CPU's answer, TorchScript and
# AOTInductor (.pt2) models built for CUDA, the Prometheus device metrics,
# throughput on the GPU, several workers per GPU against one, and loads
# from host copies under a cuda:0 budget too small for two models.
#
#   tests/gpu/cuda_check.sh PACKAGES_DIR OUT_DIR
#
# PACKAGES_DIR holds the Debian 13 packages that building needs, less
# LibTorch (tests/gpu/fetch_build_packages.sh), or prefix.tar.xz, the same
# packed smaller (tests/gpu/pack_build_prefix.sh); they are unpacked into a
# private prefix, /opt/infergate-deps, and nothing is installed. The
# machine supplies the compiler (GCC 13+), CMake, Ninja and python3 with
# torch built for CUDA. Everything it serves listens on 127.0.0.1 only.
# Not part of tests/run.sh: CI has no GPU. A step that fails is reported
# and the later steps still run; the log is OUT_DIR/check.log, each server's
# log OUT_DIR/server-*.log.
set -uo pipefail
[ $# -eq 2 ] || { echo "usage: cuda_check.sh PACKAGES_DIR OUT_DIR" >&2; exit 2; }
repo_root="$(cd "$(dirname "$0")/../.." && pwd)"
packages="$(cd "$1" && pwd)"
out="$(mkdir -p "$2" && cd "$2" && pwd)"
cd "$repo_root"
exec > >(tee "$out/check.log") 2>&1

step() { echo; echo "=== $(date +%T) $*"; }
prefix="${INFERGATE_DEPS_PREFIX:-/opt/infergate-deps}"
work=/tmp/infergate-gpu
build=$work/build
models=$work/models
mkdir -p "$work" "$models"
deps_library_path="$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
with_deps() { LD_LIBRARY_PATH="$deps_library_path" "$@"; }

step "machine"
nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv
grep PRETTY_NAME /etc/os-release; ldd --version | head -1
g++ --version | head -1; cmake --version | head -1; echo "ninja $(ninja --version)"
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "available",
torch.cuda.is_available(), "cxx11 abi", torch.compiled_with_cxx11_abi())'
torch_dir="$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')"
nvcc_path="$(command -v nvcc || true)"
echo "torch: $torch_dir; nvcc: ${nvcc_path:-none}"

step "AOTInductor packages for CUDA (background, while the server builds)"
(python3 tests/gpu/make_cuda_pt2.py "$models" > "$out/pt2.log" 2>&1; echo "make_cuda_pt2 exit $?" >> "$out/pt2.log") &
pt2_pid=$!

step "unpack the Debian 13 packages into $prefix"
mkdir -p "$prefix"
if [ -f "$packages/prefix.tar.xz" ]; then  # tests/gpu/pack_build_prefix.sh's archive of them
  tar -xJf "$packages/prefix.tar.xz" -C "$prefix" && echo "unpacked $packages/prefix.tar.xz"
else
  for deb in "$packages"/*.deb; do dpkg -x "$deb" "$prefix"; done
  echo "$(ls "$packages"/*.deb | wc -l) packages"
fi

step "configure"
# The torch package is described directly rather than through its own CMake
# files: with those of torch 2.11 (pip) protobuf::libprotobuf named no
# library, so infergate's generated code linked no protobuf at all, and they
# spend 40 s detecting a CUDA compiler infergate does not
# use (its code reaches the GPU through LibTorch's device-generic API only).
# libstdc++ comes first (cmake/torch_from_python.cmake says why).
cuda_include=""
[ -n "$nvcc_path" ] && cuda_include=";$(dirname "$(dirname "$(readlink -f "$nvcc_path")")")/include"
mkdir -p "$work/torch-config"
cat > "$work/torch-config/TorchConfig.cmake" <<CMAKE
add_library(torch INTERFACE IMPORTED)
set_target_properties(torch PROPERTIES
  INTERFACE_INCLUDE_DIRECTORIES "$torch_dir/include;$torch_dir/include/torch/csrc/api/include$cuda_include"
  INTERFACE_COMPILE_DEFINITIONS "_GLIBCXX_USE_CXX11_ABI=1"
  INTERFACE_LINK_LIBRARIES "-Wl,--no-as-needed;-lstdc++;$torch_dir/lib/libtorch_cuda.so;$torch_dir/lib/libc10_cuda.so;$torch_dir/lib/libtorch.so;$torch_dir/lib/libtorch_cpu.so;$torch_dir/lib/libc10.so")
set(TORCH_FOUND TRUE)
CMAKE
# Debian's pkg-config files (re2's, read by gRPC's CMake files) give -l
# flags with -L/usr/lib/...: the -L before them makes those find the prefix.
if ! cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DINFERGATE_BUILD_TESTS=OFF \
    -DINFERGATE_WERROR=OFF -DCMAKE_PREFIX_PATH="$prefix/usr" -DTorch_DIR="$work/torch-config" \
    -DCMAKE_EXE_LINKER_FLAGS="-Wl,--no-as-needed -L$prefix/usr/lib/x86_64-linux-gnu" > "$out/configure.log" 2>&1; then
  tail -25 "$out/configure.log"; exit 1
fi
grep -i "protobuf\|grpc" "$out/configure.log" | head -4

step "build"
t0=$(date +%s)
if ! with_deps cmake --build "$build" -j "$(nproc)" --target infergate infergate-cli make-demo-models \
    > "$out/build.log" 2>&1; then
  grep -B2 -A8 -m 12 "error" "$out/build.log" | head -120
  exit 1
fi
echo "built in $(( $(date +%s) - t0 )) s; $(grep -c "warning:" "$out/build.log") warning lines"
grep "warning:" "$out/build.log" | sed 's/.*warning: //' | sort | uniq -c | sort -rn | head -8
with_deps ldd "$build/service/infergate" | grep -E "torch|c10|nvidia|cuda" | sed 's/ (0x.*//'

cli() { with_deps timeout 60 "$build/tools/infergate-cli" --address 127.0.0.1:50051 "$@"; }
server_pid=""
start_server() {  # NAME FLAGS...: serves $models; waits for it to listen
  local name=$1; shift
  # Started directly, not through with_deps: a function run in the
  # background is a subshell, whose pid $! would be, and SIGTERM would end
  # it and leave the server holding its ports.
  LD_LIBRARY_PATH="$deps_library_path" \
    "$build/service/infergate" --address 127.0.0.1:50051 --http-address 127.0.0.1:8000 \
    --metrics-address 127.0.0.1:9464 --model-repository "$models" "$@" > "$out/server-$name.log" 2>&1 &
  server_pid=$!
  # Ready once warm-up (accuracy checks and a first run of each warm-up
  # model on each device) has ended: a crash there is told apart from one
  # in serving.
  for _ in $(seq 1 600); do
    grep -q "\] serving$" "$out/server-$name.log" && { echo "server $name ready"; return 0; }
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.2
  done
  echo "server $name did not become ready"; tail -30 "$out/server-$name.log"; crash_report "$name"; return 1
}
crash_report() {  # NAME: the server's fatal-signal report, if it wrote one
  grep -A40 "^\*\*\* SIG" "$out/server-$1.log" | head -45
}
alive() {  # after a step: says so if the server died, with its report
  kill -0 "$server_pid" 2>/dev/null && return 0
  echo "!!! the server died during this step"; crash_report "$1"; return 1
}
stop_server() {
  local t0; t0=$(date +%s%N)
  kill -TERM "$server_pid"; wait "$server_pid"; local rc=$?
  echo "server exit $rc, $(( ($(date +%s%N) - t0) / 1000000 )) ms after SIGTERM"
}

step "demo models"
with_deps "$build/tools/make-demo-models" "$models" --with-bench-models > /dev/null && ls "$models"
wait "$pt2_pid"; cat "$out/pt2.log" | grep -v Warning | tail -5

step "server, one worker per GPU"
start_server one || exit 1
grep -iE "device|cuda|nvml|precision|warn|error" "$out/server-one.log" | head -30
cli devices
cli models | head -30

step "mlp: each precision on cuda:0 against the CPU (same input, seed 42)"
cli infer --model mlp --device cpu --precision FP32 --show 6
for p in AUTO FP32 FP16 BF16; do cli infer --model mlp --device cuda:0 --precision "$p" --show 6; done
cli infer --model mlp --device cuda:0 --precision FP16 --fallback DENY --show 3
alive one
step "other models on cuda"
cli infer --model cnn --device cuda --show 4
cli infer --model cnn --device cpu --show 4
cli infer --model embed --device cuda --input ids=4x8:random --show 4
cli infer --model poly64 --device cuda:0 --show 4
cli infer --model poly64 --device cpu --show 4
cli infer --model mlp --device cuda:7 --show 2
cli infer --model mlp --device mps --show 2
cli infer --model mlp --show 2
alive one
step "AOTInductor packages built for CUDA"
for m in mlp_pt2_cuda mlp_pt2_gpu_variants; do
  for d in cuda:0 cpu; do
    cli infer --model "$m" --device "$d" --input "x=2x16:$work/mlp_pt2_x_2x16.bin" --show 8
  done
done
grep "reference y" "$out/pt2.log"

alive one
step "Open Inference REST on cuda and metrics"
python3 - <<'PY'
import json, random, urllib.request
random.seed(1)
body = {"inputs": [{"name": "x", "shape": [2, 256], "datatype": "FP32",
                    "data": [random.gauss(0, 1) for _ in range(512)]}],
        "parameters": {"device": "cuda", "precision": "BF16", "timing": True}}
req = urllib.request.Request("http://127.0.0.1:8000/v2/models/mlp/infer", json.dumps(body).encode(),
                             {"Content-Type": "application/json"})
answer = json.load(urllib.request.urlopen(req, timeout=30))
print("REST parameters:", answer.get("parameters"), "outputs:",
      [(o["name"], o["datatype"], o["shape"], o["data"][:3]) for o in answer["outputs"]])
metrics = urllib.request.urlopen("http://127.0.0.1:9464/metrics", timeout=30).read().decode()
lines = [l for l in metrics.splitlines() if "cuda" in l and not l.startswith("#")]
print(len(lines), "metric lines name cuda; some:")
seen = set()
for l in lines:
    name = l.split("{")[0]
    if name not in seen:
        seen.add(name)
        print(" ", l[:200])
PY
nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv

bench() {  # LABEL ARGS...
  local label=$1; shift
  echo "--- $label"; cli bench "$@" --duration 4 --warmup 1 2>&1 | grep -vE "^\s*$" | head -12
}
together() {  # mlp and cnn at once, one client each
  bench "mlp (with cnn)" --model mlp --device cuda:0 --concurrency 32 > "$work/a.txt" &
  local other=$!
  bench "cnn (with mlp)" --model cnn --device cuda:0 --concurrency 32 > "$work/b.txt"
  wait "$other"; cat "$work/a.txt" "$work/b.txt"
}
alive one
step "throughput, one worker per GPU"
bench "mlp cuda:0 c64" --model mlp --device cuda:0 --concurrency 64
bench "mlp cpu c64" --model mlp --device cpu --concurrency 64
bench "cnn cuda:0 c64" --model cnn --device cuda:0 --concurrency 64
bench "cnn cuda:0 c64 rows 8" --model cnn --device cuda:0 --concurrency 64 --rows 8
echo "--- mlp and cnn together on cuda:0"
together
stop_server

step "server, two workers per GPU"
start_server two --accelerator-workers 2 || exit 1
grep -iE "worker|stream" "$out/server-two.log" | head -10
bench "mlp cuda:0 c64" --model mlp --device cuda:0 --concurrency 64
bench "cnn cuda:0 c64" --model cnn --device cuda:0 --concurrency 64
echo "--- mlp and cnn together on cuda:0"
together
alive two
stop_server

step "host copies: a cuda:0 budget that holds heavy (15.7 MB) or mlp (1.6 MB) in FP32, not both"
start_server copies --cache-budget "cuda:0=17000000" || exit 1
cli infer --model heavy --device cpu --precision FP32 --show 3
cli infer --model mlp --device cpu --precision FP32 --show 3
for round in 1 2 3; do
  echo "--- round $round"
  cli infer --model heavy --device cuda:0 --precision FP32 --show 3
  cli infer --model mlp --device cuda:0 --precision FP32 --show 3
done
python3 - <<'PY'
import urllib.request
metrics = urllib.request.urlopen("http://127.0.0.1:9464/metrics", timeout=30).read().decode()
for l in metrics.splitlines():
    if not l.startswith("#") and ("host_copy" in l or "model_loads" in l or "evict" in l):
        print(" ", l[:200])
PY
grep -iE "evict|host cop|demot|loaded (heavy|mlp)" "$out/server-copies.log" | head -20
alive copies
stop_server
grep -ciE "error|fatal" "$out"/server-*.log
step "done"
