#!/usr/bin/env bash
# Builds the libFuzzer target (clang, ASan + UBSan) in build-fuzz/ and runs it
# on a copy of the seed corpus. One command for a longer run:
#   tests/fuzz/run.sh 3600
# `tests/fuzz/run.sh --build-only` builds and stops there.
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds="${1:-60}"
build_only=0
[ "$seconds" != --build-only ] || build_only=1
# -O1 -g1 as the sanitizer builds in tests/run.sh (RelWithDebInfo's own
# -O2 -g would come after CMAKE_CXX_FLAGS and win).
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++-19 \
  -DINFERGATE_BUILD_TESTS=OFF -DINFERGATE_FUZZ=ON -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
  -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined" >/dev/null
cmake --build build-fuzz --target request_fuzzer
[ "$build_only" = 0 ] || exit 0
corpus=$(mktemp -d)
trap 'rm -rf "$corpus"' EXIT
cp tests/fuzz/corpus/* "$corpus/"
# The request path's seeds, kept readable as text InferRequests
# (request_seeds/*.txtpb) and encoded here, each behind the byte that routes
# it to the request parser (0x02; see LLVMFuzzerTestOneInput).
for seed in tests/fuzz/request_seeds/*.txtpb; do
  out="$corpus/request_$(basename "$seed" .txtpb)"
  printf '\002' >"$out"
  protoc -Iproto --encode=infergate.v1.InferRequest proto/infergate/v1/inference.proto <"$seed" >>"$out" ||
    { echo "request seed $seed does not encode" >&2; exit 1; }
done
# config.pbtxt seeds, each behind the byte that routes it to the config
# parser (0x00): the committed Triton-style ones, and every config the demo
# and test models are written with, when the plain build has made the tool.
config_seed() {
  out="$corpus/config_$2"
  printf '\000' >"$out"
  cat "$1" >>"$out"
}
for seed in tests/fuzz/config_seeds/*.pbtxt; do config_seed "$seed" "$(basename "$seed" .pbtxt)"; done
if [ -x build/tools/make-demo-models ]; then
  demo=$(mktemp -d)
  build/tools/make-demo-models "$demo" --with-test-models >/dev/null
  for config in "$demo"/*/config.pbtxt; do config_seed "$config" "demo_$(basename "$(dirname "$config")")"; done
  rm -rf "$demo"
fi
# Exit status is non-zero on any crash, sanitizer report or leak.
# SECONDS of fuzzing on one core, spread over every core: one fuzzing job
# per core (libFuzzer's fork mode, one corpus) for SECONDS / cores of wall
# time, so that a core does not sit idle for the whole run. A timeout or an
# out-of-memory fails the run as it does without fork mode.
cores=$(nproc)
wall=$(( (seconds + cores - 1) / cores ))
rc=0
build-fuzz/tests/fuzz/request_fuzzer "$corpus" -fork="$cores" -ignore_timeouts=0 -ignore_ooms=0 \
  -max_total_time="$wall" -print_final_stats=1 -close_fd_mask=1 >"$corpus/.log" 2>&1 || rc=$?
grep -E "^(stat::|==|SUMMARY|ERROR|Done)|DONE|^INFO: (fuzzed|exiting)" "$corpus/.log" | grep -v "==WARNING: .*symbolizer" || true
grep -E "^#[0-9]+: cov" "$corpus/.log" | tail -n 1 || true
if [ "$rc" -ne 0 ]; then tail -n 60 "$corpus/.log"; fi
exit "$rc"
