#!/usr/bin/env bash
# The PyPI stage of the tests: what needs packages from PyPI, each set in a
# virtual environment under the build folder (never the system), pinned.
#
# - The second supported build: infergate against PyPI's LibTorch (the
#   torch wheel pinned in tests/pypi/torch-requirements.txt, today 2.15
#   with CUDA 13), its CUDA path compiled and linked, everything else from
#   Debian 13's packages. Then, on the CPU (CI has no GPU), with models
#   saved by that same torch: the model corpus test, the .pt2 package test
#   and the in-process AOTInductor test; and the default build (Debian's
#   LibTorch 2.6, in BUILD_DIR) and this one, each given the other
#   PyTorch's files (cross_version_test); and the integration tests of
#   strings, Triton's configs and model control, REST, the Open Inference
#   Protocol's conformance, the intake gate and the accuracy contract
#   against this server.
# - The real clients (tests/pypi/clients-requirements.txt): NVIDIA's
#   tritonclient wheel and KServe's SDK against that server
#   (real_clients_test) and against the default build's
#   (real_clients_default_build_test).
#
#   tests/pypi/run.sh [--venvs-only | --build-only] [extra ctest args]
#
# --venvs-only makes (or checks) the two environments and stops:
# tests/run.sh runs it in the background while its first build compiles,
# so that the downloads are done by the time this stage comes.
#
# PYPI_TORCH_BUILD_DIR (default build-pypi-torch) holds the build. The two
# environments (torch and its CUDA libraries, about 4.4 GB; the clients,
# about 0.5 GB) live outside the clone, as the Debian 13 root does, so a
# fresh clone reuses them: INFERGATE_VENV_CACHE (default
# ~/.cache/infergate/venvs, inside the root), one folder per name and hash
# of its pins, flags and Python; made under a lock, so two clones never
# make one at once; a folder left unused for 14 days is removed. pip's
# cache keeps the downloads between runs.
# tests/run.sh calls this after the default build (--no-pypi-torch leaves
# it out).
set -euo pipefail
cd "$(dirname "$0")/../.."
. deploy/platform.sh
infergate_builds_natively || exec ./deploy/debian13-root.sh ./tests/pypi/run.sh "$@"

build_only=0
venvs_only=0
if [ "${1:-}" = --build-only ]; then build_only=1; shift; fi
if [ "${1:-}" = --venvs-only ]; then venvs_only=1; shift; fi
build_dir="${PYPI_TORCH_BUILD_DIR:-build-pypi-torch}"
default_build="${BUILD_DIR:-build}"
venv_cache="${INFERGATE_VENV_CACHE:-$HOME/.cache/infergate/venvs}"
mkdir -p "$build_dir" "$venv_cache"

# The environment NAME from REQUIREMENTS, kept in the cache as NAME-<hash
# of the pins, the flags and the root's Python> (a change of any makes a
# new one, never reuses a stale one), made unless a complete one is there
# (.infergate-complete, written last), and linked as LINK: the build sees
# it through that link, so the paths it compiles with are the clone's own
# (ccache's base folder makes them the same in every clone). Under a lock
# per name: a second run waits for the first and then uses its environment.
# Other environments of the name unused for 14 days are removed.
# cached_venv NAME LINK REQUIREMENTS VENV_FLAG [PIP FLAG...]
cached_venv() {
  local name=$1 link=$2 requirements=$3 venv_flag=$4; shift 4
  local key dir old
  # shellcheck disable=SC2086  # an empty VENV_FLAG is no word
  key=$({ cat "$requirements"; echo $venv_flag "$@"; python3 --version; } | sha256sum | cut -c1-16)
  dir="$venv_cache/$name-$key"
  (
    flock 8
    if [ ! -e "$dir/.infergate-complete" ]; then
      rm -rf "$dir"
      # shellcheck disable=SC2086
      python3 -m venv $venv_flag "$dir"
      "$dir/bin/pip" install --quiet --only-binary=:all: --progress-bar off "$@" -r "$requirements"
      touch "$dir/.infergate-complete"
    fi
    touch "$dir/.infergate-used"
    for old in "$venv_cache/$name"-*; do
      [ "$old" != "$dir" ] && [ -d "$old" ] || continue
      if [ -z "$(find "$old/.infergate-used" -mtime -14 2>/dev/null)" ]; then rm -rf "$old"; fi
    done
  ) 8>"$venv_cache/$name.lock"
  [ -L "$link" ] || rm -rf "$link"
  ln -sfn "$dir" "$link"
}
venv="$build_dir/venv"
clients_venv="$build_dir/clients-venv"
start=$(date +%s)
# torch, each package pinned (--no-deps). --system-site-packages: the
# tests' gRPC and protobuf come from Debian, as in the default build; the
# venv's torch comes first on sys.path, so Debian's 2.6 is not seen.
cached_venv torch "$venv" tests/pypi/torch-requirements.txt --system-site-packages --no-deps
# The clients, with their own gRPC and protobuf from PyPI (a lock too).
cached_venv clients "$clients_venv" tests/pypi/clients-requirements.txt "" --no-deps
torch_version=$("$venv/bin/python3" -c 'import torch; print(torch.__version__)')
echo "PyPI torch $torch_version in $(readlink "$venv"), the clients in $(readlink "$clients_venv")" \
  "($(( $(date +%s) - start )) s)"
[ "$venvs_only" = 0 ] || exit 0

start=$(date +%s)
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DINFERGATE_BUILD_TESTS=ON \
  -DINFERGATE_TORCH_PYTHON="$PWD/$venv/bin/python3" \
  -DINFERGATE_CROSS_VERSION_SERVER="$PWD/$default_build/service/infergate" \
  -DINFERGATE_CROSS_VERSION_MAKE_MODELS="$PWD/$default_build/tools/make-demo-models" \
  -DINFERGATE_CLIENTS_PYTHON="$PWD/$clients_venv/bin/python3" >/dev/null
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

# The wheel's libraries export private copies of parts of the C++ library
# (libtorch_cpu: std::filesystem, 142 functions in 2.15) with no symbol
# versions, which satisfy any versioned reference: a server that lists
# them before libstdc++ calls them instead of the system's (torch 2.11's
# remove_all jumped to address 0 on an H200, ending the server at its
# first AOTInductor load after a crash: cmake/torch_from_python.cmake
# says how it is linked now). Every binding the dynamic loader makes for
# the server's own references, resolved at start (LD_BIND_NOW), must put
# no std:: function in LibTorch.
bindings=$(LD_BIND_NOW=1 LD_DEBUG=bindings "$build_dir/service/infergate" --help 2>&1 >/dev/null |
  grep -E "binding file [^ ]*/service/infergate \[0\] to [^ ]*(torch|c10)[^ ]* \[0\]: normal symbol .(_ZNSt|_ZNKSt|_ZSt)" || true)
if [ -n "$bindings" ]; then
  echo "the PyPI-LibTorch server binds $(wc -l <<<"$bindings") C++ library functions to LibTorch's copies, e.g.:" >&2
  head -5 <<<"$bindings" >&2
  exit 1
fi
echo "the PyPI-LibTorch server binds no C++ library function to LibTorch's private copies"

[ "$build_only" = 0 ] || exit 0

# A skipped test fails the run, as in tests/run.sh. CTest's first run in a
# fresh build folder starts the costliest tests first by the times in
# tests/ctest_costs/pypi.txt (tests/run.sh says why).
costs="$build_dir/Testing/Temporary/CTestCostData.txt"
[ -f "$costs" ] || { mkdir -p "$(dirname "$costs")"; cp tests/ctest_costs/pypi.txt "$costs"; }
cd "$build_dir"
log=$(mktemp)
rc=0
# The model tests, the real clients, and the integration tests of what a
# LibTorch could change under the server: strings (triton_examples_test),
# Triton's configs and model control, REST, the Open Inference Protocol's
# conformance, the intake gate, and the accuracy contract (reduced
# precisions checked against FP32 on this LibTorch's kernels). Not torchserve_test: its client imports
# Debian's torchvision, built against Debian's LibTorch 2.6, which crashes
# beside the venv's torch in the test's own Python.
tests="model_corpus_test|aoti_package_test|aoti_model_test|cross_version_test|real_clients_test"
tests+="|real_clients_default_build_test|triton_examples_test|triton_repository_test|model_control_test"
tests+="|rest_api_test|open_inference_conformance_test|intake_abuse_test|accuracy_contract_test"
ctest --output-on-failure -j "$(nproc)" -R "^($tests)\$" "$@" 2>&1 | tee "$log" || rc=$?
if grep -E '\*\*\*Skipped|Not Run|No tests were found' "$log" >/dev/null; then
  echo "PyPI-LibTorch tests were skipped or not found" >&2
  rc=1
elif ! grep -E 'tests failed out of 13$' "$log" >/dev/null; then
  echo "PyPI stage: expected its 13 tests (${tests//|/, })" >&2
  rc=1
fi
rm -f "$log"
exit "$rc"
