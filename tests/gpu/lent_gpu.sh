#!/usr/bin/env bash
# Everything to run when a GPU machine is lent, as one call that fits the
# device time a session gets (about 5 minutes on an H200 with 16 cores):
#  1. tests/gpu/cuda_check.sh: the build against the machine's CUDA
#     PyTorch and the CUDA path for real (OUT_DIR/cuda/);
#  2. tests/gpu/calibrate.py: the machine's device profile
#     (OUT_DIR/profile.json, its log OUT_DIR/calibrate.log);
#  3. tests/gpu/churn_on_gpu.sh: a short churn run on the real cuda:0 beside
#     the simulation given that profile, compared (OUT_DIR/churn/);
#  4. the same with the mix of real ratios (CHURN_GPU_MIX=real: ResNet-50-
#     and BERT-base-like models beside GEMV layers) on the real cuda:0 only
#     (OUT_DIR/churn-real-mix/).
# LENT_GPU_STEPS picks steps by name (default "check calibrate churn
# real-mix"), e.g. "real-mix" alone in a second call to a machine still
# warm from the first (the server and the profile kept in /tmp and OUT_DIR).
# Each step has its own time limit and a step that fails does not stop the
# next that can run (the churn needs the first's server and the second's
# profile). The steps run one after another: cuda_check's throughput and
# calibrate's CPU timings share the machine's cores with nothing (making
# the churn models beside them cost cuda_check 31% of its mlp throughput
# on 2026-12-04).
#
#   tests/gpu/lent_gpu.sh PACKAGES_DIR OUT_DIR
#
# Time on an H200 with 16 cores, 2026-12-04: steps 1-3 about 5 minutes;
# step 4 not yet run (its limit, REAL_MIX_TIMEOUT_S, 200 s). A call's limit
# is 10 minutes: give the whole script less (timeout) and write OUT_DIR
# where what is left comes back.
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

steps=" ${LENT_GPU_STEPS:-check calibrate churn real-mix} "
step() { [[ "$steps" == *" $1 "* ]]; }

if step check; then
  echo "=== $(date +%T) cuda_check.sh"
  timeout "${CUDA_CHECK_TIMEOUT_S:-330}" "$here/cuda_check.sh" "$packages" "$out/cuda" > /dev/null 2>&1
  echo "cuda_check exit $? (log: cuda/check.log)"
  grep -E "^=== |did not become ready|died|SIG|exit [1-9]" "$out/cuda/check.log" | tail -30
fi

if step calibrate; then
  echo "=== $(date +%T) calibrate.py"
  timeout "${CALIBRATE_TIMEOUT_S:-90}" python3 "$here/calibrate.py" --out "$out/profile.json" > "$out/calibrate.log" 2>&1
  echo "calibrate exit $?"
  tail -12 "$out/calibrate.log"
fi

if step churn; then
  echo "=== $(date +%T) churn_on_gpu.sh"
  if [ -f "$out/profile.json" ] && [ -x /tmp/infergate-gpu/build/service/infergate ]; then
    timeout "${CHURN_TIMEOUT_S:-240}" "$here/churn_on_gpu.sh" /tmp/infergate-gpu/build "$out/profile.json" "$out/churn" \
      "$packages/wheels"
    echo "churn_on_gpu exit $?"
  else
    echo "churn_on_gpu: skipped (no profile, or no server built)"
  fi
fi

if step real-mix; then
  echo "=== $(date +%T) churn_on_gpu.sh, the mix of real ratios"
  if [ -f "$out/profile.json" ] && [ -x /tmp/infergate-gpu/build/service/infergate ]; then
    CHURN_GPU_MIX=real timeout "${REAL_MIX_TIMEOUT_S:-200}" "$here/churn_on_gpu.sh" /tmp/infergate-gpu/build \
      "$out/profile.json" "$out/churn-real-mix" "$packages/wheels"
    echo "churn_on_gpu (real mix) exit $?"
  else
    echo "churn_on_gpu (real mix): skipped (no profile, or no server built)"
  fi
fi
echo "=== $(date +%T) done"
