#!/usr/bin/env bash
# The runtime image, built and served without a container registry.
#
# Builds the image's root file system with mmdebstrap from the package list
# the Dockerfile reads (deploy/docker/runtime-packages.txt), prepares it with
# the Dockerfile's own script (the infergate user, uid 10001), adds the
# binaries and the entrypoint, and runs the server in it the way the
# Kubernetes Deployment does: PID 1 of its own PID namespace, uid/gid 10001
# with no capabilities and no_new_privs, a read-only root, models mounted
# read-only at /models, writable /tmp and /var/lib/infergate, and the
# environment of the rendered ConfigMap (deploy/k8s/overlays/cpu). The only
# changes to that environment are the listening addresses, which move to
# ephemeral loopback ports. It checks the libraries, health, an Infer,
# /metrics, the process's identity and read-only root, and a clean drain on
# SIGTERM.
#
#   tests/container/image_test.sh BUILD_DIR
#
# Needs root (mount namespaces and chroot) and mmdebstrap
# (deploy/install-deps.sh --test installs it). The root file system is built
# by deploy/docker/build-rootfs.sh into BUILD_DIR/image/ and its
# packages are rebuilt only when the package list changes.
set -euo pipefail

repo="$(cd "$(dirname "$0")/../.." && pwd)"
build_dir="$(cd "${1:?usage: image_test.sh BUILD_DIR}" && pwd)"
work="$build_dir/image"
root="$work/rootfs"
started=$(date +%s)

fail() { echo "FAIL: $*" >&2; exit 1; }

if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || fail "needs root (mount namespaces, chroot); run as root or install sudo"
  exec sudo -E "$0" "$@"
fi
command -v mmdebstrap >/dev/null || fail "mmdebstrap is missing: run deploy/install-deps.sh --test"
# A machine that is itself an unprivileged container cannot make mount and
# PID namespaces: say so and report the test as skipped (CTest code 77),
# never as passed.
if ! unshare --mount --pid --fork true 2>/dev/null; then
  echo "SKIP: this machine does not allow mount and PID namespaces (unshare failed); the image cannot be run here"
  exit 77
fi

# --- The Dockerfile reads the same list and script, and copies every source
# folder the build needs (a folder missing there breaks `docker build`,
# which cannot run here).
dockerfile="$repo/deploy/docker/Dockerfile"
grep -q 'runtime-packages.txt' "$dockerfile" || fail "the Dockerfile no longer reads deploy/docker/runtime-packages.txt"
grep -q 'prepare-runtime.sh' "$dockerfile" || fail "the Dockerfile no longer runs deploy/docker/prepare-runtime.sh"
# Both images are Debian 13, built from the README's package list, with
# LibTorch from Debian (never a download URL).
for file in "$dockerfile" "$repo/deploy/docker/Dockerfile.cuda"; do
  [ "$(grep -c '^FROM debian:trixie-slim AS ' "$file")" = 2 ] ||
    fail "$(basename "$file") does not build and run on debian:trixie-slim"
  grep -q 'deploy/install-deps.sh' "$file" || fail "$(basename "$file") does not install deploy/packages.txt"
  ! grep -qi 'curl\|wget\|https\?://' "$file" || fail "$(basename "$file") downloads something"
done
for dir in $(sed -n 's/^add_subdirectory(\([a-z_]*\))$/\1/p' "$repo/CMakeLists.txt"); do
  for file in "$dockerfile" "$repo/deploy/docker/Dockerfile.cuda"; do
    grep -q "^COPY $dir $dir\$" "$file" || fail "$(basename "$file")'s build stage does not COPY $dir/, which CMakeLists.txt builds"
  done
done

# --- The root file system (packages kept between runs, binaries fresh),
# with every shared library the binaries need.
"$repo/deploy/docker/build-rootfs.sh" "$root" "$build_dir" || fail "the runtime root file system could not be built"

# --- The environment of the Deployment's ConfigMap.
command -v kubectl >/dev/null || fail "kubectl is missing: run deploy/install-deps.sh --test"
mapfile -t config_env < <(kubectl kustomize "$repo/deploy/k8s/overlays/cpu" 2>/dev/null |
  awk 'BEGIN { RS = "---\n" } /\nkind: ConfigMap\n/' |
  sed -n "s/^  \(INFERGATE_[A-Z0-9_]*\): ['\"]\{0,1\}\([^'\"]*\)['\"]\{0,1\}\$/\1=\2/p")
[ "${#config_env[@]}" -gt 0 ] || fail "no INFERGATE_* entry in the rendered ConfigMap"
run_env=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/nonexistent)
for kv in "${config_env[@]}"; do
  case "$kv" in
    INFERGATE_ADDRESS=*) run_env+=(INFERGATE_ADDRESS=127.0.0.1:0) ;;
    INFERGATE_METRICS_ADDRESS=*) run_env+=(INFERGATE_METRICS_ADDRESS=127.0.0.1:0) ;;
    INFERGATE_HTTP_ADDRESS=*) run_env+=(INFERGATE_HTTP_ADDRESS=127.0.0.1:0) ;;
    *) run_env+=("$kv") ;;
  esac
done
echo "ConfigMap environment: ${config_env[*]}"

# --- Runs a command inside the image as the Deployment's container does.
# MODE is ro (the server), rw (making the demo models: /models writable) or
# no-proc (ro without /proc mounted, a broken set-up).
run_dir=$(mktemp -d "$work/run-XXXXXX")
trap 'rm -rf "$run_dir"' EXIT
models="$run_dir/models" state="$run_dir/state" tokens="$run_dir/tokens"
mkdir -p "$models" "$state" "$tokens"
chown 10001:10001 "$models" "$state"
# The infergate-tokens Secret the Deployment mounts (the ConfigMap points
# INFERGATE_AUTH_TOKEN_FILE at it).
token="image-test-token-$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')"
printf '%s\n' "$token" >"$tokens/inference"
chmod 0444 "$tokens/inference"
in_container() {
  local mode=$1
  shift
  unshare --mount --pid --fork --propagation private -- bash -euc '
    root=$1 models=$2 state=$3 tokens=$4 mode=$5
    shift 5
    mount --bind "$root" "$root"
    [ "$mode" = no-proc ] || mount -t proc -o nosuid,nodev,noexec proc "$root/proc"
    mount -t sysfs -o ro,nosuid,nodev,noexec sysfs "$root/sys"
    mount -t tmpfs -o nosuid,size=16m,mode=755 tmpfs "$root/dev"
    for dev in null zero full random urandom; do
      touch "$root/dev/$dev"
      mount --bind "/dev/$dev" "$root/dev/$dev"
    done
    mount -t tmpfs -o nosuid,nodev,size=256m,mode=1777 tmpfs "$root/tmp"
    mount --bind "$models" "$root/models"
    [ "$mode" = rw ] || mount -o remount,bind,ro "$root/models"
    mount --bind "$state" "$root/var/lib/infergate"
    mount --bind "$tokens" "$root/etc/infergate/tokens"
    mount -o remount,bind,ro "$root/etc/infergate/tokens"
    mount -o remount,bind,ro "$root"
    exec chroot "$root" /usr/bin/setpriv --reuid=10001 --regid=10001 --clear-groups --no-new-privs \
      --inh-caps=-all --bounding-set=-all -- /usr/bin/env -i "$@"
  ' in-container "$root" "$models" "$state" "$tokens" "$mode" "$@"
}

in_container rw "${run_env[@]}" /usr/local/bin/make-demo-models /models >"$run_dir/make-models.log" 2>&1 ||
  { cat "$run_dir/make-models.log"; fail "make-demo-models failed inside the image"; }

# --- Without /proc the server says what is missing instead of dying with
# LibTorch's stack trace.
rc=0
in_container no-proc "${run_env[@]}" /usr/local/bin/entrypoint.sh >"$run_dir/no-proc.log" 2>&1 || rc=$?
if [ "$rc" != 1 ] || ! grep -q '/proc/cpuinfo is missing' "$run_dir/no-proc.log" || grep -q 'frame #' "$run_dir/no-proc.log"; then
  cat "$run_dir/no-proc.log"
  fail "without /proc the server should exit 1 naming /proc/cpuinfo (status $rc)"
fi
echo "without /proc: exit 1, \"$(grep -o '/proc/cpuinfo is missing[^:]*' "$run_dir/no-proc.log")\""

# --- The server, through the image's entrypoint.
log="$run_dir/server.log"
in_container ro "${run_env[@]}" /usr/local/bin/entrypoint.sh >"$log" 2>&1 &
outer=$!
server_port="" metrics_port="" http_port=""
for _ in $(seq 1 600); do
  server_port=$(sed -n 's/^infergate listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$log")
  metrics_port=$(sed -n 's/^infergate metrics on 127.0.0.1:\([0-9]*\)$/\1/p' "$log")
  http_port=$(sed -n 's/^infergate http on 127.0.0.1:\([0-9]*\)$/\1/p' "$log")
  [ -n "$server_port" ] && [ -n "$metrics_port" ] && [ -n "$http_port" ] && break
  kill -0 "$outer" 2>/dev/null || { cat "$log"; fail "the server exited at start inside the image"; }
  sleep 0.1
done
[ -n "$server_port" ] && [ -n "$metrics_port" ] && [ -n "$http_port" ] ||
  { cat "$log"; fail "the server printed no listening ports in 60 s"; }
cli=("$build_dir/tools/infergate-cli" --address "127.0.0.1:$server_port" --timeout-ms 5000 --token "$token")
ready=0
for _ in $(seq 1 600); do
  if "${cli[@]}" health >/dev/null 2>&1; then ready=1; break; fi
  kill -0 "$outer" 2>/dev/null || { cat "$log"; fail "the server exited before it was ready"; }
  sleep 0.1
done
[ "$ready" = 1 ] || { cat "$log"; fail "health never turned SERVING"; }
echo "health SERVING on 127.0.0.1:$server_port"

# The server is PID 1 of its namespace; on the host it is a descendant of
# the background job (job shell, unshare, then the server itself).
server_pid=""
pids=("$outer")
while [ -z "$server_pid" ] && [ ${#pids[@]} -gt 0 ]; do
  next=()
  for p in "${pids[@]}"; do
    for child in $(pgrep -P "$p" || true); do
      if [ "$(tr '\0' ' ' <"/proc/$child/cmdline")" = "infergate " ]; then server_pid=$child; fi
      next+=("$child")
    done
  done
  pids=("${next[@]}")
done
[ -n "$server_pid" ] || fail "cannot find the server process among the descendants of $outer"
[ "$(awk '/^NSpid:/ {print $NF}' "/proc/$server_pid/status")" = 1 ] || fail "the server is not PID 1 of its PID namespace"
uids=$(awk '/^Uid:/ {print $2, $3, $4, $5}' "/proc/$server_pid/status")
gids=$(awk '/^Gid:/ {print $2, $3, $4, $5}' "/proc/$server_pid/status")
[ "$uids" = "10001 10001 10001 10001" ] || fail "the server runs with uids $uids, not 10001"
[ "$gids" = "10001 10001 10001 10001" ] || fail "the server runs with gids $gids, not 10001"
[ "$(awk '/^CapEff:/ {print $2}' "/proc/$server_pid/status")" = 0000000000000000 ] || fail "the server holds capabilities"
root_options=$(awk '$5 == "/" {print $6}' "/proc/$server_pid/mountinfo" | tail -n 1)
case ",$root_options," in *,ro,*) ;; *) fail "the server's root is not read-only ($root_options)" ;; esac
models_options=$(awk '$5 == "/models" {print $6}' "/proc/$server_pid/mountinfo" | tail -n 1)
case ",$models_options," in *,ro,*) ;; *) fail "/models is not read-only for the server ($models_options)" ;; esac
echo "server: PID 1 of its namespace, uid/gid 10001, no capabilities, read-only / and /models"

# Closed by default, as the ConfigMap configures it: no token, no inference.
if "$build_dir/tools/infergate-cli" --address "127.0.0.1:$server_port" infer --model mlp >/dev/null 2>&1; then
  fail "Infer without a token succeeded, though the ConfigMap sets INFERGATE_AUTH_TOKEN_FILE"
fi
out=$("${cli[@]}" infer --model mlp) || { echo "$out"; cat "$log"; fail "Infer on mlp failed inside the image"; }
grep -q '^placement: device=cpu ' <<<"$out" || { echo "$out"; fail "Infer answered without a cpu placement"; }
echo "Infer mlp: $(grep '^placement:' <<<"$out")"

# The REST API, as the ConfigMap serves it: health open, inference behind the token.
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$http_port/v2/health/ready")
[ "$code" = 200 ] || fail "REST readiness answered $code"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$http_port/v2/models/mlp")
[ "$code" = 401 ] || fail "REST model metadata without a token answered $code, not 401"
rest=$(curl -sf --max-time 5 -H "Authorization: Bearer $token" "http://127.0.0.1:$http_port/v2/models/mlp") ||
  fail "REST model metadata with the token failed"
grep -q '"platform":"pytorch_libtorch"' <<<"$rest" || fail "REST model metadata: $rest"
echo "REST API on 127.0.0.1:$http_port: ready 200, metadata 401 without the token, 200 with it"

scrape=$(curl -sf --max-time 5 "http://127.0.0.1:$metrics_port/metrics") || fail "/metrics did not answer"
grep -q '^infergate_requests_total{.*model="mlp".*} 1$' <<<"$scrape" ||
  { grep '^infergate_requests_total' <<<"$scrape"; fail "/metrics does not count the Infer"; }
grep -q '^infergate_build_info{' <<<"$scrape" || fail "/metrics has no infergate_build_info"
echo "/metrics counts the Infer"

# --- A clean drain on SIGTERM, as the kubelet sends it, with calls in flight:
# every call the server accepted is answered OK, later ones are refused
# with UNAVAILABLE, nothing else.
# Calls the server answered OK before the load, by its own count
# (infergate_requests_total is counted where its end-of-drain tally is).
ok_before=$(curl -sf --max-time 5 "http://127.0.0.1:$metrics_port/metrics" |
  sed -n 's/^infergate_requests_total{.*code="OK".*} \([0-9]*\)$/\1/p' | awk '{s += $1} END {print s + 0}')
"${cli[@]}" bench --model cnn --concurrency 4 --duration 10 --warmup 0 >"$run_dir/bench.log" 2>&1 &
bench=$!
busy=0
for _ in $(seq 1 300); do
  n=$(curl -sf --max-time 5 "http://127.0.0.1:$metrics_port/metrics" |
    sed -n 's/^infergate_requests_total{.*model="cnn".*} \([0-9]*\)$/\1/p' | awk '{s += $1} END {print s + 0}')
  [ "$n" -ge 20 ] && { busy=1; break; }
  sleep 0.1
done
[ "$busy" = 1 ] || fail "the cnn load never reached the server"
kill -TERM "$server_pid"
term_at=$(date +%s%N)
rc=0
timeout 45 tail --pid="$outer" -f /dev/null || fail "the server did not stop within 45 s of SIGTERM"
drain_ms=$(( ($(date +%s%N) - term_at) / 1000000 ))
wait "$outer" || rc=$?
[ "$rc" = 0 ] || { cat "$log"; fail "the server exited with status $rc after SIGTERM"; }
wait "$bench" || true
summary=$(grep '^bench ' "$run_dir/bench.log") || { cat "$run_dir/bench.log"; fail "the load client printed no summary"; }
# The load outlasts the drain (10 s against a drain of cnn calls), since the
# client counts only answers that arrive within its duration.
# The server's tally ("answered N inference calls: OK a, UNAVAILABLE b; c
# refused while draining"): it answered nothing but OK and UNAVAILABLE, and
# every call it answered OK during the load reached the client as OK. The
# client may also see CANCELLED, from gRPC core, for a call that reached the
# connection in the instant the server closed it, before any handler saw it:
# such a call was never accepted, and the count of OK answers shows that no
# accepted one was lost that way.
tally=$(grep -o '\] answered [0-9]* inference calls: .*' "$log" | tail -n 1) ||
  { cat "$log"; fail "the server did not log how its inference calls ended"; }
server_codes=$(sed 's/^.*inference calls: //; s/;.*$//' <<<"$tally" | tr ',' '\n' | awk '{print $1}' | sort -u | tr '\n' ' ')
[ "$server_codes" = "OK UNAVAILABLE " ] || [ "$server_codes" = "OK " ] ||
  fail "the server answered calls with more than OK and UNAVAILABLE: $tally"
server_ok=$(grep -o 'OK [0-9]*' <<<"$tally" | awk '{print $2}')
client_ok=$(grep -o 'requests=[0-9]*' <<<"$summary" | cut -d= -f2)
[ "$((server_ok - ok_before))" = "$client_ok" ] ||
  fail "the server answered $((server_ok - ok_before)) calls OK during the load, the client received $client_ok: $tally; $summary"
other_errors=$(grep -o ' [A-Z_]*=[0-9]*' <<<"$summary" | grep -v ' UNAVAILABLE=' | grep -v ' CANCELLED=' || true)
# A call that waited out the client's 30 s deadline cannot have waited on
# this server when it was gone sooner: after it exits the client keeps
# calling its port for the rest of the load, and a server another test
# started meanwhile may hold that port (seen once, beside the soak test).
if [ "$drain_ms" -lt 30000 ]; then
  other_errors=$(grep -v ' DEADLINE_EXCEEDED=' <<<"$other_errors" || true)
fi
[ -z "$other_errors" ] || { cat "$log"; fail "calls around SIGTERM failed with more than UNAVAILABLE or CANCELLED (the server stopped $drain_ms ms after SIGTERM; its log is above): $summary"; }
grep -q 'draining for up to 30000 ms' "$log" || { cat "$log"; fail "no drain in the log (ConfigMap's 30s drain timeout)"; }
grep -q '\] stopped$' "$log" || { cat "$log"; fail "the server did not log that it stopped"; }
if grep -q 'frame #' "$log"; then cat "$log"; fail "a stack trace in the server's log"; fi
echo "SIGTERM under load: drained in $drain_ms ms, exit status 0; client: $(grep -o 'requests=[0-9]*' <<<"$summary") $(grep -o 'errors=.*' <<<"$summary"); server:${tally#*]}"
echo "PASS in $(( $(date +%s) - started )) s"
