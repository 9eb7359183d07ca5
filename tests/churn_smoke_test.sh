#!/usr/bin/env bash
# Runs the churn benchmark small (bench/churn.sh with CHURN_SMOKE=1: 6 models
# of 2-8 MB, 10 s per row) and checks what holds whatever the machine's
# speed: every row answered every request, the simulated cuda:0 never held
# more than its budget, a request waited for a load under the policy only
# where loading was the path it chose (ready_path.h: load and run, or a cold
# start) while evict-and-reload's waited, and the policy without a staging
# share (a row of its own, "policy alone") promoted and demoted models
# itself and moved fewer bytes than
# evict-and-reload (the default's share moves about as many: its loads are
# the requests'), the previous rule (--load-and-run=false) sent no request
# to load and run; every request is in the per-request file, and the
# placement bound was computed.
set -euo pipefail
src="$1"
build="$2"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cd "$src"
CHURN_SMOKE=1 BENCH_SKIP_BUILD=1 BUILD_DIR="$build" BENCH_OUT="$out" bench/churn.sh --compare "policy alone=--staging-share=0" >"$out/log" 2>&1 ||
  { cat "$out/log"; exit 1; }
csv=$(ls "$out"/churn-*Z.csv)
requests_csv=$(ls "$out"/churn-*Z-requests.csv)
passed=0
failed=0
check() {
  if eval "$2"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $1"; fi
}
field() {  # field ROW NAME: the value of column NAME in the row named ROW
  awk -F, -v row="$1" -v name="$2" 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
    $col["row"] == row { print $col[name] }' "$csv"
}
rows=(policy "policy alone" "policy mean" "previous rule" evict-and-reload "all resident")
check "six rows" '[ "$(($(wc -l <"$csv") - 1))" -eq 6 ]'
for row in "${rows[@]}"; do
  check "$row: no request failed ($(field "$row" failures): $(field "$row" first_failure))" '[ "$(field "$row" failures)" = 0 ]'
  check "$row: requests were answered" '[ "$(field "$row" requests)" -gt 50 ]'
  check "$row: cuda:0's memory peak $(field "$row" peak_memory) within its budget $(field "$row" budget)" \
    '[ "$(field "$row" peak_memory)" -le "$(field "$row" budget)" ]'
  check "$row: the server exited cleanly" '[ "$(field "$row" exit)" = 0 ]'
done
loading_paths() {  # loading_paths ROW: the row's requests whose ready path was a load (load and run, cold start)
  awk -F, -v row="$1" 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
    $col["row"] == row && ($col["ready_path"] == "load_and_run" || $col["ready_path"] == "cold_start") { n++ }
    END { print n + 0 }' "$requests_csv"
}
for row in policy "policy alone" "policy mean" "previous rule"; do
  check "$row: a request waited for a load only where that was its path ($(field "$row" waited) waited, $(loading_paths "$row") chose a load)" \
    '[ "$(field "$row" waited)" -le "$(loading_paths "$row")" ]'
done
check "previous rule (--load-and-run=false): no request took load and run" \
  'awk -F, "NR == 1 { for (i = 1; i <= NF; i++) col[\$i] = i; next }
    \$col[\"row\"] == \"previous rule\" && \$col[\"ready_path\"] == \"load_and_run\" { bad++ }
    END { exit bad > 0 }" "$requests_csv"'
check "evict-and-reload: requests waited for loads ($(field evict-and-reload waited))" \
  '[ "$(field evict-and-reload waited)" -gt 0 ]'
# Under the default rule requests load their models themselves (load and
# run into the staging share), so the move policy itself seldom promotes
# there in 10 s (0 or 1 times since the simulated CPU is charged its least
# work); without a staging share only the policy puts models on cuda:0.
check "policy: models moved both ways (loads onto cuda:0 $(field policy gpu_loads), demoted or evicted $(field policy demoted)/$(field policy evicted))" \
  '[ "$(field policy gpu_loads)" -gt 0 ] && [ "$(($(field policy demoted) + $(field policy evicted)))" -gt 0 ]'
check "policy alone: the move policy promoted and demoted (promoted $(field "policy alone" promoted), demoted or evicted $(field "policy alone" demoted)/$(field "policy alone" evicted))" \
  '[ "$(field "policy alone" promoted)" -gt 0 ] && [ "$(($(field "policy alone" demoted) + $(field "policy alone" evicted)))" -gt 0 ]'
check "policy alone moved fewer bytes per minute than evict-and-reload ($(field "policy alone" moved_mb_per_min) against $(field evict-and-reload moved_mb_per_min))" \
  'awk -v a="$(field "policy alone" moved_mb_per_min)" -v b="$(field evict-and-reload moved_mb_per_min)" "BEGIN { exit !(a < b) }"'
check "all resident: every request on cuda:0" 'awk -v v="$(field "all resident" on_gpu)" "BEGIN { exit !(v == 1) }"'
check "a Markdown table was written" 'grep -q "^| policy |" "$(ls "$out"/churn-*.md)"'
total=0
for row in "${rows[@]}"; do total=$((total + $(field "$row" requests))); done
check "every request of every row in the per-request file ($total)" \
  '[ "$(($(wc -l <"$requests_csv") - 1))" -eq "$total" ]'
check "every answered request's server time is in the per-request file, within its latency" \
  'awk -F, "NR == 1 { for (i = 1; i <= NF; i++) col[\$i] = i; next }
    \$col[\"ok\"] == 1 && !(\$col[\"server_total_us\"] > 0 && \$col[\"server_total_us\"] <= 1000 * \$col[\"latency_ms\"]) { bad++ }
    END { exit bad > 0 }" "$requests_csv"'
check "a request held for a load on arrival took load and run, its hold within its queue time" \
  'awk -F, "NR == 1 { for (i = 1; i <= NF; i++) col[\$i] = i; next }
    \$col[\"load_wait_us\"] > 0 && !(\$col[\"ready_path\"] == \"load_and_run\" && \$col[\"load_wait_us\"] <= \$col[\"queue_us\"]) { bad++ }
    END { exit bad > 0 }" "$requests_csv"'
check "the placement bound was computed" \
  'grep -q "^The lowest p99 any placement can reach .*: [0-9.]* ms, [0-9.]*x the all-resident p99" "$(ls "$out"/churn-*.md)"'
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
