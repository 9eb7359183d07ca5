#!/usr/bin/env bash
# infergate beside the servers users pick instead (TorchServe 0.12 and
# LitServe, from PyPI) on the demo mlp, with one load generator (h2load) for
# every row: bench/peers.py says what is measured and how. Writes
# bench/results/peers-<stamp>.md.
#
#   bench/peers.sh                    (BENCH_SECONDS per row, default 5)
#   BENCH_SKIP_BUILD=1 bench/peers.sh  uses build/ as it is
#
# The peers are installed only here, when the benchmark runs: their Python
# packages into build/peers-venv (bench/peers/requirements.txt), and the
# Java runtime TorchServe's front end needs and perf_analyzer's libb64 from
# Debian's archive into the Debian 13 root (openjdk-21-jre-headless,
# libb64-0d). Neither the README's set-up commands nor the tests install
# them.
set -euo pipefail
cd "$(dirname "$0")/.."
. deploy/platform.sh
infergate_builds_natively || exec ./deploy/debian13-root.sh ./bench/peers.sh "$@"

build_dir="${BUILD_DIR:-build}"
if [ "${BENCH_SKIP_BUILD:-0}" != 1 ]; then
  ./deploy/install-deps.sh --test  # h2load
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build_dir" --target infergate infergate-cli make-demo-models
fi
if ! command -v java >/dev/null || ! [ -e /usr/lib/x86_64-linux-gnu/libb64.so.0d ]; then
  echo "bench/peers.sh: installing openjdk-21-jre-headless (TorchServe's front end) and libb64-0d (perf_analyzer's)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends openjdk-21-jre-headless libb64-0d >/dev/null
fi
venv="$build_dir/peers-venv"
requirements=bench/peers/requirements.txt
if ! cmp -s "$requirements" "$venv/.infergate-requirements"; then
  rm -rf "$venv"
  # --system-site-packages: the peers run the model on Debian's torch 2.6.
  python3 -m venv --system-site-packages "$venv"
  "$venv/bin/pip" install --quiet --progress-bar off -r "$requirements"
  cp "$requirements" "$venv/.infergate-requirements"
fi
exec "$venv/bin/python3" bench/peers.py --build-dir "$build_dir" --venv "$venv" "$@"
