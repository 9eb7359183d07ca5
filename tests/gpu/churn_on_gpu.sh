#!/usr/bin/env bash
# The churn benchmark (bench/churn.py) on a lent GPU's real cuda:0 beside
# its simulation given that machine's measured profile (tests/gpu/
# calibrate.py), short: 12 models of 20-200 MB, 15 s per row, the popular
# set shifting every 5 s; then each row's p50 and p99 compared
# (tests/gpu/compare_churn.py: the simulation within 15% of the real device
# or not).
#
#   tests/gpu/churn_on_gpu.sh BUILD_DIR PROFILE OUT_DIR [WHEELS_DIR]
#
# BUILD_DIR holds the server cuda_check.sh built (service/infergate), whose
# Debian libraries are unpacked in ${INFERGATE_DEPS_PREFIX:-/opt/infergate-deps}
# (protoc and the gRPC Python plugin for the client's stubs come from there
# too). The client needs Python's grpc and protobuf: where the machine has
# none, the wheels in WHEELS_DIR are unpacked into a private folder
# (nothing is installed). Everything listens on 127.0.0.1. Writes
# OUT_DIR/churn-real.{md,csv}, churn-sim.{md,csv}, their -requests.csv and
# compare.md.
#
# CHURN_GPU_MIX=real: tools/make_churn_models.py's mix with real ratios
# instead (12 models: 4 ResNet-50-like conv nets of 102 MB, 2 BERT-base-like
# encoders of 438 MB, 6 GEMV layers of 20-200 MB; 2.0 GB in all), on the
# real cuda:0 only: the simulation computes a simulated GPU's work on the
# host, 8-22 GFLOP a request here, so it cannot stand for that device
# (nothing to compare). Its models are kept apart from the GEMV mix's.
# Not part of tests/run.sh: CI has no GPU (churn_on_gpu's
# comparison is tested there on made-up rows, tests/gpu/compare_churn_test.py).
set -uo pipefail
[ $# -ge 3 ] || { echo "usage: churn_on_gpu.sh BUILD_DIR PROFILE OUT_DIR [WHEELS_DIR]" >&2; exit 2; }
repo_root="$(cd "$(dirname "$0")/../.." && pwd)"
build="$(cd "$1" && pwd)"
profile="$(readlink -f "$2")"
out="$(mkdir -p "$3" && cd "$3" && pwd)"
wheels="${4:-}"
cd "$repo_root"
prefix="${INFERGATE_DEPS_PREFIX:-/opt/infergate-deps}"
work="${CHURN_GPU_WORK:-/tmp/infergate-churn-gpu}"
rm -rf "$work/bin" "$work/real" "$work/sim"
mkdir -p "$work/bin" "$work/py"

# The server and the stub compiler need the unpacked libraries; Python and
# torch keep the machine's own, so only these three see them.
for tool in "$build/service/infergate" "$prefix/usr/bin/protoc" "$prefix/usr/bin/grpc_python_plugin"; do
  printf '#!/bin/sh\nLD_LIBRARY_PATH="%s" exec "%s" "$@"\n' \
    "$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$tool" > "$work/bin/$(basename "$tool")"
  chmod +x "$work/bin/$(basename "$tool")"
done
export PATH="$work/bin:$PATH"

if ! python3 -c 'import grpc, google.protobuf' 2>/dev/null; then
  [ -n "$wheels" ] && ls "$wheels"/*.whl > /dev/null 2>&1 || { echo "churn_on_gpu: no Python grpc here, and no wheels given"; exit 1; }
  # A wheel is a zip laid out as site-packages: unpacked, not installed.
  python3 - "$work/py" "$wheels"/*.whl <<'PY' || exit 1
import sys, zipfile
for wheel in sys.argv[2:]:
    zipfile.ZipFile(wheel).extractall(sys.argv[1])
PY
  export PYTHONPATH="$work/py${PYTHONPATH:+:$PYTHONPATH}"
  python3 -c 'import grpc, google.protobuf; print("churn_on_gpu: grpc", grpc.__version__, "from the wheels")' || exit 1
fi

mix="${CHURN_GPU_MIX:-gemv}"
case "$mix" in
  gemv) models="$work/models"; modes="real sim" ;;
  real) models="$work/models-real"; modes="real" ;;
  *) echo "churn_on_gpu: CHURN_GPU_MIX is gemv or real, not $mix" >&2; exit 2 ;;
esac
if [ ! -f "$models/.done" ]; then
  rm -rf "$models"
  python3 tools/make_churn_models.py "$models" --count 12 --min-mb 20 --max-mb 200 --mix "$mix" > /dev/null || exit 1
  touch "$models/.done"
fi

status=0
for mode in $modes; do
  flags=()
  hide=()
  [ "$mode" = real ] && flags=(--real-device)
  # The simulated run's server must not see the real GPU (it refuses to
  # simulate a device the machine has).
  [ "$mode" = sim ] && hide=(env CUDA_VISIBLE_DEVICES=)
  echo "=== $(date +%T) churn, $mode cuda:0"
  "${hide[@]}" python3 bench/churn.py --server "$work/bin/infergate" --proto-dir proto --models "$work/models" \
    --work "$work/$mode" --profile "$profile" --seconds 15 --shift 5 --settle 2 --compare-staging 0 "${flags[@]}" \
    --out "$out/churn-$mode.md" --csv "$out/churn-$mode.csv" --requests-csv "$out/churn-$mode-requests.csv" \
    > "$out/churn-$mode.log" 2>&1 || { echo "churn ($mode) failed:"; tail -20 "$out/churn-$mode.log"; status=1; }
  [ -f "$out/churn-$mode.md" ] && head -12 "$out/churn-$mode.md"
done
[ $status = 0 ] && [ "$mix" = gemv ] &&
  python3 tests/gpu/compare_churn.py "$out/churn-real.csv" "$out/churn-sim.csv" | tee "$out/compare.md"
exit $status
