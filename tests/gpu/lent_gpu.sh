#!/usr/bin/env bash
# Everything to run when a GPU machine is lent, as one call that fits the
# device time a session gets (about 5 minutes on an H200 with 16 cores):
#  1. tests/gpu/cuda_check.sh: the build against the machine's CUDA
#     PyTorch and the CUDA path for real (OUT_DIR/cuda/);
#  2. tests/gpu/calibrate.py: the machine's device profile
#     (OUT_DIR/profile.json, its log OUT_DIR/calibrate.log);
#  3. tests/gpu/churn_on_gpu.sh: a short churn run on the real cuda:0 beside
#     the simulation given that profile, compared (OUT_DIR/churn/).
# Each step has its own time limit and a step that fails does not stop the
# next that can run (the churn needs the first's server and the second's
# profile). The steps run one after another: cuda_check's throughput and
# calibrate's CPU timings share the machine's cores with nothing (making
# the churn models beside them cost cuda_check 31% of its mlp throughput
# on 2026-12-04).
#
#   tests/gpu/lent_gpu.sh PACKAGES_DIR OUT_DIR
#
# PACKAGES_DIR: tests/gpu/fetch_build_packages.sh's Debian packages, or
# their archive from tests/gpu/pack_build_prefix.sh (prefix.tar.xz, 23 MB
# against 53: what a lent machine's 64 MiB upload, the tree included, has
# room for), with the client's Python wheels (grpcio and protobuf for the
# machine's Python) in PACKAGES_DIR/wheels for the churn step.
#
# Prepared on any host (the packages through the Debian 13 root, the wheels
# for the GPU machine's Python, 3.12 on Ubuntu 24.04):
#   deploy/debian13-root.sh tests/gpu/fetch_build_packages.sh gpu-packages
#   deploy/debian13-root.sh tests/gpu/pack_build_prefix.sh gpu-packages gpu-packed
#   python3 -m pip download --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 \
#     --platform manylinux_2_17_x86_64 -d gpu-packed/wheels grpcio==1.68.1 protobuf==4.21.12
# then, there: tests/gpu/lent_gpu.sh gpu-packed /tmp/gpu-out, and OUT_DIR
# taken back as one archive where the machine returns only a few files.
set -uo pipefail
[ $# -eq 2 ] || { echo "usage: lent_gpu.sh PACKAGES_DIR OUT_DIR" >&2; exit 2; }
here="$(cd "$(dirname "$0")" && pwd)"
packages="$(cd "$1" && pwd)"
out="$(mkdir -p "$2" && cd "$2" && pwd)"
cd "$here/../.."

echo "=== $(date +%T) cuda_check.sh"
timeout "${CUDA_CHECK_TIMEOUT_S:-330}" "$here/cuda_check.sh" "$packages" "$out/cuda" > /dev/null 2>&1
echo "cuda_check exit $? (log: cuda/check.log)"
grep -E "^=== |did not become ready|died|SIG|exit [1-9]" "$out/cuda/check.log" | tail -30

echo "=== $(date +%T) calibrate.py"
timeout "${CALIBRATE_TIMEOUT_S:-90}" python3 "$here/calibrate.py" --out "$out/profile.json" > "$out/calibrate.log" 2>&1
echo "calibrate exit $?"
tail -12 "$out/calibrate.log"

echo "=== $(date +%T) churn_on_gpu.sh"
if [ -f "$out/profile.json" ] && [ -x /tmp/infergate-gpu/build/service/infergate ]; then
  timeout "${CHURN_TIMEOUT_S:-240}" "$here/churn_on_gpu.sh" /tmp/infergate-gpu/build "$out/profile.json" "$out/churn" \
    "$packages/wheels"
  echo "churn_on_gpu exit $?"
else
  echo "churn_on_gpu: skipped (no profile, or no server built)"
fi
echo "=== $(date +%T) done"
