#!/usr/bin/env bash
# Writes the demo mlp and cnn (MODELS/mlp, MODELS/cnn from make-demo-models)
# again as AOTInductor packages, same weights, as MODELS/mlp_pt2 and
# MODELS/cnn_pt2; for bench/run.sh and bench/compare.sh. Compiled with the
# server's intra-op threads per CPU worker (its default sizing,
# scheduler/core/thread_sizing.h), as one compiles a package to serve: Inductor
# writes the compiling process's thread count into the package's loops.
#
#   bench/pt2_demo_models.sh MODELS
set -euo pipefail
cd "$(dirname "$0")/.."
models="$1"
cores=$(nproc)
cpu_workers=$(( cores < 4 ? cores : 4 ))
intra_op_threads=$(( cores / cpu_workers > 1 ? cores / cpu_workers : 1 ))
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for demo in mlp cnn; do
  python3 tools/make_pt2_models.py --threads "$intra_op_threads" --demo-$demo "$models/$demo/1/model.pt" \
    "$models" >/dev/null 2>"$log" || { cat "$log" >&2; exit 1; }
done
