#!/usr/bin/env bash
# infergate benchmark: the gRPC floor (health Check), the in-process floor
# (LibTorch running the same model.pt directly) and infergate itself, all on
# this machine in one run. Writes bench/results/<stamp>.md and .csv.
#
#   bench/run.sh              full run (about 3 minutes of measuring)
#   BENCH_SECONDS=1 BENCH_SMOKE=1 bench/run.sh   a quick smoke run (used by the tests)
#   BENCH_KEEP_WORK=1 bench/run.sh   keeps the work folder (servers' logs, frames, models)
#
# The rows whose ratios are targets (h2load's floor, Infer, ModelInfer and
# the hand-off ceiling; the load tool's v1, v2 and stream rows) run in
# BENCH_ROUNDS alternating rounds (default 3, 1 in a smoke run) and each
# keeps its median round: on a shared machine one row at a time moves by
# 10-20% between minutes, more than some targets' margins.
set -euo pipefail
cd "$(dirname "$0")/.."
# Built and run where the build lives: in the Debian 13 root on other hosts.
. deploy/platform.sh
infergate_builds_natively || exec ./deploy/debian13-root.sh ./bench/run.sh "$@"

seconds="${BENCH_SECONDS:-5}"
warmup="${BENCH_WARMUP:-1}"
smoke="${BENCH_SMOKE:-0}"
rounds="${BENCH_ROUNDS:-$([ "$smoke" = 1 ] && echo 1 || echo 3)}"
build_dir="${BUILD_DIR:-build}"
out_dir="${BENCH_OUT:-bench/results}"

if [ "${BENCH_SKIP_BUILD:-0}" != 1 ]; then
  ./deploy/install-deps.sh --test  # h2load, curl, Pillow for the image rows
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build_dir" --target infergate infergate-cli make-demo-models inprocess-bench handoff-ceiling otlp-sink
fi
bin="$build_dir/service/infergate"
cli="$build_dir/tools/infergate-cli"

work=$(mktemp -d)
server_pid=""
ceiling_pid=""
extra_pids=""
cleanup() {
  local pid
  for pid in $server_pid $ceiling_pid $extra_pids; do kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  if [ -n "${BENCH_KEEP_WORK:-}" ]; then echo "bench work folder kept: $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
: >"$work/batch_mixes"  # rows' batch sizes, for the sound bound (record)
: >"$work/inprocess.lines"
"$build_dir/tools/make-demo-models" "$work/models" >/dev/null
# The mlp and the cnn again as AOTInductor packages (.pt2), for the format
# and in-process rows.
bench/pt2_demo_models.sh "$work/models"

mkdir -p "$out_dir"
stamp=$(date -u +%Y%m%dT%H%M%SZ)
csv="$out_dir/$stamp.csv"
md="$out_dir/$stamp.md"
echo "suite,model,mode,concurrency,batch,throughput_rps,rows_per_s,p50_ms,p99_ms,server_overhead_p50_us,mean_batch,errors,p999_ms" >"$csv"

# Waits for the program started as $server_pid to print "NAME listening on
# ADDRESS" on $work/NAME.out (and, if given, READY on its log, by default
# $work/NAME.err); sets $address.
await_listening() {  # name [ready [log]]
  local log="${3:-$work/$1.err}"
  for _ in $(seq 200); do
    # The server's shell may not have opened its output file yet.
    address=$( { sed -n "s/^$1 listening on //p" "$work/$1.out" 2>/dev/null || true; } | head -n1)
    [ -n "$address" ] && { [ -z "${2:-}" ] || grep -q "$2" "$log"; } && return 0
    sleep 0.05
  done
  echo "$1 did not start" >&2; cat "$log" >&2; exit 1
}
# Each server logs to its own $work/infergate-N.err, first line its flags:
# server_answers reads what each says it answered when it stopped.
servers_started=0
start_server() {  # $@: extra flags
  servers_started=$((servers_started + 1))
  local log="$work/infergate-$servers_started.err"
  echo "flags: $*" >"$log"
  "$bin" --address=127.0.0.1:0 --metrics-address= --http-address=127.0.0.1:0 --model-repository="$work/models" "$@" \
    >"$work/infergate.out" 2>>"$log" &
  server_pid=$!
  await_listening infergate serving "$log"
}
stop_server() { kill -TERM "$server_pid"; wait "$server_pid" || true; server_pid=""; }

field() { sed -n "s|.* $1=\([^ ]*\).*|\1|p" <<<"$2"; }

# p50, p99 and p99.9 in ms of an h2load --log-file (each request's
# microseconds in its third column), in the load tool's key=value form.
# h2load appends to a log that exists: the callers remove it first (until
# 20261127T140201Z they did not, and every h2load row's percentiles after
# the first were those of all the rows before it too).
h2load_percentiles() {  # log
  sort -t$'\t' -k3,3n "$1" | awk -F'\t' '{ v[NR] = $3 }
    END { if (NR > 0) printf "p50_ms=%.3f p99_ms=%.3f p999_ms=%.3f", v[int(0.5 * (NR - 1)) + 1] / 1000,
                             v[int(0.99 * (NR - 1)) + 1] / 1000, v[int(0.999 * (NR - 1)) + 1] / 1000 }'
}

# The requests an h2load run (its output, $1) closed without a 2xx or 3xx
# answer: refused, reset or timed out. Not "total - 2xx": h2load counts a
# status code when the headers arrive and a request when its stream
# closes, so an answer whose headers come before the warm-up's end and
# whose end comes after lands in one count and not the other.
h2load_errors() {  # h2load-output
  local failed
  failed=$(sed -n 's/^requests: .* \([0-9][0-9]*\) failed.*/\1/p' <<<"$1")
  echo "${failed:-unknown}"
}

# One REST row with h2load: mlp, one row of 256 floats, as JSON or binary.
# Prints a line in the load tool's key=value form (errors are answers other
# than 2xx; percentiles from h2load's per-request log).
rest_load() {  # json|binary concurrency
  local body="$work/rest-$1.body" headers=()
  if [ ! -f "$body" ]; then
    if [ "$1" = json ]; then
      awk 'BEGIN { printf "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,256],\"datatype\":\"FP32\",\"data\":[";
                   for (i = 0; i < 256; i++) printf "%s%.4f", (i ? "," : ""), (i % 17) / 17.0; printf "]}]}" }' >"$body"
    else
      printf '%s' '{"inputs":[{"name":"x","shape":[1,256],"datatype":"FP32","parameters":{"binary_data_size":1024}}],"outputs":[{"name":"logits","parameters":{"binary_data":true}}]}' >"$body.head"
      head -c 1024 /dev/zero | cat "$body.head" - >"$body"
    fi
  fi
  [ "$1" = binary ] && headers=(-H "Inference-Header-Content-Length: $(stat -c %s "$body.head")")
  local http_address out
  http_address=$(sed -n 's/^infergate http on //p' "$work/infergate.out" | head -n1)
  local ms=(-D "$(awk -v s="$seconds" 'BEGIN { printf "%dms", s * 1000 }')"
            --warm-up-time="$(awk -v s="$warmup" 'BEGIN { printf "%dms", s * 1000 }')")
  rm -f "$work/h2load.log"  # h2load appends to its log
  out=$(h2load --h1 -c "$2" -m 1 "${ms[@]}" -d "$body" "${headers[@]}" --log-file="$work/h2load.log" \
    -H "Content-Type: application/json" "http://$http_address/v2/models/mlp/infer" 2>&1)
  local rps
  rps=$(sed -n 's/.*finished in [^,]*, \([0-9.]*\) req\/s.*/\1/p' <<<"$out")
  echo "rest $1 c=$2 req/s=${rps:-0} rows/s=${rps:-0} $(h2load_percentiles "$work/h2load.log") errors=$(h2load_errors "$out")"
}

# One gRPC row with h2load: a pre-encoded request (written by `infergate-cli
# frame`, which first checks that the server answers those exact bytes OK,
# since h2load cannot read grpc-status) replayed on N concurrent streams of
# one connection. h2load costs the machine far less per call than the load
# tool, so the ratio to the floor is the server's, not the client's.
grpc_load() {  # frame-file method-path streams [address]
  local ms=(-D "$(awk -v s="$seconds" 'BEGIN { printf "%dms", s * 1000 }')"
            --warm-up-time="$(awk -v s="$warmup" 'BEGIN { printf "%dms", s * 1000 }')")
  local out rps
  rm -f "$work/h2load.log"  # h2load appends to its log: each row's percentiles are its own
  out=$(h2load -c 1 -m "$3" "${ms[@]}" -d "$1" -H "content-type: application/grpc" -H "te: trailers" \
    --log-file="$work/h2load.log" "http://${4:-$address}$2" 2>&1)
  rps=$(sed -n 's/.*finished in [^,]*, \([0-9.]*\) req\/s.*/\1/p' <<<"$out")
  echo "h2load c=$3 req/s=${rps:-0} rows/s=${rps:-0} $(h2load_percentiles "$work/h2load.log") errors=$(h2load_errors "$out")"
}

# The line (of several, on stdin) with the median req/s; the lower middle
# one of an even count.
median_of() {
  local by_rps
  by_rps=$(awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^req\/s=/) { split($i, kv, "="); print kv[2] + 0 "\t" $0 } }' | sort -g -s -k1,1)
  sed -n "$((($(wc -l <<<"$by_rps") + 1) / 2))p" <<<"$by_rps" | cut -f2-
}

# Runs each "suite model mode concurrency command..." spec once per round,
# alternating them, and records each spec's median round.
record_rounds() {  # spec...
  local -A lines=()
  local spec round words
  local specs=("$@") i
  for ((round = 1; round <= rounds; round++)); do
    # Each round starts one spec later, so no row always runs right after
    # the same neighbour (a machine that slows down after a heavy row would
    # otherwise charge it to the next one every time).
    for ((i = 0; i < ${#specs[@]}; i++)); do
      spec=${specs[$(((i + round - 1) % ${#specs[@]}))]}
      read -r -a words <<<"$spec"
      lines[$spec]+=$("${words[@]:4}")$'\n'
    done
  done
  for spec in "$@"; do
    read -r -a words <<<"$spec"
    [ "$rounds" -gt 1 ] && sed '/^$/d; s/^/  round: /' <<<"${lines[$spec]}" >&2
    record "${words[0]}" "${words[1]}" "${words[2]}" "${words[3]}" 1 "$(sed '/^$/d' <<<"${lines[$spec]}" | median_of)"
  done
}

# suite model mode concurrency batch line
record() {
  local line="$6"
  echo "  $line" >&2
  # The line's key=value words as field reads them (after the first word;
  # the last of a key wins), split once here rather than by nine field
  # calls, each a subshell and a sed.
  local -A kv=()
  local words word
  read -ra words <<<"$line"
  for word in "${words[@]:1}"; do [[ "$word" =~ ^[^=]+= ]] && kv[${word%%=*}]=${word#*=}; done
  # The requests per batch size it ran in, where the line says (for the
  # sound bound): "suite,model,mode,concurrency,1:n,2:n,...".
  [ -n "${kv[batches]:-}" ] && echo "$1,$2,$3,$4,${kv[batches]}" >>"$work/batch_mixes"
  printf '%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n' "$1" "$2" "$3" "$4" "$5" \
    "${kv[req/s]:-}" "${kv[rows/s]:-}" "${kv[p50_ms]:-}" "${kv[p99_ms]:-}" \
    "${kv[server_overhead_p50_us]:-}" "${kv[mean_batch]:-}" "${kv[errors]:-}" "${kv[p999_ms]:-}" >>"$csv"
}

concurrencies="1 8 64"
echo "== gRPC floor (health Check)" >&2
start_server
for c in $concurrencies; do
  record grpc-floor health - "$c" - "$("$cli" --address "$address" bench --rpc health --concurrency "$c" --duration "$seconds" --warmup "$warmup")"
done
stop_server

# The same floor and the 1-row mlp Infer (infergate.v1 and Open Inference
# ModelInfer) driven by h2load: the rows the throughput targets are read
# from. Beside them, the same Infer frame answered by the hand-off ceiling:
# gRPC's callback server handing each call to a worker thread that answers
# it, no model and no serving work; what it leaves of the floor bounds what
# infergate can. Both servers run at once (an idle one costs nothing) so
# the rounds alternate between them.
echo "== h2load: gRPC floor, 1-row mlp, and the hand-off ceiling (no model)" >&2
start_server
infergate_address=$address
"$build_dir/tools/handoff-ceiling" --address=127.0.0.1:0 >"$work/handoff-ceiling.out" 2>"$work/handoff-ceiling.err" &
ceiling_pid=$!
await_listening handoff-ceiling
ceiling_address=$address
# The same hand-off on gRPC's completion-queue API (one poller per core).
mv "$work/handoff-ceiling.out" "$work/handoff-ceiling-callback.out"
"$build_dir/tools/handoff-ceiling" --address=127.0.0.1:0 --api=cq --pollers="$(nproc)" \
  >"$work/handoff-ceiling.out" 2>"$work/handoff-ceiling-cq.err" &
extra_pids="$extra_pids $!"
cq_ceiling_pid=$!
await_listening handoff-ceiling "" "$work/handoff-ceiling-cq.err"
cq_ceiling_address=$address
# The model ceilings: the completion-queue hand-off whose workers also run
# the model once per batch of the calls queued (as many as the model's
# max_batch_size), on generated rows; no serving work. What a server with
# nothing but gRPC, the hand-off and the forward pass reaches, the forward
# sharing the cores and their caches with the network work.
declare -A model_ceiling_address=()
for spec in "mlp 256 64" "cnn 3x64x64 32"; do
  set -- $spec
  mv "$work/handoff-ceiling.out" "$work/handoff-ceiling-previous.out"
  "$build_dir/tools/handoff-ceiling" --address=127.0.0.1:0 --api=cq --pollers="$(nproc)" \
    --model="$work/models/$1/1/model.pt" --row-shape="$2" --max-batch="$3" \
    >"$work/handoff-ceiling.out" 2>"$work/model-ceiling-$1.err" &
  extra_pids="$extra_pids $!"
  model_ceiling_pids="${model_ceiling_pids:-} $!"
  await_listening handoff-ceiling "" "$work/model-ceiling-$1.err"
  model_ceiling_address[$1]=$address
done
address=$infergate_address
for rpc in health infer v2; do
  line=$("$cli" --address "$address" frame --rpc "$rpc" --model mlp --rows 1 --out "$work/$rpc.frame")
  echo "$(field path "$line")" >"$work/$rpc.path"
done
# A 1-image cnn Infer (49 KB): its ceiling row is the cnn's sound bound's,
# since moving that payload costs far more than the mlp frame's 1 KB.
line=$("$cli" --address "$address" frame --rpc infer --model cnn --rows 1 --out "$work/cnn-infer.frame")
echo "$(field path "$line")" >"$work/cnn-infer.path"
# Requests the server answered per batch size for model $2 so far
# ("1:n,2:n,..."), from its statistics (batches of b one-row requests).
batch_mix() {  # http-address model
  curl -sf "http://$1/v2/models/$2/stats" | python3 -c '
import json, sys
counts = {}
for m in json.load(sys.stdin)["model_stats"]:
    for b in m.get("batch_stats", []):
        size = int(b["batch_size"])
        counts[size] = counts.get(size, 0) + int(b["compute_infer"]["count"]) * size
print(",".join("%d:%d" % kv for kv in sorted(counts.items())))'
}
# The requests per batch size between two batch_mix readings.
mix_since() {  # before after
  python3 -c '
import sys
parse = lambda s: {int(k): int(v) for k, v in (i.split(":") for i in s.split(",") if i)}
a, b = parse(sys.argv[1]), parse(sys.argv[2])
print(",".join("%d:%d" % (k, b[k] - a.get(k, 0)) for k in sorted(b) if b[k] > a.get(k, 0)))' "$1" "$2"
}
infergate_http=$(sed -n 's/^infergate http on //p' "$work/infergate.out" | head -n1)
h2load_row() {  # frame streams model [address]
  local before="" line
  # infergate's own model rows also say which batches formed.
  [ -z "${4:-}" ] && [ "$1" != health ] && before=$(batch_mix "$infergate_http" "$3")
  line=$(grpc_load "$work/$1.frame" "$(cat "$work/$1.path")" "$2" "${4:-$address}")
  [ -n "$before" ] && line="$line batches=$(mix_since "$before" "$(batch_mix "$infergate_http" "$3")")"
  echo "$line"
}
for c in $concurrencies; do
  record_rounds "h2load health health $c h2load_row health $c -" "h2load mlp v1-infer $c h2load_row infer $c mlp" \
    "h2load mlp v2 $c h2load_row v2 $c mlp" "h2load none handoff-ceiling $c h2load_row infer $c mlp $ceiling_address" \
    "h2load none handoff-ceiling-cq $c h2load_row infer $c mlp $cq_ceiling_address" \
    "h2load none model-ceiling $c h2load_row infer $c mlp ${model_ceiling_address[mlp]}"
done
record_rounds "h2load cnn v1-infer 8 h2load_row cnn-infer 8 cnn" \
  "h2load none handoff-ceiling-cnn 8 h2load_row cnn-infer 8 cnn $ceiling_address" \
  "h2load none handoff-ceiling-cq-cnn 8 h2load_row cnn-infer 8 cnn $cq_ceiling_address" \
  "h2load none model-ceiling-cnn 8 h2load_row cnn-infer 8 cnn ${model_ceiling_address[cnn]}"
kill -TERM "$ceiling_pid" "$cq_ceiling_pid" $model_ceiling_pids
wait "$ceiling_pid" || true; wait "$cq_ceiling_pid" || true
for pid in $model_ceiling_pids; do wait "$pid" || true; done
ceiling_pid=""
extra_pids=""
stop_server

# Tracing's cost: three servers at once, alternating rounds, on the 1-row
# mlp Infer frame (no traceparent: the sampler decides): tracing off, on
# sampling 1% of calls, and on sampling every call, exporting over OTLP/gRPC
# to a collector that keeps up (otlp-sink, counting what it receives).
echo "== tracing: off, 1%, 100% (1-row mlp, h2load)" >&2
"$build_dir/tests/otlp-sink" >"$work/otlp-sink.out" 2>"$work/otlp-sink.err" &
extra_pids="$!"
await_listening otlp-sink
sink_address=$address
declare -A tracing_address=()
for sampled in off 1 100; do
  if [ "$sampled" = off ]; then
    start_server
  else
    start_server --otlp-endpoint="http://$sink_address" --trace-sampler=traceidratio \
      --trace-sampler-arg="$(awk -v p="$sampled" 'BEGIN { printf "%g", p / 100 }')"
  fi
  tracing_address[$sampled]=$address
  extra_pids="$extra_pids $server_pid"
  server_pid=""
done
for c in 8 64; do
  record_rounds "tracing mlp off $c h2load_row infer $c mlp ${tracing_address[off]}" \
    "tracing mlp sampled-1pct $c h2load_row infer $c mlp ${tracing_address[1]}" \
    "tracing mlp sampled-100pct $c h2load_row infer $c mlp ${tracing_address[100]}"
done
for pid in $extra_pids; do kill -TERM "$pid"; wait "$pid" || true; done
extra_pids=""
echo "  $(tail -n1 "$work/otlp-sink.out")" >&2

echo "== in-process floor" >&2
# Two ways to use the machine's cores: one caller with every core as intra-op
# threads, or one caller per core with one thread each (what the server's
# workers do). The floor is the better of the two, at batch 1 and at the best
# batch size.
batches="1,2,4,8,16,32,64"
[ "$smoke" = 1 ] && batches="1,8"
cores=$(nproc)
configs="1x$cores"
[ "$cores" -gt 1 ] && configs="$configs ${cores}x1"
best_of() {  # lines on stdin; prints the one with the highest rows/s
  awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^rows\/s=/) { split($i, kv, "="); if (kv[2] + 0 > best) { best = kv[2] + 0; line = $0 } } }
       END { print line }'
}
# model file shape dtype largest-batch: a package runs batches up to the
# maximum it was exported with.
for spec in "mlp model.pt 256 float32 64" "cnn model.pt 3x64x64 float32 64" \
            "mlp_pt2 model.pt2 256 float32 64" "cnn_pt2 model.pt2 3x64x64 float32 32"; do
  set -- $spec
  spec_batches=$(tr , '\n' <<<"$batches" | awk -v max="$5" '$1 <= max' | paste -sd, -)
  # TorchScript on the CPU in FP32 is served optimized (the server's log
  # says so for the demo models): the floor is measured the same way.
  optimize=$([ "$2" = model.pt ] && echo --optimize || true)
  all=""
  for cfg in $configs; do
    all+=$("$build_dir/tools/inprocess-bench" "$work/models/$1/1/$2" "$3" --dtype "$4" --seconds "$seconds" \
      --batches "$spec_batches" --callers "${cfg%x*}" --threads "${cfg#*x}" $optimize | grep '^inprocess batch=')$'\n'
  done
  echo "$all" | sed '/^$/d; s/^/  /' >&2
  sed "/^\$/d; s/^/$1 /" <<<"$all" >>"$work/inprocess.lines"
  b1=$(grep '^inprocess batch=1 ' <<<"$all" | best_of)
  best_line=$(sed '/^$/d' <<<"$all" | best_of)
  for kind in batch1 best-batch; do
    line=$([ "$kind" = batch1 ] && echo "$b1" || echo "$best_line")
    b=$(field batch "$line")
    rows=$(field 'rows/s' "$line")
    calls_per_s=$(awk -v r="$rows" -v b="$b" 'BEGIN { printf "%.1f", r / b }')
    mode="$kind $(field callers "$line")x$(field threads "$line")"
    printf 'inprocess,%s,%s,%s,%s,%s,%s,%s,%s,,,0,\n' "$1" "$mode" "$(field callers "$line")" "$b" \
      "$calls_per_s" "$rows" "$(field p50_ms "$line")" "$(field p99_ms "$line")" >>"$csv"
  done
done

for batching in on off; do
  echo "== infergate, batching $batching" >&2
  start_server --batching=$([ $batching = on ] && echo true || echo false)
  for c in $concurrencies; do
    record infergate mlp "batching-$batching" "$c" 1 \
      "$("$cli" --address "$address" bench --model mlp --rows 1 --concurrency "$c" --duration "$seconds" --warmup "$warmup")"
    record infergate cnn "batching-$batching" "$c" 1 \
      "$("$cli" --address "$address" bench --model cnn --rows 1 --concurrency "$c" --duration "$seconds" --warmup "$warmup")"
  done
  stop_server
done

# The Open Inference Protocol on the same server and model, next to
# infergate.v1: unary ModelInfer and ModelStreamInfer (one stream, N in flight).
echo "== Open Inference Protocol (v2)" >&2
start_server
tool_row() {  # rpc concurrency
  "$cli" --address "$address" bench --model mlp --rpc "$1" --rows 1 --concurrency "$2" --duration "$seconds" --warmup "$warmup"
}
for c in $concurrencies; do
  record_rounds "protocols mlp v1-infer $c tool_row infer $c" "protocols mlp v2 $c tool_row v2 $c" \
    "protocols mlp v2-stream $c tool_row v2-stream $c"
  # The REST form on the same server, driven by h2load over HTTP/1.1 (one
  # keep-alive connection per client, one request at a time each): a JSON
  # body and a binary (tensor data extension) body of the same row.
  for body in json binary; do
    record protocols mlp "v2-rest-$body" "$c" 1 "$(rest_load "$body" "$c")"
  done
done
stop_server

# The same networks as TorchScript (model.pt) and as AOTInductor packages
# (model.pt2), one row per call through infergate.v1 on the CPU.
echo "== format: mlp and cnn as TorchScript and as .pt2" >&2
start_server
for c in $concurrencies; do
  for network in mlp cnn; do
    for format in torchscript aoti; do
      model=$network
      [ "$format" = aoti ] && model=${network}_pt2
      record format "$network" "$format" "$c" 1 \
        "$("$cli" --address "$address" bench --model "$model" --device cpu --rows 1 --concurrency "$c" \
          --duration "$seconds" --warmup "$warmup")"
    done
  done
done
stop_server

# KServe's pytorch format: TorchServe's image_classifier handler on a
# 640x480 JPEG posted to /predictions (h2load over HTTP/1.1, one request at
# a time per connection), with the server's own measures of what each image
# costs: decoding and preprocessing (infergate_handler_input_duration_seconds)
# next to the forward pass (infergate_compute_duration_seconds, per batch).
echo "== TorchServe image_classifier: decode + preprocess vs forward" >&2
python3 tools/make_torchserve_store.py "$work/torchserve" "$work/photo.jpg" >/dev/null 2>"$work/torchserve.log" ||
  { cat "$work/torchserve.log" >&2; exit 1; }
start_server --model-repository="$work/torchserve" --metrics-address=127.0.0.1:0
ts_http=$(sed -n 's/^infergate http on //p' "$work/infergate.out" | head -n1)
ts_metrics=$(sed -n 's/^infergate metrics on //p' "$work/infergate.out" | head -n1)
# Sum and count of a histogram series, from one scrape: "sum count"
# (labels in the exposition's order, which is alphabetical).
series_totals() {  # scrape-file metric labels
  awk -v m="$2" -v l="$3" '$1 == m "_sum{" l "}" { s = $2 } $1 == m "_count{" l "}" { c = $2 } END { print s + 0, c + 0 }' "$1"
}
curl -sf "http://$ts_http/predictions/clf" --data-binary @"$work/photo.jpg" >/dev/null
image_summary="image_classifier (640x480 JPEG, /predictions/clf):"
for c in $concurrencies; do
  curl -sf "http://$ts_metrics/metrics" >"$work/before.prom"
  line=$(h2load --h1 -c "$c" -m 1 -D "$(awk -v s="$seconds" 'BEGIN { printf "%dms", s * 1000 }')" \
    --warm-up-time="$(awk -v s="$warmup" 'BEGIN { printf "%dms", s * 1000 }')" -d "$work/photo.jpg" \
    -H "Content-Type: application/octet-stream" "http://$ts_http/predictions/clf" 2>&1)
  curl -sf "http://$ts_metrics/metrics" >"$work/after.prom"
  rps=$(sed -n 's/.*finished in [^,]*, \([0-9.]*\) req\/s.*/\1/p' <<<"$line")
  read -r in_s0 in_n0 <<<"$(series_totals "$work/before.prom" infergate_handler_input_duration_seconds 'model="clf"')"
  read -r in_s1 in_n1 <<<"$(series_totals "$work/after.prom" infergate_handler_input_duration_seconds 'model="clf"')"
  read -r fw_s0 fw_n0 <<<"$(series_totals "$work/before.prom" infergate_compute_duration_seconds 'device="cpu",model="clf"')"
  read -r fw_s1 fw_n1 <<<"$(series_totals "$work/after.prom" infergate_compute_duration_seconds 'device="cpu",model="clf"')"
  read -r b_s0 b_n0 <<<"$(series_totals "$work/before.prom" infergate_batch_size 'device="cpu",model="clf"')"
  read -r b_s1 b_n1 <<<"$(series_totals "$work/after.prom" infergate_batch_size 'device="cpu",model="clf"')"
  read -r pre_ms fw_ms batch <<<"$(awk -v a="$in_s0" -v b="$in_s1" -v n="$in_n0" -v m="$in_n1" -v fa="$fw_s0" \
    -v fb="$fw_s1" -v fn="$fw_n0" -v fm="$fw_n1" -v ba="$b_s0" -v bb="$b_s1" -v bn="$b_n0" -v bm="$b_n1" 'BEGIN {
      printf "%.3f %.3f %.2f", (m > n ? (b - a) / (m - n) * 1000 : 0), (fm > fn ? (fb - fa) / (fm - fn) * 1000 : 0),
        (bm > bn ? (bb - ba) / (bm - bn) : 0) }')"
  record torchserve clf image_classifier "$c" 1 \
    "torchserve c=$c req/s=${rps:-0} rows/s=${rps:-0} mean_batch=$batch errors=$(h2load_errors "$line")"
  per_image=$(awk -v f="$fw_ms" -v b="$batch" 'BEGIN { printf "%.3f", (b > 0 ? f / b : 0) }')
  image_summary+=" concurrency $c: ${rps:-0} req/s, decode+preprocess $pre_ms ms per image, forward $fw_ms ms per batch of $batch ($per_image ms per image);"
done
stop_server
image_summary="${image_summary%;}."
echo "  $image_summary" >&2

# Two models on one device: 48 clients flood the heavy cnn while one client
# calls the light mlp, with fair sharing and with FIFO scheduling (the
# scheduler before fair sharing) on the same server build.
echo "== mixed models: cnn flooded, mlp at concurrency 1" >&2
for scheduling in fair fifo; do
  start_server --fair-queueing=$([ $scheduling = fair ] && echo true || echo false)
  "$cli" --address "$address" bench --model cnn --rows 1 --concurrency 48 --duration "$seconds" --warmup "$warmup" \
    >"$work/heavy.out" &
  heavy_pid=$!
  light=$("$cli" --address "$address" bench --model mlp --rows 1 --concurrency 1 --duration "$seconds" --warmup "$warmup")
  wait "$heavy_pid"
  record mixed cnn "$scheduling-flood" 48 1 "$(cat "$work/heavy.out")"
  record mixed mlp "$scheduling-light" 1 1 "$light"
  stop_server
done
mixed_summary=$(awk -F, '$1 == "mixed" { v[$3 "," $2 "," "p50"] = $8; v[$3 "," $2 "," "rps"] = $6 }
  END {
    printf "Mixed models: light p50 / heavy p50 = %.3f fair (%.3f FIFO); heavy throughput fair / FIFO = %.3f.",
      v["fair-light,mlp,p50"] / v["fair-flood,cnn,p50"], v["fifo-light,mlp,p50"] / v["fifo-flood,cnn,p50"],
      v["fair-flood,cnn,rps"] / v["fifo-flood,cnn,rps"] }' "$csv")
echo "  $mixed_summary" >&2

# The accuracy contract: time from start to serving when warm-up checks each
# warm-up model's reduced precision on every device (simulated mps and
# cuda:0) before serving, against no checks; then the mlp on simulated mps
# (FP16 once its check passed) at concurrency 8, in alternating rounds.
echo "== accuracy checks: start-up and steady state on simulated mps" >&2
for round in $(seq "$rounds"); do
  for checks in on off; do
    started=$(date +%s%N)
    start_server --simulate-devices=mps,cuda:0 --precision-checks=$([ $checks = on ] && echo true || echo false)
    echo "$checks $(( ($(date +%s%N) - started) / 1000000 ))" >>"$work/startup.ms"
    # A request never waits for a check: those before its verdict run in FP32.
    "$cli" --address "$address" infer --model mlp --device mps --repeat 5 >/dev/null
    sleep 0.5
    "$cli" --address "$address" bench --model mlp --device mps --rows 1 --concurrency 8 --duration "$seconds" \
      --warmup "$warmup" >"$work/accuracy-$checks-$round.out"
    stop_server
  done
done
for checks in on off; do
  best=""
  for round in $(seq "$rounds"); do
    rps=$(field 'req/s' "$(cat "$work/accuracy-$checks-$round.out")")
    if [ -z "$best" ] || awk -v a="$rps" -v b="$best" 'BEGIN { exit !(a > b) }'; then
      best=$rps
      best_line=$(cat "$work/accuracy-$checks-$round.out")
    fi
  done
  record accuracy mlp "mps-checks-$checks" 8 1 "$best_line"
done
accuracy_summary=$(awk -v csv="$csv" '
  { ms[$1] += $2; n[$1]++ }
  END {
    while ((getline line < csv) > 0) {
      split(line, f, ",")
      if (f[1] == "accuracy") rps[f[3]] = f[6]
    }
    ratio = (rps["mps-checks-off"] > 0) ? rps["mps-checks-on"] / rps["mps-checks-off"] : 0
    printf "Accuracy checks: start to serving %.0f ms with checks, %.0f ms without (mean of %d); mlp on simulated mps at concurrency 8: %.0f req/s with checks, %.0f without (ratio %.3f, best round each).",
      ms["on"] / n["on"], ms["off"] / n["off"], n["on"], rps["mps-checks-on"], rps["mps-checks-off"], ratio }' "$work/startup.ms")
echo "  $accuracy_summary" >&2
format_summary=$(awk -F, '
  $1 == "format" { rps[$2 "," $3 "," $4] = $6; p50[$2 "," $3 "," $4] = $8 }
  $1 == "inprocess" && $3 ~ /^best-batch/ { best[$2] = $7 }
  END {
    printf "Formats (one row per call, cpu): .pt2 / .pt throughput"
    n = split("1 8 64", cs, " ")
    split("mlp cnn", nets, " ")
    for (k = 1; k <= 2; k++) {
      printf "%s %s", (k > 1 ? ";" : ""), nets[k]
      for (i = 1; i <= n; i++) {
        key = nets[k] "," 
        t = rps[key "torchscript," cs[i]]
        printf "%s %.3f at concurrency %d (p50 %s vs %s ms)", (i > 1 ? "," : ""),
          (t > 0 ? rps[key "aoti," cs[i]] / t : 0), cs[i], p50[key "aoti," cs[i]], p50[key "torchscript," cs[i]]
      }
      t = best[nets[k]]
      printf "; in-process best batch %.3f", (t > 0 ? best[nets[k] "_pt2"] / t : 0)
    }
    printf "."
  }' "$csv")
echo "  $format_summary" >&2

# What the servers say they answered (each logs how its calls ended when it
# stops): h2load sees a gRPC error as an HTTP 200, so its rows' error
# counts cannot tell; this can. Left out: CANCELLED (a load tool ending its
# run cancels the calls it still has open) and the drain's refusals (an
# HTTP/1.1 request of such a client still unread when the server stops).
server_answers=""
server_errors=0
for log in "$work"/infergate-*.err; do
  line=$(sed -n 's/.*\] \(answered .* inference calls*.*\)$/\1/p' "$log" | tail -n1)
  failed=$(awk '{
      total = $2; ok = 0; cancelled = 0; draining = 0
      if (match($0, /OK [0-9]+/)) ok = substr($0, RSTART + 3, RLENGTH - 3)
      if (match($0, /CANCELLED [0-9]+/)) cancelled = substr($0, RSTART + 10, RLENGTH - 10)
      if (match($0, /; [0-9]+ refused while draining/)) draining = substr($0, RSTART + 2, RLENGTH - 25)
      print total - ok - cancelled - draining
    }' <<<"$line")
  if [ -z "$line" ] || [ "${failed:-1}" != 0 ]; then
    server_answers+="- $(head -n1 "$log"): ${line:-no count logged (did it stop cleanly?)}"$'\n'
    server_errors=$((server_errors + 1))
  fi
done
if [ "$server_errors" = 0 ]; then
  server_answers="Every server answered every call OK, by its own count (calls cancelled by a load tool ending its run, and refused while draining, aside)."
else
  server_answers="Servers that ended calls with errors (their own count; the rows' error columns may not show them):"$'\n\n'"$server_answers"
fi
echo "  $server_answers" >&2

# The performance targets, each a ratio within this run.
# The p99 target compares with an earlier run (bench/results/BASELINE names
# it; BENCH_BASELINE=FILE.csv picks another): its p99 over its own hand-off
# ceiling's, against this run's, since the machine's speed varies between
# runs but both servers' rows move with it.
baseline_csv=${BENCH_BASELINE:-bench/results/$(cat bench/results/BASELINE 2>/dev/null || echo none).csv}
[ -f "$baseline_csv" ] || baseline_csv=/dev/null
targets=$(awk -F, -v baseline_file="$baseline_csv" -v baseline="$(basename "$baseline_csv" .csv)" '
  FILENAME == baseline_file { base_p99[$1 "," $2 "," $3 "," $4] = $9; next }
  { rps[$1 "," $2 "," $3 "," $4] = $6; rows[$1 "," $2 "," $3 "," $4] = $7; over[$1 "," $2 "," $3 "," $4] = $10
    p99[$1 "," $2 "," $3 "," $4] = $9; p999[$1 "," $2 "," $3 "," $4] = $13 }
  $1 == "inprocess" && $2 == "cnn" && $3 ~ /^best-batch/ { cnn_best = $7 }
  function ratio(a, b) { return b > 0 ? a / b : 0 }
  function row(what, value, goal, met) { printf "| %s | %s | %s | %s |\n", what, value, goal, met ? "met" : "not met" }
  END {
    print "| target | measured | goal | |"
    print "|---|---|---|---|"
    r = ratio(rps["h2load,mlp,v1-infer,64"], rps["h2load,health,health,64"])
    row("1-row mlp Infer / gRPC floor, 64 streams (h2load)", sprintf("%.3f", r), ">= 0.70", r >= 0.70)
    r = ratio(rps["h2load,mlp,v1-infer,8"], rps["h2load,health,health,8"])
    row("1-row mlp Infer / gRPC floor, 8 streams (h2load)", sprintf("%.3f", r), ">= 0.50", r >= 0.50)
    split("64 8", bound_cs, " ")
    for (i = 1; i <= 2; i++) {
      c = bound_cs[i]
      printf "| bound: hand-off ceiling (no model) / gRPC floor, %d streams | %.3f | (context) | |\n", c,
        ratio(rps["h2load,none,handoff-ceiling," c], rps["h2load,health,health," c])
      printf "| 1-row mlp Infer / hand-off ceiling, %d streams | %.3f | (context) | |\n", c,
        ratio(rps["h2load,mlp,v1-infer," c], rps["h2load,none,handoff-ceiling," c])
      printf "| completion-queue hand-off ceiling / callback hand-off ceiling, %d streams | %.3f | (context) | |\n", c,
        ratio(rps["h2load,none,handoff-ceiling-cq," c], rps["h2load,none,handoff-ceiling," c])
    }
    o = over["infergate,mlp,batching-on,1"]
    row("mlp server overhead p50 at concurrency 1", o " us", "<= 12 us", o != "" && o + 0 <= 12)
    printf "| cnn at concurrency 8 / in-process best | %.3f | (context: the target is the sound bound below) | |\n",
      ratio(rows["infergate,cnn,batching-on,8"], cnn_best)
    split("1 8 64", cs, " ")
    for (i = 1; i <= 3; i++) {
      r = ratio(rps["h2load,mlp,v2," cs[i]], rps["h2load,mlp,v1-infer," cs[i]])
      row("v2 ModelInfer / v1 Infer, " cs[i] " streams (h2load)", sprintf("%.3f", r), ">= 0.97", r >= 0.97)
    }
    # p99 at 64 streams, each over the hand-off ceiling p99 of its own run.
    mk = "h2load,mlp,v1-infer,64"; ck = "h2load,none,handoff-ceiling,64"
    now = ratio(p99[mk], p99[ck]); before = ratio(base_p99[mk], base_p99[ck])
    if (before > 0 && now > 0) {
      row(sprintf("h2load mlp v1-infer p99 at 64 streams / ceiling p99: this run (%s / %s ms) against %s (%s / %s ms)",
                  p99[mk], p99[ck], baseline, base_p99[mk], base_p99[ck]),
          sprintf("%.2f against %.2f", now, before), "no worse", now <= before)
    } else {
      printf "| h2load mlp v1-infer p99 at 64 streams against a baseline run | no baseline with percentiles | no worse | not met |\n"
    }
    for (i = 1; i <= 3; i++) {
      r = ratio(rps["protocols,mlp,v2-stream," cs[i]], rps["protocols,mlp,v2," cs[i]])
      row("ModelStreamInfer / unary ModelInfer, concurrency " cs[i], sprintf("%.3f", r), ">= 1.5", r >= 1.5)
    }
    split("8 64", tcs, " ")
    for (i = 1; i <= 2; i++) {
      r = ratio(rps["tracing,mlp,sampled-1pct," tcs[i]], rps["tracing,mlp,off," tcs[i]])
      row("tracing on, 1% sampled / off, " tcs[i] " streams (h2load)", sprintf("%.3f", r), ">= 0.97", r >= 0.97)
      printf "| tracing on, every call sampled / off, %d streams (h2load) | %.3f | (context) | |\n", tcs[i],
        ratio(rps["tracing,mlp,sampled-100pct," tcs[i]], rps["tracing,mlp,off," tcs[i]])
    }
    # Tail latency: the h2load rows (from its per-request log) and the load tool rows.
    n = split("h2load,mlp,v1-infer,8 h2load,mlp,v1-infer,64 h2load,mlp,v2,8 h2load,mlp,v2,64 h2load,none,handoff-ceiling,64 h2load,cnn,v1-infer,8 infergate,mlp,batching-on,1 infergate,mlp,batching-on,8 infergate,mlp,batching-on,64 infergate,cnn,batching-on,8", tails, " ")
    for (i = 1; i <= n; i++) {
      split(tails[i], k, ",")
      printf "| p99 / p99.9 latency, %s %s %s at %s | %s / %s ms | (context) | |\n", k[1], k[2], k[3], k[4],
        p99[tails[i]], p999[tails[i]]
    }
  }' "$baseline_csv" "$csv")
# The sound bounds: hand-off ceiling plus the forward at the batches that formed.
targets="$targets"$'\n'"$(python3 bench/sound_bound.py "$csv" "$work/inprocess.lines" "$work/batch_mixes")"
echo "$targets" | sed 's/^/  /' >&2

{
  echo "# infergate benchmark $stamp"
  echo
  echo "Machine: $(nproc) cores, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n1); ${seconds}s per row after ${warmup}s warm-up; client and server share the machine."
  echo "The h2load rows and the protocols rows are each the median of $rounds alternating rounds."
  echo
  echo "| suite | model | mode | concurrency | batch | req/s | rows/s | p50 ms | p99 ms | server overhead p50 us | mean batch | errors |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
  tail -n +2 "$csv" | awk -F, '{ printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", $1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12 }'
  echo
  echo "$mixed_summary"
  echo
  echo "$accuracy_summary"
  echo
  echo "$format_summary"
  echo
  echo "$image_summary"
  echo
  echo "$server_answers"
  echo
  echo "Targets (ratios within this run; h2load rows send one pre-encoded request on N streams of one connection):"
  echo
  echo "$targets"
  echo
  echo "Measured commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
} >"$md"
cat "$md"
echo "wrote $md and $csv" >&2
[ "$server_errors" = 0 ] || { echo "servers answered calls with errors: see $md" >&2; exit 1; }
