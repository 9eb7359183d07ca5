#!/usr/bin/env bash
# The second supported build: infergate against PyPI's LibTorch (the torch
# wheel pinned in tests/pypi_torch/requirements.txt, today 2.15 with CUDA
# 13), its CUDA path compiled and linked, everything else from Debian 13's
# packages. Then, on the CPU (CI has no GPU), with models saved by that same
# torch: the model corpus test, the .pt2 package test and the in-process
# AOTInductor test; and the default build (Debian's LibTorch 2.6, in
# BUILD_DIR) given that torch's files (cross_version_test).
#
#   tests/pypi_torch/run.sh [--build-only] [extra ctest args]
#
# The wheel and its CUDA libraries (about 4.4 GB) go into a virtual
# environment under the build folder (PYPI_TORCH_BUILD_DIR, default
# build-pypi-torch/venv), never into the system; pip's cache keeps the
# downloads between runs. tests/run.sh calls this after the default build.
set -euo pipefail
cd "$(dirname "$0")/../.."
. deploy/platform.sh
infergate_builds_natively || exec ./deploy/debian13-root.sh ./tests/pypi_torch/run.sh "$@"

build_only=0
if [ "${1:-}" = --build-only ]; then build_only=1; shift; fi
build_dir="${PYPI_TORCH_BUILD_DIR:-build-pypi-torch}"
default_build="${BUILD_DIR:-build}"
requirements=tests/pypi_torch/requirements.txt
venv="$build_dir/venv"
mkdir -p "$build_dir"

# The environment, made again only when the pins change. --system-site-packages:
# the tests' gRPC and protobuf come from Debian, as in the default build;
# the venv's torch comes first on sys.path, so Debian's 2.6 is not seen.
start=$(date +%s)
if ! cmp -s "$requirements" "$venv/.infergate-requirements"; then
  rm -rf "$venv"
  python3 -m venv --system-site-packages "$venv"
  "$venv/bin/pip" install --quiet --no-deps --only-binary=:all: --progress-bar off -r "$requirements"
  cp "$requirements" "$venv/.infergate-requirements"
fi
torch_version=$("$venv/bin/python3" -c 'import torch; print(torch.__version__)')
echo "PyPI torch $torch_version in $venv ($(( $(date +%s) - start )) s)"

start=$(date +%s)
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DINFERGATE_BUILD_TESTS=ON \
  -DINFERGATE_TORCH_PYTHON="$PWD/$venv/bin/python3" \
  -DINFERGATE_CROSS_VERSION_SERVER="$PWD/$default_build/service/infergate" >/dev/null
# Only what its tests run: the server, the demo models' maker and the
# in-process AOTInductor test.
cmake --build "$build_dir" --target infergate make-demo-models aoti_model_test
echo "PyPI-LibTorch build took $(( $(date +%s) - start )) s"

# The CUDA path is compiled in: the server links LibTorch's CUDA libraries,
# and they resolve (from the NVIDIA packages in the venv).
linked=$(ldd "$build_dir/service/infergate")
for lib in libtorch_cuda.so libc10_cuda.so libcudart.so.13; do
  if ! grep -q "$lib => /" <<<"$linked"; then
    echo "the PyPI-LibTorch server does not link $lib:" >&2
    grep -E "torch|c10|cuda|not found" <<<"$linked" >&2
    exit 1
  fi
done
if grep -q "not found" <<<"$linked"; then
  echo "the PyPI-LibTorch server has unresolved libraries:" >&2
  grep "not found" <<<"$linked" >&2
  exit 1
fi
echo "the PyPI-LibTorch server links LibTorch's CUDA libraries (libtorch_cuda, libc10_cuda, libcudart)"

[ "$build_only" = 0 ] || exit 0

# A skipped test fails the run, as in tests/run.sh.
cd "$build_dir"
log=$(mktemp)
rc=0
ctest --output-on-failure -j "$(nproc)" \
  -R '^(model_corpus_test|aoti_package_test|aoti_model_test|cross_version_test)$' "$@" 2>&1 | tee "$log" || rc=$?
if grep -E '\*\*\*Skipped|Not Run|No tests were found' "$log" >/dev/null; then
  echo "PyPI-LibTorch tests were skipped or not found" >&2
  rc=1
elif ! grep -E 'tests failed out of 4$' "$log" >/dev/null; then
  echo "PyPI-LibTorch: expected its 4 tests (model_corpus_test, aoti_package_test, aoti_model_test, cross_version_test)" >&2
  rc=1
fi
rm -f "$log"
exit "$rc"
