#!/usr/bin/env bash
# The layers depend downwards only: each folder's sources include nothing
# from a layer above it (nor, below scheduler/, the wire protocols'
# generated code). One line per include that crosses a layer upward; fails
# if there is any.
#
#   common/     (nothing of ours)
#   devices/    common/
#   wire/       common/ devices/, the protocols' generated code
#   scheduler/  common/ devices/ wire/, the generated code
#   service/    all of the above
#   tools/      all of the above (clients, benchmarks)
set -euo pipefail
cd "$(dirname "$0")/.."
declare -A forbidden=(
  [common]="devices wire scheduler service tools infergate inference mmesh"
  [devices]="wire scheduler service tools infergate inference mmesh"
  [wire]="scheduler service tools"
  [scheduler]="service tools"
  [service]="tools"
)
crossings=0
for layer in "${!forbidden[@]}"; do
  for above in ${forbidden[$layer]}; do
    while IFS= read -r line; do
      echo "layer $layer/ reaches up to $above/: $line"
      crossings=$((crossings + 1))
    done < <(grep -Hn "^#include \"$above/" "$layer"/*.h "$layer"/*.cc 2>/dev/null || true)
  done
done
if [ "$crossings" -gt 0 ]; then
  echo "$crossings include(s) cross a layer upward" >&2
  exit 1
fi
echo "layers: no include crosses a layer upward"
