#!/usr/bin/env bash
# Before/after check of a change: two builds of infergate served in turn on
# this machine, interleaved (before, after, after, before per round) so that
# the machine's drift between minutes falls on both sides alike. Each turn
# starts the server on a loopback ephemeral port, measures a few rows with
# infergate-cli bench (closed loop, one row per request) and stops it.
# Prints one line per row and turn, then each row's after/before ratios
# (geometric mean over the turns, and how many pairs the after side won).
#
#   bench/compare.sh BEFORE_BUILD_DIR AFTER_BUILD_DIR
#                 (rows may name the demo models and make-demo-models'
#                  bench models, small and heavy)
#   COMPARE_ROUNDS=3 COMPARE_SECONDS=4 bench/compare.sh ../before/build build
#   COMPARE_ROWS="cnn_pt2:8 mlp_pt2:8" bench/compare.sh ...   (model:concurrency;
#                  the _pt2 models are the demo networks as .pt2 packages)
#   COMPARE_ROWS="h2load-infer:mlp:8 h2load-v2:mlp:64" bench/compare.sh ...
#                 (h2load-RPC:model:streams: one pre-encoded 1-row request of
#                  RPC infer or v2 replayed by h2load on that many streams of
#                  one connection, as bench/run.sh's target rows)
#   COMPARE_ROWS="rest:cnn:8" bench/compare.sh ...
#                 (rest:model:connections: one Open Inference REST request
#                  of 1 row, its data random floats in JSON as Python's json
#                  writes them, replayed by h2load over that many HTTP/1.1
#                  connections; a non-2xx answer fails the run)
#   COMPARE_ROWS="rest-v1:cnn:8 rest-ts:cnn:8" bench/compare.sh ...
#                 (the same row as a KServe V1 request, {"instances": [row]}
#                  to /v1/models/MODEL:predict, and as a TorchServe one, the
#                  row's nested list to /predictions/MODEL)
#
# Both build folders need service/infergate; the client, the demo models and
# the ratios come from AFTER_BUILD_DIR's tools. Build the older tree with
#   git worktree add ../before <rev>  (then build it as usual)
set -euo pipefail
cd "$(dirname "$0")/.."
. deploy/platform.sh
infergate_builds_natively || exec ./deploy/debian13-root.sh ./bench/compare.sh "$@"

[ $# -eq 2 ] || { echo "usage: bench/compare.sh BEFORE_BUILD_DIR AFTER_BUILD_DIR" >&2; exit 2; }
before_dir=$(cd "$1" && pwd)
after_dir=$(cd "$2" && pwd)
rounds="${COMPARE_ROUNDS:-3}"
seconds="${COMPARE_SECONDS:-4}"
rows="${COMPARE_ROWS:-mlp:1 mlp:8 mlp:64 cnn:8}"  # model:concurrency
for d in "$before_dir" "$after_dir"; do
  [ -x "$d/service/infergate" ] || { echo "$d/service/infergate is not built" >&2; exit 2; }
done

work=$(mktemp -d)
server=""
trap '[ -z "$server" ] || kill "$server" 2>/dev/null; rm -rf "$work"' EXIT
"$after_dir/tools/make-demo-models" "$work/models" --with-bench-models >/dev/null
# Rows may name the demo networks as AOTInductor packages (mlp_pt2, cnn_pt2).
if [[ " $rows" =~ _pt2: ]]; then bench/pt2_demo_models.sh "$work/models"; fi
cli="$after_dir/tools/infergate-cli"

# REST rows need the server's HTTP port.
http_flag=""
if [[ " $rows" =~ \ rest(-v1|-ts)?: ]]; then http_flag="127.0.0.1:0"; fi

# A REST request for model $2 (1 row of its first input, random floats as
# Python's json module writes them) from the server at $1, into file $3, in
# the form $4 (rest: Open Inference, rest-v1: KServe V1, rest-ts:
# TorchServe); checked to be answered 200. Prints the path to post it to.
rest_body() {
  python3 - "$@" <<'PY'
import json, random, sys, urllib.request
http, model, out, kind = sys.argv[1:]
meta = json.load(urllib.request.urlopen("http://%s/v2/models/%s" % (http, model), timeout=30))
x = meta["inputs"][0]
shape = [1 if d < 0 else d for d in x["shape"]]
count = 1
for d in shape:
    count *= d
rng = random.Random(1)
data = [rng.uniform(-1, 1) for _ in range(count)]
def nested(values, dims):
    if len(dims) <= 1:
        return values
    step = len(values) // dims[0]
    return [nested(values[i * step:(i + 1) * step], dims[1:]) for i in range(dims[0])]
if kind == "rest":
    path = "/v2/models/%s/infer" % model
    body = {"inputs": [{"name": x["name"], "shape": shape, "datatype": x["datatype"], "data": data}]}
elif kind == "rest-v1":
    path = "/v1/models/%s:predict" % model
    body = {"instances": [nested(data, shape[1:])]}
else:
    path = "/predictions/%s" % model
    body = nested(data, shape[1:])
body = json.dumps(body).encode()
request = urllib.request.Request("http://%s%s" % (http, path), data=body, headers={"Content-Type": "application/json"})
assert urllib.request.urlopen(request, timeout=30).status == 200
open(out, "wb").write(body)
print(path)
PY
}

# Starts the server of build folder $2 and measures every row, as turn $1.
turn() {
  local side=$1 build=$2 round=$3 address="" http="" spec model concurrency rate
  "$build/service/infergate" --address=127.0.0.1:0 --metrics-address= --http-address="$http_flag" \
    --model-repository="$work/models" >"$work/out" 2>"$work/err" &
  server=$!
  for _ in $(seq 300); do
    address=$(sed -n 's/^infergate listening on //p' "$work/out" | head -1)
    http=$(sed -n 's/^infergate http on //p' "$work/out" | head -1)
    [ -n "$address" ] && { [ -z "$http_flag" ] || [ -n "$http" ]; } && grep -q serving "$work/err" && break
    kill -0 "$server" 2>/dev/null || { cat "$work/err" >&2; exit 1; }
    sleep 0.1
  done
  [ -n "$address" ] || { echo "the $side server did not start" >&2; exit 1; }
  for spec in $rows; do
    concurrency=${spec##*:}
    case "$spec" in
      h2load-*)
        local rpc=${spec%%:*} frame_line path
        rpc=${rpc#h2load-} model=${spec#*:} model=${model%%:*}
        # The server checks it answers these exact bytes OK (h2load cannot
        # read grpc-status).
        frame_line=$("$cli" --address "$address" frame --rpc "$rpc" --model "$model" --rows 1 --out "$work/frame")
        path=$(sed -n 's/.*path=\([^ ]*\).*/\1/p' <<<"$frame_line")
        rate=$(h2load -c 1 -m "$concurrency" -D "${seconds}s" --warm-up-time=1s -d "$work/frame" \
          -H "content-type: application/grpc" -H "te: trailers" "http://$address$path" 2>&1 |
          sed -n 's/.*finished in [^,]*, \([0-9.]*\) req\/s.*/\1/p')
        model="h2load_${rpc}_$model"
        ;;
      rest:* | rest-v1:* | rest-ts:*)
        local kind=${spec%%:*} out path
        model=${spec#*:} model=${model%%:*}
        [ -s "$work/${kind}_$model.path" ] ||
          rest_body "$http" "$model" "$work/${kind}_$model.json" "$kind" >"$work/${kind}_$model.path"
        path=$(cat "$work/${kind}_$model.path")
        out=$(h2load --h1 -c "$concurrency" -m 1 -D "${seconds}s" --warm-up-time=1s -d "$work/${kind}_$model.json" \
          -H "Content-Type: application/json" "http://$http$path" 2>&1)
        grep -q "status codes: [1-9][0-9]* 2xx, 0 3xx, 0 4xx, 0 5xx" <<<"$out" &&
          grep -q " 0 failed, 0 errored, 0 timeout" <<<"$out" ||
          { echo "the $side server did not answer every REST request with 2xx:" >&2; echo "$out" >&2; exit 1; }
        rate=$(sed -n 's/.*finished in [^,]*, \([0-9.]*\) req\/s.*/\1/p' <<<"$out")
        model="${kind//-/_}_$model"
        ;;
      *)
        model=${spec%%:*}
        rate=$("$cli" --address "$address" bench --model "$model" --rows 1 --concurrency "$concurrency" \
          --duration "$seconds" --warmup 1 | grep -o 'req/s=[0-9.]*' | cut -d= -f2)
        ;;
    esac
    echo "round=$round side=$side model=$model concurrency=$concurrency req_per_s=$rate" | tee -a "$work/lines"
  done
  kill -TERM "$server"
  wait "$server" 2>/dev/null || true
  server=""
}

for round in $(seq "$rounds"); do
  turn before "$before_dir" "$round"
  turn after "$after_dir" "$round"
  turn after "$after_dir" "$round"
  turn before "$before_dir" "$round"
done

python3 - "$work/lines" <<'PY'
import collections, math, re, sys
rates = collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(sys.argv[1]):
    m = re.match(r"round=\d+ side=(\w+) model=(\w+) concurrency=(\d+) req_per_s=([\d.]+)", line)
    if m:
        rates[(m[2], int(m[3]))][m[1]].append(float(m[4]))
every = []
print("| row | before req/s (mean) | after req/s (mean) | after/before (geomean) | after won |")
print("|---|---|---|---|---|")
for (model, concurrency), side in sorted(rates.items()):
    pairs = [a / b for a, b in zip(side["after"], side["before"])]
    every += pairs
    geomean = math.exp(sum(map(math.log, pairs)) / len(pairs))
    print(f"| {model} c{concurrency} | {sum(side['before']) / len(side['before']):.0f} | "
          f"{sum(side['after']) / len(side['after']):.0f} | {geomean:.3f} | {sum(p > 1 for p in pairs)}/{len(pairs)} |")
print(f"| all | | | {math.exp(sum(map(math.log, every)) / len(every)):.3f} | {sum(p > 1 for p in every)}/{len(every)} |")
PY
