#!/usr/bin/env bash
# Installs what the build and tests need, builds, and runs every test
# through CTest; before that, clang's thread-safety analysis (build-tsa/),
# the scheduler's and the front end's unit tests under
# ThreadSanitizer (build-tsan/), the whole suite under AddressSanitizer and
# UndefinedBehaviorSanitizer (build-asan/), the request fuzzer (build-fuzz/),
# and the second build, against PyPI's LibTorch (build-pypi-torch/:
# tests/pypi/run.sh), with its model tests. The builds after the ASan tree
# compile in the background, at the lowest priority, while its suite runs.
# CTest's run includes the container image test (tests/container/), which
# builds the runtime root file system with mmdebstrap and serves from it.
#   ./tests/run.sh [--no-tsan] [--no-asan] [--no-image] [--no-pypi-torch] [--loaded] [extra ctest args]
# BUILD_DIR (default: build) picks the build folder. --loaded runs every
# test (not the builds) while stress-ng keeps every core busy, as CI's
# machine may be: the suite must pass that way too.
set -euo pipefail
cd "$(dirname "$0")/.."
# On a host that is not Debian 13 the whole run happens in the Debian 13
# root (deploy/debian13-root.sh: made once, kept outside the clone).
. deploy/platform.sh
infergate_builds_natively || exec ./deploy/debian13-root.sh ./tests/run.sh "$@"

tsan=1
asan=1
image=1
pypi_torch=1
loaded=0
while [ $# -gt 0 ]; do
  case "$1" in
    --no-tsan) tsan=0; shift ;;
    --no-asan) asan=0; shift ;;
    --no-image) image=0; shift ;;
    --no-pypi-torch) pypi_torch=0; shift ;;
    --loaded) loaded=1; shift ;;
    *) break ;;
  esac
done

./deploy/install-deps.sh --test

# --loaded: one CPU hog per core at normal priority, in its own process
# group, stopped (SIGSTOP) while something builds and resumed for the tests.
hog=
hog_on() { [ -z "$hog" ] || kill -CONT -- "-$hog" 2>/dev/null || true; }
hog_off() { [ -z "$hog" ] || kill -STOP -- "-$hog" 2>/dev/null || true; }
if [ "$loaded" = 1 ]; then
  hog=$(setsid bash -c 'stress-ng --cpu "$(nproc)" --timeout 0 --quiet >/dev/null 2>&1 & echo $$')  # the group's id
  hog_off
  echo "loaded mode: stress-ng --cpu $(nproc) runs beside every test"
fi

# What the ASan/UBSan suite leaves to the plain build: the soak and the
# benchmark smoke run (timing-heavy, no memory subject), the checks that are
# not C++ servers, the container image (built from the plain binary), and
# the fatal-signal report (the sanitizers install their own handlers).
asan_skips="Soak|bench_smoke|churn_smoke|placement_bound|gpu_calibration|k8s_manifests|monitoring|python_client|container_image|AFatalSignal"
# The tests whose memory bounds only the plain build can check (under ASan
# its quarantine keeps freed memory, and they skip those checks, which the
# ASan suite allows by INFERGATE_SANITIZER_RUN=1; anywhere else a skipped
# bound fails): CTest's label "memory", and the GoogleTest cases of the
# integration binary that carry one (named: a discovered test takes no
# label of its own). They run in both builds.
memory_label="memory"
memory_tests="BurstBudgetTest\.ABurstBeyondTheBudget|Streams\.AClientThatStopsReading|ServerTest\.ListedMetricsCarryTheirValues"
# How many GoogleTest cases that pattern names: checked against CTest's list
# below, so that a renamed case fails the run instead of leaving its bound
# unchecked.
memory_test_count=3

# The sanitizer builds' optimisation: -O1 as the sanitizers' own
# documentation advises, and line tables only (-g1: file and line in every
# report's stack). RelWithDebInfo's default (-O2 -g) came after CMAKE_CXX_FLAGS
# and won, and made the AddressSanitizer build twice as slow to compile
# (http_server.cc: 111 s at -O2 -g, 55 s at -O1 -g1).
sanitizer_opt="-O1 -g1 -DNDEBUG"
# The ASan/UBSan tree compiles protoc's generated sources without UBSan
# (-DINFERGATE_UBSAN_GENERATED=OFF, CMakeLists.txt says why).

# CTest, failing when a test was skipped: a skip is never a pass unless a
# flag asked for it (and then the test is not run at all: --no-image
# excludes the container test). Prints what it ran as CTest does.
ctest_no_skips() {
  local log rc=0
  log=$(mktemp)
  ctest "$@" 2>&1 | tee "$log" || rc=$?
  if grep -E '\*\*\*Skipped|Not Run' "$log" >/dev/null; then
    echo "tests were skipped, which no flag asked for:" >&2
    grep -E '\*\*\*Skipped|Not Run' "$log" >&2
    rm -f "$log"
    return 1
  fi
  rm -f "$log"
  return "$rc"
}
# CTest starts the costliest tests first, by the times it recorded in the
# build folder (Testing/Temporary/CTestCostData.txt); a fresh clone has
# none, so it starts tests in the order they are listed, the longest
# integration tests last, and ends with a core idle while they finish.
# Times of one run on the development machine (tests/ctest_costs/) seed a
# build folder that has none; CTest updates them from then on.
seed_ctest_costs() {  # BUILD_DIR NAME
  local to="$1/Testing/Temporary/CTestCostData.txt"
  [ -f "$to" ] || { mkdir -p "$(dirname "$to")"; cp "tests/ctest_costs/$2.txt" "$to"; }
}
# Each stage's time, printed as it ends and all together at the end (the
# run's own record of where its time goes).
run_start=$(date +%s)
# The machine's busy share over the run (from /proc/stat: all cores, every
# process, the run's and anything beside it).
cpu_ticks() { awk '/^cpu /{print $2+$3+$4+$7+$8, $5+$6}' /proc/stat; }  # busy idle
run_ticks=$(cpu_ticks)
stage_times=()
# busy_share BEFORE AFTER: the busy percentage between two cpu_ticks.
busy_share() {
  local busy0 idle0 busy1 idle1
  IFS=' ' read -r busy0 idle0 <<<"$1"
  IFS=' ' read -r busy1 idle1 <<<"$2"
  echo $(( 100 * (busy1 - busy0) / (busy1 - busy0 + idle1 - idle0 + 1) ))
}
stage_ticks=$run_ticks
stage_done() {  # NAME START (the CPU share is since the stage before)
  local took=$(( $(date +%s) - $2 )) now
  now=$(cpu_ticks)
  echo "$1 took $took s (CPU busy $(busy_share "$stage_ticks" "$now")%)"
  stage_ticks=$now
  stage_times+=("$1 ${took}s")
}
print_stage_times() {
  local IFS=,
  echo "stage times: ${stage_times[*]}; in all $(( $(date +%s) - run_start )) s"
  echo "CPU busy $(busy_share "$run_ticks" "$(cpu_ticks)")% of the run"
}
# On the way out, whatever the outcome: the hog stopped, and a failed run's
# stage times (a run that fails late says what its stages took too).
finished=0
on_exit() {
  [ -z "${chain_pid:-}" ] || kill_tree "$chain_pid"
  [ -z "${pypi_pid:-}" ] || kill_tree "$pypi_pid"
  if [ -n "$hog" ]; then kill -CONT -- "-$hog" 2>/dev/null; kill -- "-$hog" 2>/dev/null || true; fi
  [ "$finished" = 1 ] || print_stage_times
}
trap on_exit EXIT
# What this run leaves out, and why (CI's log says so).
echo "left out by flags: $([ "$tsan" = 1 ] || echo "the ThreadSanitizer suite (--no-tsan) ")$(
  [ "$asan" = 1 ] || echo "the AddressSanitizer suite (--no-asan) ")$(
  [ "$image" = 1 ] || echo "the container image test (--no-image) ")$(
  [ "$pypi_torch" = 1 ] || echo "the PyPI-LibTorch build (--no-pypi-torch)")"
# Before anything builds: a source file git does not hold builds here and
# breaks every fresh clone.
./tests/sources_tracked.sh
# And every C++ file is in the project's style (.clang-format; about 2 s).
./tests/format_check.sh

build_dir="${BUILD_DIR:-build}"
# The PyPI stage's environments (4.4 GB of wheels the first time) are made
# in the background while the builds compile; that stage waits for them.
venvs_pid=
if [ "$pypi_torch" = 1 ]; then
  mkdir -p "${PYPI_TORCH_BUILD_DIR:-build-pypi-torch}"
  ./tests/pypi/run.sh --venvs-only >"${PYPI_TORCH_BUILD_DIR:-build-pypi-torch}/venvs.log" 2>&1 &
  venvs_pid=$!
fi
start=$(date +%s)
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DINFERGATE_BUILD_TESTS=ON
cmake --build "$build_dir"
stage_done build "$start"

# The builds after the first, in order: the ASan/UBSan tree in the
# foreground (its suite comes next and needs all of it), then the others
# in one chain in the background at the lowest priority (nice 19) while the
# ASan/UBSan suite runs: the thread-safety analysis, the TSan tree, the
# fuzzer and the PyPI build. A suite leaves cores idle while its tests
# sleep, wait on a deadline or run one at a time under a lock; the chain
# fills that time and yields the CPU to the tests whenever they want it
# (they pass beside stress-ng at normal priority, --loaded, so a niced
# build is no threat to their bounds). Each later stage waits for its
# build, so failures still come in the stage that owns them, with its log.
chain_dir="$build_dir/chain"
rm -rf "$chain_dir"
mkdir -p "$chain_dir"

# clang's thread-safety analysis: every member a lock guards
# (ABSL_GUARDED_BY) is touched only under it. Checked by clang with
# -fsyntax-only (the target's own flag, CMakeLists.txt): no code generated,
# no object written, ccache answering a file checked before; a violation
# fails the build. Each file is checked alone here
# (INFERGATE_UNITY_BATCH=1), the only tree that does: a file that uses a
# header it does not include compiles in its batch, after a file that
# includes it, and fails here.
build_tsa() {
  cmake -S . -B build-tsa -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER=clang++-19 \
    -DINFERGATE_BUILD_TESTS=OFF -DINFERGATE_UNITY_BATCH=1 -DCMAKE_CXX_FLAGS="-O0 -g0" >/dev/null
  # Only the checked objects: the target links infergate_service for its
  # include paths, and building the target would compile every library with
  # clang first (about 420 s of a cold run's CPU for nothing). The objects'
  # own order-only dependencies still generate the protobuf headers.
  local tsa_objects
  tsa_objects=$(cmake --build build-tsa -- -t targets all |
    sed -n 's|^\(CMakeFiles/thread_safety_check\.dir/[^:]*\.o\): .*|\1|p')
  [ -n "$tsa_objects" ] || { echo "no thread-safety objects found in build-tsa" >&2; return 1; }
  # shellcheck disable=SC2086  # one object path per word
  cmake --build build-tsa -- $tsa_objects
}

# Under ThreadSanitizer: the scheduler's queues, batching, cache and
# learned-limits table (core_test), and the front end's own concurrency
# without gRPC (service_test: the HTTP server, calls and their
# cancellation, stream bookkeeping, span export). LibTorch, gRPC and
# Abseil are not instrumented, so races inside them, and order they alone
# establish, go unseen: our own locking (std::mutex underneath) is what
# this checks. The server over gRPC is therefore not run here: gRPC's
# completion queues order its calls through locks TSAN cannot see.
# -Wno-tsan: Asio's handler fences (std::atomic_thread_fence), which TSAN
# does not model; its own mutexes order the handlers.
build_tsan() {
  cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$sanitizer_opt" \
    -DCMAKE_CXX_FLAGS="-fsanitize=thread -Wno-error=maybe-uninitialized -Wno-tsan" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" >/dev/null
  cmake --build build-tsan --target core_test service_test
}

# Runs STEP (a function) in the chain: its output in $chain_dir/STEP.log,
# its exit status in STEP.rc, its time in STEP.took.
chain_step() {  # STEP
  local t rc=0
  t=$(date +%s)
  # As a job of its own, so that set -e stops STEP at its first failure
  # (in an "||" list it would be ignored).
  "$1" >"$chain_dir/$1.log" 2>&1 &
  wait $! || rc=$?
  echo "$(( $(date +%s) - t ))" >"$chain_dir/$1.took"
  echo "$rc" >"$chain_dir/$1.rc"
}
build_fuzzer() { ./tests/fuzz/run.sh --build-only; }
build_pypi() { ./tests/pypi/run.sh --build-only; }  # waits on the venvs' lock
chain_steps=(build_tsa)
[ "$tsan" = 1 ] && chain_steps+=(build_tsan)
[ "${INFERGATE_FUZZ_SECONDS:-60}" -gt 0 ] && chain_steps+=(build_fuzzer)
[ "$pypi_torch" = 1 ] && chain_steps+=(build_pypi)
chain_pid=
start_chain() {
  (
    renice -n 19 -p "$BASHPID" >/dev/null  # before it starts anything, which inherits it
    export CMAKE_BUILD_PARALLEL_LEVEL
    CMAKE_BUILD_PARALLEL_LEVEL=$(nproc)  # two batches at once beside a suite, not ninja's nproc + 2
    for step in "${chain_steps[@]}"; do
      chain_step "$step"
      [ "$(cat "$chain_dir/$step.rc")" = 0 ] || break
    done
  ) &
  chain_pid=$!
}
# A run that ends early (a failed stage, a signal) stops the chain with it.
kill_tree() {  # PID
  local child
  for child in $(pgrep -P "$1" 2>/dev/null); do kill_tree "$child"; done
  kill "$1" 2>/dev/null || true
}
# Waits for STEP of the chain; prints its time, or its log and fails.
wait_chain_step() {  # STEP NAME
  local waited
  waited=$(date +%s)
  while [ ! -f "$chain_dir/$1.rc" ]; do
    kill -0 "$chain_pid" 2>/dev/null || { echo "the background builds ended before $2" >&2; exit 1; }
    sleep 1
  done
  waited=$(( $(date +%s) - waited ))
  if [ "$(cat "$chain_dir/$1.rc")" != 0 ]; then
    cat "$chain_dir/$1.log" >&2
    echo "$2 failed" >&2
    exit 1
  fi
  echo "$2 took $(cat "$chain_dir/$1.took") s in the background (waited $waited s for it)"
  stage_times+=("$2 $(cat "$chain_dir/$1.took")s (beside; waited ${waited}s)")
  stage_ticks=$(cpu_ticks)
}

if [ "$asan" = 1 ]; then
  # Every unit and integration test (the server binary included) under ASan
  # and UBSan. The soak, the benchmark smoke run and the non-C++ checks run
  # once, in the plain build below.
  start=$(date +%s)
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DINFERGATE_BUILD_BENCH_TOOLS=OFF \
    -DINFERGATE_UBSAN_GENERATED=OFF \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$sanitizer_opt" \
    -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -Wno-error=maybe-uninitialized" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
    -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
  cmake --build build-asan
  stage_done "asan build" "$start"
  start_chain
  hog_on
  start=$(date +%s)
  seed_ctest_costs build-asan asan
  # One test more than there are cores: the timing_bound chain (the
  # integration cases that bound wall-clock times) holds a slot for most
  # of the suite while it mostly waits (deadlines, drains, held requests), and
  # at two tests on two cores that left a core idle: the suite took 890-897
  # s at 84% busy; at three, 790 and 809 s at 96% (same code, same quiet
  # machine). Every test passes with every core busy (--loaded).
  asan_jobs=$(( $(nproc) + 1 ))
  if ! (cd build-asan &&
    INFERGATE_SANITIZER_RUN=1 \
    ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS="suppressions=$PWD/../tests/sanitizers/lsan.supp" \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest_no_skips --output-on-failure -j "$asan_jobs" -E "$asan_skips" \
    >ctest.log 2>&1); then
    cat build-asan/ctest.log
    echo "the ASan/UBSan suite failed" >&2
    exit 1
  fi
  tail -n 4 build-asan/ctest.log
  stage_done "asan suite" "$start"
  hog_off
else
  start_chain
fi

wait_chain_step build_tsa "thread-safety analysis"

if [ "$tsan" = 1 ]; then
  wait_chain_step build_tsan "tsan build"
  hog_on
  start=$(date +%s)
  # (The crash-mid-write test forks and SIGKILLs a writer: not a TSAN subject.)
  # The two suites side by side: one after the other they kept the machine
  # 39-46% busy (core_test about 7 s, service_test about 19 s). Each logs
  # to its own file, printed after both have ended (whole if it failed).
  tsan_pids=()
  tsan_logs=()
  for suite in "core_test --gtest_filter=-*CrashMidWrite*" service_test; do
    tsan_logs+=("build-tsan/${suite%% *}.log")
    # shellcheck disable=SC2086  # the suite and its filter are two words
    TSAN_OPTIONS="halt_on_error=1 exitcode=66 suppressions=$PWD/tests/sanitizers/tsan.supp" \
      build-tsan/tests/$suite --gtest_brief=1 >"${tsan_logs[-1]}" 2>&1 &
    tsan_pids+=($!)
  done
  tsan_failed=0
  for i in "${!tsan_pids[@]}"; do
    if wait "${tsan_pids[$i]}"; then
      tail -n 3 "${tsan_logs[$i]}"
    else
      cat "${tsan_logs[$i]}"
      echo "the TSan suite in ${tsan_logs[$i]} failed" >&2
      tsan_failed=1
    fi
  done
  [ "$tsan_failed" = 0 ] || exit 1
  stage_done "tsan suites" "$start"
  hog_off
fi

if [ "${INFERGATE_FUZZ_SECONDS:-60}" -gt 0 ]; then
  # Request parsing and validation under libFuzzer (ASan + UBSan), bounded.
  wait_chain_step build_fuzzer "fuzzer build"
  start=$(date +%s)
  hog_on
  ./tests/fuzz/run.sh "${INFERGATE_FUZZ_SECONDS:-60}"
  hog_off
  stage_done "fuzzer run" "$start"
fi

pypi_pid=
if [ "$pypi_torch" = 1 ]; then
  # The second supported build, against PyPI's LibTorch (pinned in
  # tests/pypi/torch-requirements.txt), its CUDA path compiled and linked;
  # its model tests on the CPU with models that torch saves, and each build
  # given the other PyPI's files. Its own CTest run must skip nothing. It
  # runs beside the plain suite below, each leaving cores idle alone (their
  # tests wait on servers, deadlines and locks: 78% and 85% busy one after
  # the other); its log is printed when both have ended.
  if ! wait "$venvs_pid"; then
    cat "${PYPI_TORCH_BUILD_DIR:-build-pypi-torch}/venvs.log" >&2
    echo "the PyPI stage's environments could not be made" >&2
    exit 1
  fi
  tail -n 1 "${PYPI_TORCH_BUILD_DIR:-build-pypi-torch}/venvs.log"
  wait_chain_step build_pypi "PyPI-LibTorch build"
  pypi_log="$PWD/${PYPI_TORCH_BUILD_DIR:-build-pypi-torch}/tests-beside.log"
  pypi_start=$(date +%s)
  ( ./tests/pypi/run.sh >"$pypi_log" 2>&1; echo "$(( $(date +%s) - pypi_start ))" >"$pypi_log.took" ) &
  pypi_pid=$!
fi
# The PyPI stage's tests, once they have ended: their closing lines, or
# their whole log and the run's failure.
wait_pypi_tests() {
  [ -n "$pypi_pid" ] || return 0
  local rc=0
  wait "$pypi_pid" || rc=$?
  pypi_pid=
  if [ "$rc" != 0 ]; then
    cat "$pypi_log" >&2
    echo "the PyPI-LibTorch tests failed" >&2
    exit 1
  fi
  grep -E "tests passed|^Total Test time" "$pypi_log" || true
  echo "PyPI-LibTorch tests took $(cat "$pypi_log.took") s beside the plain suite"
  stage_times+=("PyPI-LibTorch tests $(cat "$pypi_log.took")s (beside the plain suite)")
}

# Last (CTest's closing lines, then the stage times). After the ASan/UBSan suite, the
# plain (shipped, -O3) build runs what that suite left out and the unit
# tests; every integration test ran there already, against the same code.
ctest_args=()
[ "$image" = 1 ] || ctest_args=(-E container_image_test)
hog_on
start=$(date +%s)
seed_ctest_costs "$build_dir" plain
cd "$build_dir"
if [ "$asan" = 1 ]; then
  # The unit tests, what the ASan suite left out, the memory-bound
  # GoogleTest cases and the memory-labelled tests, in one CTest call so
  # that they fill the cores beside the longest chain (the soak, the
  # benchmark and churn smoke runs, which take one lock); the labelled
  # tests by name, since -R and -L would intersect.
  listed=$(ctest -N -R "$memory_tests" | sed -n 's/^Total Tests: //p')
  if [ "$listed" != "$memory_test_count" ]; then
    echo "the memory-bound GoogleTest cases: $memory_test_count named in tests/run.sh, $listed found by CTest" >&2
    exit 1
  fi
  labelled=$(ctest -N -L "$memory_label" | sed -n 's/^ *Test *#[0-9]*: *//p' | paste -sd '|')
  [ -n "$labelled" ] || { echo "no test carries the label $memory_label" >&2; exit 1; }
  ctest_no_skips --output-on-failure -j "$(nproc)" "${ctest_args[@]}" \
    -R "^(common_test|devices_test|core_test|service_test|service_test_serial|$labelled)\$|$asan_skips|$memory_tests" "$@"
else
  ctest_no_skips --output-on-failure -j "$(nproc)" "${ctest_args[@]}" "$@"
fi
stage_done "plain suite" "$start"
wait_pypi_tests
finished=1
print_stage_times
