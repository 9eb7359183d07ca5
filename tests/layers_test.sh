#!/usr/bin/env bash
# The layers depend downwards only: each folder's sources include nothing
# from a layer above it (nor, below model_store/, the wire protocols' generated
# code). One line per include that crosses a layer upward; fails if there
# is any. Each layer is a CMake library of its own that links only the
# layers below it.
#
#   common/     (nothing of ours)
#   devices/    common/
#   wire/       common/ devices/, the protocols' generated code
#   model_store/ the above: model files, configs, the repository view,
#               loaders, the model cache and manager, the shared plain types
#   execution/  the above: jobs, fair queues, device executors, batch runs
#   routing/    the above: the route planner, the accuracy contract, the
#               failure policy, the core's options
#   core/       the above: the facade, its parts, the request path, the lifecycle
#   service/    all of the above
#   tools/      all of the above (clients, benchmarks)
set -euo pipefail
cd "$(dirname "$0")/.."
declare -A forbidden=(
  [common]="devices wire model_store execution routing core service tools infergate inference mmesh"
  [devices]="wire model_store execution routing core service tools infergate inference mmesh"
  [wire]="model_store execution routing core service tools"
  [model_store]="execution routing core service tools"
  [execution]="routing core service tools"
  [routing]="core service tools"
  [core]="service tools"
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
