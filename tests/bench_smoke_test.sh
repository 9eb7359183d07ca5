#!/usr/bin/env bash
# Runs bench/run.sh for a quarter of a second per row (a twentieth of a second of
# warm-up) and checks that every row is there, produced numbers and saw no
# errors: a check of the benchmark's modes, not of their figures.
set -euo pipefail
src="$1"
build="$2"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cd "$src"
BENCH_SKIP_BUILD=1 BENCH_SMOKE=1 BENCH_SECONDS=0.25 BENCH_WARMUP=0.05 BUILD_DIR="$build" BENCH_OUT="$out" \
  bench/run.sh >/dev/null 2>"$out/log" || { cat "$out/log"; exit 1; }
csv=$(ls "$out"/*.csv)
rows=$(($(wc -l <"$csv") - 1))
passed=0
failed=0
check() {
  if eval "$2"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $1"; fi
}
check "87 rows (3 gRPC floor, 10 h2load (the cnn at 8 among them), 8 hand-off ceiling (callback and completion-queue, each also with the cnn frame), 4 model ceiling (mlp at 1, 8 and 64, cnn at 8), 6 tracing, 8 in-process, 12 infergate, 15 protocols, 12 format, 3 image_classifier, 4 mixed, 2 accuracy), got $rows" '[ "$rows" -eq 87 ]'
while IFS=, read -r suite model mode conc batch rps rowsps p50 p99 overhead meanb errors p999; do
  [ "$suite" = suite ] && continue
  check "$suite $model $mode c=$conc has a throughput" 'awk -v v="$rps" "BEGIN { exit !(v > 0) }"'
  # The image_classifier rows report no percentiles; the rest, p50 to p99.9
  # (h2load's from its per-request log).
  case "$suite/$mode" in
    torchserve/*) ;;
    inprocess/*) check "$suite $model $mode c=$conc has a p50" 'awk -v v="$p50" "BEGIN { exit !(v > 0) }"' ;;
    *) check "$suite $model $mode c=$conc has p50 <= p99 <= p99.9" \
         'awk -v a="$p50" -v b="$p99" -v c="$p999" "BEGIN { exit !(a > 0 && a <= b && b <= c) }"' ;;
  esac
  check "$suite $model $mode c=$conc had no errors ($errors)" '[ "$errors" = 0 ]'
done <"$csv"
check "a Markdown table was written" '[ -s "$(ls "$out"/*.md)" ]'
check "the accuracy summary (start-up and steady state, with and without checks) was written" \
  'grep -q "^Accuracy checks: start to serving [0-9]* ms with checks, [0-9]* ms without" "$(ls "$out"/*.md)"'
check "the image_classifier summary puts decoding next to the forward pass" \
  'grep -q "^image_classifier (640x480 JPEG, /predictions/clf): concurrency 1: [0-9.]* req/s, decode+preprocess [0-9.]*[1-9][0-9.]* ms per image, forward [0-9.]*[1-9][0-9.]* ms per batch of [0-9.]*[1-9]" "$(ls "$out"/*.md)"'
check "the format summary compares .pt2 with .pt for the mlp and the cnn, served and in-process" \
  'grep -q "^Formats (one row per call, cpu): .pt2 / .pt throughput mlp [0-9.]* at concurrency 1 .*; in-process best batch [0-9.]*[1-9][0-9.]*; cnn [0-9.]*[1-9].*; in-process best batch [0-9.]*[1-9][0-9.]*\.$" "$(ls "$out"/*.md)"'
check "the targets table has its fifteen rows" '[ "$(grep -c "| \(met\|not met\) |$" "$(ls "$out"/*.md)")" -eq 15 ]'
check "the sound bounds have figures" \
  '[ "$(grep -c "sound bound ([1-9][0-9.]* req/s: .*, mean [1-9][0-9.]*) | [0-9.]*[1-9]" "$(ls "$out"/*.md)")" -eq 3 ]'
check "the p99 target compares this run with the baseline run, each over its own ceiling" \
  'grep -q "p99 at 64 streams / ceiling p99: this run ([0-9.]*[1-9][0-9.]* / [0-9.]*[1-9][0-9.]* ms) against $(cat bench/results/BASELINE) ([0-9.]*[1-9][0-9.]* / [0-9.]*[1-9][0-9.]* ms) | [0-9.]* against [0-9.]* |" "$(ls "$out"/*.md)"'
check "the tail latency rows have figures" \
  '[ "$(grep -c "p99 / p99.9 latency, .* | [0-9.]*[1-9][0-9.]* / [0-9.]*[1-9][0-9.]* ms | (context)" "$(ls "$out"/*.md)")" -eq 10 ]'
check "the sound bounds each have their model ceiling rows" \
  '[ "$(grep -c "/ model ceiling ([1-9][0-9.]* req/s: .* | [0-9.]*[1-9][0-9.]* | (context)" "$(ls "$out"/*.md)")" -eq 3 ] &&
   [ "$(grep -c "^| model ceiling / sound bound, .* | [0-9.]*[1-9][0-9.]* | (context)" "$(ls "$out"/*.md)")" -eq 3 ]'
check "the targets table has the six hand-off ceiling rows" '[ "$(grep -c "hand-off ceiling.*| (context) |" "$(ls "$out"/*.md)")" -eq 6 ]'
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
