#!/usr/bin/env bash
# Installs what the build and tests need, builds, and runs every test
# through CTest; before that, the scheduler's unit tests under
# ThreadSanitizer (in build-tsan/).
#   ./tests/run.sh [--no-tsan] [extra ctest args]
# BUILD_DIR (default: build) picks the build folder.
set -euo pipefail
cd "$(dirname "$0")/.."

tsan=1
if [ "${1:-}" = "--no-tsan" ]; then
  tsan=0
  shift
fi

./deploy/install-deps.sh --test

build_dir="${BUILD_DIR:-build}"
start=$(date +%s)
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DINFERGATE_BUILD_TESTS=ON
cmake --build "$build_dir"
echo "build took $(( $(date +%s) - start )) s"


if [ "$tsan" = 1 ]; then
  # The scheduler's queues, batching, cache and learned-limits table under
  # ThreadSanitizer. LibTorch and gRPC are not instrumented, so races inside
  # them would go unseen; our own locking is what this checks.
  start=$(date +%s)
  cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS="-fsanitize=thread -O1 -Wno-error=maybe-uninitialized" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" >/dev/null
  cmake --build build-tsan --target scheduler_test
  echo "tsan build took $(( $(date +%s) - start )) s"
  TSAN_OPTIONS="halt_on_error=1 exitcode=66" build-tsan/tests/scheduler_test --gtest_brief=1
fi

if [ "${INFERGATE_FUZZ_SECONDS:-60}" -gt 0 ]; then
  # Request parsing and validation under libFuzzer (ASan + UBSan), bounded.
  ./tests/fuzz/run.sh "${INFERGATE_FUZZ_SECONDS:-60}"
fi

# Last, so CI reads CTest's closing line.
cd "$build_dir"
ctest --output-on-failure -j "$(nproc)" "$@"
