#!/usr/bin/env bash
# Where a request's CPU goes in the server, REST against gRPC, on a small
# model: a two-layer net (128 -> 64 -> 5, ReLU; batching on as for the demo
# mlp), one row per request. For each protocol, h2load drives the server
# (REST: the Open Inference JSON body on CLIENTS HTTP/1.1 connections, one
# request in flight on each; gRPC: ModelInfer with the row as raw bytes on
# CLIENTS streams of one connection) while `perf record -F 999 -g` samples
# the server; bench/perf_categories.py groups each profile. Prints, per
# protocol, requests per second, the server's CPU per request (user +
# system time of its process over the run, from /proc) and the groups.
#
#   bench/rest_profile.sh                 (PROFILE_SECONDS per protocol, default 10;
#                                          PROFILE_CLIENTS, default 64)
#   BENCH_SKIP_BUILD=1 bench/rest_profile.sh   uses build/ as it is
#   PROFILE_KEEP=DIR bench/rest_profile.sh     keeps the profiles (DIR/rest.perf.data, grpc.perf.data)
#   PROFILE_PROTOCOLS="grpc v1" PROFILE_MODEL=mlp bench/rest_profile.sh
#                                          which protocols (rest, grpc: Open Inference ModelInfer, v1:
#                                          infergate.v1 Infer; default "rest grpc") on which model (default
#                                          small; rest only on small, whose JSON body it writes)
#
# perf (Debian's linux-perf) is installed into the Debian 13 root here, when
# the profile runs; neither the README's commands nor the tests install it.
# The model is make-demo-models' small bench model (--with-bench-models).
set -euo pipefail
cd "$(dirname "$0")/.."
. deploy/platform.sh
infergate_builds_natively || exec ./deploy/debian13-root.sh ./bench/rest_profile.sh "$@"

build_dir="${BUILD_DIR:-build}"
seconds="${PROFILE_SECONDS:-10}"
clients="${PROFILE_CLIENTS:-64}"
if [ "${BENCH_SKIP_BUILD:-0}" != 1 ]; then
  ./deploy/install-deps.sh --test  # h2load
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build_dir" --target infergate infergate-cli make-demo-models
fi
if ! command -v perf >/dev/null; then
  echo "bench/rest_profile.sh: installing linux-perf"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends linux-perf >/dev/null
fi

work=$(mktemp -d)
server_pid=
cleanup() {
  [ -z "$server_pid" ] || { kill -TERM "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; }
  rm -rf "$work"
}
trap cleanup EXIT

"$build_dir/tools/make-demo-models" "$work/models" --with-bench-models >/dev/null

"$build_dir/service/infergate" --address=127.0.0.1:0 --metrics-address= --http-address=127.0.0.1:0 \
  --model-repository="$work/models" >"$work/infergate.out" 2>"$work/infergate.err" &
server_pid=$!
address= http=
for _ in $(seq 400); do
  address=$(sed -n 's/^infergate listening on //p' "$work/infergate.out" | head -n1)
  http=$(sed -n 's/^infergate http on //p' "$work/infergate.out" | head -n1)
  [ -n "$address" ] && [ -n "$http" ] && grep -q serving "$work/infergate.err" && break
  sleep 0.05
done
[ -n "$address" ] && [ -n "$http" ] || { cat "$work/infergate.err" >&2; echo "the server did not start" >&2; exit 1; }

awk 'BEGIN { printf "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,128],\"datatype\":\"FP32\",\"data\":[";
             for (i = 0; i < 128; i++) printf "%s%.4f", (i ? "," : ""), (i % 17) / 17.0; printf "]}]}" }' \
  >"$work/rest.body"
model="${PROFILE_MODEL:-small}"
protocols="${PROFILE_PROTOCOLS:-rest grpc}"
frame_line=$("$build_dir/tools/infergate-cli" --address "$address" frame --rpc v2 --model "$model" --rows 1 \
  --out "$work/grpc.frame")
grpc_path=$(sed -n 's/.* path=\([^ ]*\).*/\1/p' <<<"$frame_line")
frame_line=$("$build_dir/tools/infergate-cli" --address "$address" frame --rpc infer --model "$model" --rows 1 \
  --out "$work/v1.frame")
v1_path=$(sed -n 's/.* path=\([^ ]*\).*/\1/p' <<<"$frame_line")

# server CPU seconds (user + system) from /proc
server_cpu() { awk -v t="$(getconf CLK_TCK)" '{ print ($14 + $15) / t }' "/proc/$server_pid/stat"; }

profile() {  # NAME h2load-args...
  local name=$1 out cpu0 cpu1 rps
  shift
  h2load "$@" -D 2s >/dev/null 2>&1 || true  # warm
  cpu0=$(server_cpu)
  perf record -F 999 -g -p "$server_pid" -o "$work/$name.perf.data" -- sleep "$((seconds + 1))" \
    >/dev/null 2>&1 &
  local perf_pid=$!
  sleep 0.5
  out=$(h2load "$@" -D "${seconds}s" 2>&1)
  cpu1=$(server_cpu)
  wait "$perf_pid" || true
  rps=$(sed -n 's/.*finished in [^,]*, \([0-9.]*\) req\/s.*/\1/p' <<<"$out")
  local answered
  answered=$(sed -n 's/^requests: .* \([0-9]*\) succeeded.*/\1/p' <<<"$out")
  echo "## $name: $rps requests/s, $answered answered, server CPU per request $(awk -v a="$cpu0" -v b="$cpu1" \
    -v n="$answered" 'BEGIN { printf "%.3f ms", n ? (b - a) * 1000 / n : 0 }') (CPU measured over the h2load run)"
  python3 bench/perf_categories.py "$work/$name.perf.data"
  [ -z "${PROFILE_KEEP:-}" ] || cp "$work/$name.perf.data" "$PROFILE_KEEP/$name.perf.data"
  echo
}

echo "model $model, $clients clients, ${seconds} s per protocol, $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ)"
for protocol in $protocols; do
  case "$protocol" in
    rest)
      [ "$model" = small ] || { echo "rest_profile.sh: rest only on the small model" >&2; exit 2; }
      profile rest --h1 -c "$clients" -m 1 -d "$work/rest.body" -H "Content-Type: application/json" \
        "http://$http/v2/models/small/infer"
      ;;
    grpc | v1)
      if [ "$protocol" = grpc ]; then frame=$work/grpc.frame path=$grpc_path; else frame=$work/v1.frame path=$v1_path; fi
      profile "$protocol" -c 1 -m "$clients" -d "$frame" -H "content-type: application/grpc" -H "te: trailers" \
        "http://$address$path"
      ;;
    *) echo "rest_profile.sh: unknown protocol $protocol (rest, grpc, v1)" >&2; exit 2 ;;
  esac
done
