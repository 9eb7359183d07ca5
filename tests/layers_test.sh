#!/usr/bin/env bash
# The parts depend downwards only, and the front ends not on one another:
# every `#include "..."` of ours in a source folder must name a folder that
# folder may use. One line per include that breaks the rule; fails if there
# is any. Each folder is a CMake library (or two: a LibTorch-free part and
# the rest) that links only what it may use.
#
#   common/                 nothing of ours
#   devices/                common/
#   proto/                  + devices/, the protocols' generated code
#   scheduler/repository/   + proto/ (and repository/triton/, one library
#                           with it: a config file is read as either)
#   scheduler/repository/torchserve/  + scheduler/repository/
#   scheduler/model/        + the repository
#   scheduler/loaders/*/    + scheduler/model/
#   scheduler/loaders/      + loaders/*/ (the seam that picks one)
#   scheduler/cache/        + the loaders
#   scheduler/execution/    + scheduler/model/
#   scheduler/routing/      + cache/, execution/
#   scheduler/core/         + routing/: all of the scheduler
#   service/http/           common/ (no scheduler, no other front end)
#   service/tracing/        the scheduler up to execution/
#   service/call/           the scheduler, tracing/, http/
#   service/grpc/           + call/
#   service/v1/, open_inference/, torchserve/, modelmesh/   the front ends:
#                           call/, grpc/, http/, tracing/, and of the
#                           scheduler only its facade (scheduler/core/), the
#                           model types (scheduler/model/) and the pure
#                           repository headers in frontend_repository below
#                           (names, labels, config overrides, uploads, the
#                           TorchServe store's catalog): never the execution
#                           layer, the routing, the cache or the loaders,
#                           and never one another
#   service/metrics/        call/, http/, tracing/, the scheduler
#   service/server/         everything: it wires the front ends together
#   tools/                  everything
#
# Tried on purpose: an include of "service/open_inference/open_inference_rest.h"
# added to service/torchserve/torchserve_rest.cc makes this test print
#   service/torchserve/torchserve_rest.cc:2: includes service/open_inference/open_inference_rest.h:
#     torchserve may not use service/open_inference
# and fail; `tests/layers_test.sh --self-test` does exactly that on a copy
# of the tree (CTest's layers_self_test).
set -euo pipefail
cd "$(dirname "$0")/.."

generated="infergate inference mmesh torchserve grpc"
scheduler_low="scheduler/repository scheduler/repository/triton scheduler/repository/torchserve scheduler/model"
loaders="scheduler/loaders scheduler/loaders/torchscript scheduler/loaders/aoti"
scheduler_all="$scheduler_low $loaders scheduler/cache scheduler/execution scheduler/routing scheduler/core"
base="common devices proto $generated"
declare -A may=(
  [common]=""
  [devices]="common"
  [proto]="common devices $generated"
  [scheduler/repository]="$base scheduler/repository/triton"
  [scheduler/repository/triton]="$base scheduler/repository"
  [scheduler/repository/torchserve]="$base scheduler/repository"
  [scheduler/model]="$base scheduler/repository"
  [scheduler/loaders/torchscript]="$base scheduler/repository scheduler/model"
  [scheduler/loaders/aoti]="$base scheduler/repository scheduler/model"
  [scheduler/loaders]="$base scheduler/repository scheduler/model scheduler/loaders/torchscript scheduler/loaders/aoti"
  [scheduler/cache]="$base scheduler/repository scheduler/model $loaders"
  [scheduler/execution]="$base scheduler/repository scheduler/model"
  [scheduler/routing]="$base scheduler/repository scheduler/model $loaders scheduler/cache scheduler/execution"
  [scheduler/core]="$base $scheduler_all"
  [service/http]="common"
  [service/tracing]="$base scheduler/repository scheduler/model scheduler/execution"
  [service/call]="$base $scheduler_all service/tracing service/http"
  [service/grpc]="$base $scheduler_all service/tracing service/http service/call"
  [service/metrics]="$base $scheduler_all service/call service/http service/tracing"
  [service/server]="$base $scheduler_all service/call service/grpc service/http service/tracing service/v1
                    service/open_inference service/torchserve service/modelmesh service/metrics"
)
# What the front ends may read of the repository: pure headers, one by one.
frontend_repository="scheduler/repository/class_labels.h scheduler/repository/config_override.h
  scheduler/repository/model_name.h scheduler/repository/model_upload.h scheduler/repository/repository_scan.h
  scheduler/repository/torchserve/mar_manifest.h scheduler/repository/torchserve/torchserve_store.h
  scheduler/repository/triton/triton_config.h"
frontend="$base scheduler/core scheduler/model service/call service/grpc service/http service/tracing"
may[service/v1]="$frontend"
may[service/open_inference]="$frontend"
may[service/torchserve]="$frontend"
may[service/modelmesh]="$frontend"
declare -A may_files=(
  [service/v1]="$frontend_repository"
  [service/open_inference]="$frontend_repository"
  [service/torchserve]="$frontend_repository"
  [service/modelmesh]="$frontend_repository"
)
ours="common devices proto scheduler service tools $generated"

check_tree() {
  local broken=0 folder file line included target root allowed
  for folder in "${!may[@]}"; do
    for file in "$folder"/*.h "$folder"/*.cc; do
      [ -e "$file" ] || continue
      while IFS=: read -r line included; do
        root=${included%%/*}
        case " $ours " in *" $root "*) ;; *) continue ;; esac
        target=${included%/*}
        [ "$target" = "$folder" ] && continue
        allowed=0
        for ok in ${may[$folder]}; do
          if [ "$target" = "$ok" ] || [ "$root" = "$ok" ]; then allowed=1; break; fi
        done
        for ok in ${may_files[$folder]:-}; do
          if [ "$included" = "$ok" ]; then allowed=1; break; fi
        done
        if [ "$allowed" = 0 ]; then
          echo "$file:$line: includes $included: ${folder#*/} may not use $target"
          broken=$((broken + 1))
        fi
      done < <(grep -n '^#include "' "$file" | sed 's/^\([0-9]*\):#include "\([^"]*\)".*/\1:\2/')
    done
  done
  # Every source folder is one of the parts above.
  while IFS= read -r folder; do
    if [ -z "${may[$folder]+set}" ]; then
      echo "$folder: a source folder with no rule in tests/layers_test.sh"
      broken=$((broken + 1))
    fi
  done < <(git ls-files 'common/*.cc' 'devices/*.cc' 'proto/*.cc' 'scheduler/*.cc' 'service/*.cc' | xargs -n1 dirname | sort -u)
  [ "$broken" -eq 0 ]
}

if [ "${1:-}" = --self-test ]; then
  # A front end that includes another must be caught.
  copy=$(mktemp -d)
  trap 'rm -rf "$copy"' EXIT
  git ls-files -z -- common devices proto scheduler service tools tests/layers_test.sh | xargs -0 cp --parents -t "$copy"
  sed -i '1a #include "service/open_inference/open_inference_rest.h"' "$copy/service/torchserve/torchserve_rest.cc"
  found=$(cd "$copy" && git init -q && git add -A && "$copy/tests/layers_test.sh" 2>&1) && {
    echo "the layers test did not catch a front end including another" >&2
    exit 1
  }
  echo "$found" | grep -q "torchserve_rest.cc:2: includes service/open_inference/open_inference_rest.h: torchserve may not use service/open_inference" || {
    echo "the layers test failed, but not for the include it was given: $found" >&2
    exit 1
  }
  # And one reaching past the facade into the execution layer.
  copy2=$(mktemp -d)
  trap 'rm -rf "$copy" "$copy2"' EXIT
  git ls-files -z -- common devices proto scheduler service tools tests/layers_test.sh | xargs -0 cp --parents -t "$copy2"
  sed -i '1a #include "scheduler/execution/device_executor.h"' "$copy2/service/open_inference/open_inference_rest.cc"
  found=$(cd "$copy2" && git init -q && git add -A && "$copy2/tests/layers_test.sh" 2>&1) && {
    echo "the layers test did not catch a front end including the execution layer" >&2
    exit 1
  }
  echo "$found" | grep -q "open_inference_rest.cc:2: includes scheduler/execution/device_executor.h: open_inference may not use scheduler/execution" || {
    echo "the layers test failed, but not for the include it was given: $found" >&2
    exit 1
  }
  echo "layers: a front end including another, or the execution layer, is caught"
  exit 0
fi

if ! check_tree; then
  echo "some includes break the layering (above)" >&2
  exit 1
fi
echo "layers: every include stays within what its folder may use"
