#!/usr/bin/env bash
# The churn benchmark (bench/churn.py): 24 models of 20 to 200 MB whose total
# is three times a simulated cuda:0's budget, open-loop clients under a Zipf
# distribution whose popular set shifts every 10 s; rows: the no-cold-start
# policy (its objective the tail, and --move-objective=mean), the previous rule
# (--load-and-run=false: no load and run, held to that rule's bound), evict-and-reload
# (--background-moves=false --host-copy-share=0) and every model resident. Writes
# bench/results/churn-<stamp>.md, .csv (the rows) and -requests.csv (every
# request).
#
#   bench/churn.sh                      full run (about 9 minutes; 2.5 GB of models in a temporary folder)
#   CHURN_SMOKE=1 bench/churn.sh        6 models of 2-8 MB, 10 s per row (the test's smoke run)
#   CHURN_ARGS="--rate 30" bench/churn.sh   more arguments for churn.py
#   CHURN_MODELS_ARGS="--mix real" bench/churn.sh   more arguments for tools/make_churn_models.py:
#                                       here ResNet-50-like conv nets and BERT-base-like encoders
#                                       beside the GEMV layers (about 4 GB of models; the conv
#                                       nets and encoders compute for seconds a request on a
#                                       2-core host: a mix for a real GPU, or --scale for a test)
#   CHURN_SEEDS="1 2 3" bench/churn.sh  one run per seed (arrivals and popular sets), the same models,
#                                       then churn-<stamp>-seeds.md: each figure's median and spread
#                                       over the seeds (bench/churn_seeds.py), and the policy's late
#                                       requests by cause on each seed (bench/regret_causes.py)
set -euo pipefail
cd "$(dirname "$0")/.."
. deploy/platform.sh
infergate_builds_natively || exec ./deploy/debian13-root.sh ./bench/churn.sh "$@"

build_dir="${BUILD_DIR:-build}"
out_dir="${BENCH_OUT:-bench/results}"
if [ "${BENCH_SKIP_BUILD:-0}" != 1 ]; then
  ./deploy/install-deps.sh --test
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build_dir" --target infergate
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ "${CHURN_SMOKE:-0}" = 1 ]; then
  # shellcheck disable=SC2086 # CHURN_MODELS_ARGS is split on purpose
  python3 tools/make_churn_models.py "$work/models" --count 6 --min-mb 2 --max-mb 8 ${CHURN_MODELS_ARGS:-} >/dev/null
  set -- --seconds 10 --shift 5 --settle 1 "$@"
else
  # shellcheck disable=SC2086 # CHURN_MODELS_ARGS is split on purpose
  python3 tools/make_churn_models.py "$work/models" --count 24 --min-mb 20 --max-mb 200 ${CHURN_MODELS_ARGS:-} >/dev/null
  set -- --compare-host-copies "$@"
fi
mkdir -p "$out_dir"
stamp=$(date -u +%Y%m%dT%H%M%SZ)
run() {  # NAME ARGS...: one run of churn.py, its files named churn-NAME
  local name=$1; shift
  # shellcheck disable=SC2086 # CHURN_ARGS is split on purpose
  python3 bench/churn.py --server "$build_dir/service/infergate" --proto-dir proto --models "$work/models" \
    --work "$work/$name" --out "$out_dir/churn-$name.md" --csv "$out_dir/churn-$name.csv" \
    --requests-csv "$out_dir/churn-$name-requests.csv" "$@" ${CHURN_ARGS:-}
  echo "written: $out_dir/churn-$name.md"
}
if [ -z "${CHURN_SEEDS:-}" ]; then
  run "$stamp" "$@"
  exit 0
fi
csvs=()
requests=()
for seed in $CHURN_SEEDS; do
  run "$stamp-seed$seed" --seed "$seed" "$@"
  csvs+=("$out_dir/churn-$stamp-seed$seed.csv")
  requests+=("$out_dir/churn-$stamp-seed$seed-requests.csv")
done
# shellcheck disable=SC2086 # the seeds' list is split on purpose
python3 bench/churn_seeds.py --seeds "$(echo $CHURN_SEEDS | tr ' ' ',')" \
  --out "$out_dir/churn-$stamp-seeds.md" "${csvs[@]}"
# Each seed's late requests of the policy by cause, after the summary.
{ echo; python3 bench/regret_causes.py --row policy "${requests[@]}"; } >>"$out_dir/churn-$stamp-seeds.md"
echo "written: $out_dir/churn-$stamp-seeds.md"
