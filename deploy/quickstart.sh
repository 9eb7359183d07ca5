#!/usr/bin/env bash
# Installs the packages infergate needs, builds it in Release, writes the demo
# model repository and runs the server in the foreground on 127.0.0.1:50051.
# Usage: ./deploy/quickstart.sh [extra server flags]
set -euo pipefail
cd "$(dirname "$0")/.."
# On a host that is not Debian 13 the build and the server run in the
# Debian 13 root (deploy/debian13-root.sh: made once, kept outside the clone).
. deploy/platform.sh
infergate_builds_natively || exec ./deploy/debian13-root.sh ./deploy/quickstart.sh "$@"

./deploy/install-deps.sh

build_dir="${BUILD_DIR:-build}"
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$build_dir" --target infergate infergate-cli make-demo-models

models="${MODEL_REPOSITORY:-./models}"
if [ ! -d "$models/mlp" ]; then
  "$build_dir/tools/make-demo-models" "$models"
fi

# Built in the Debian 13 root, the binaries run there too.
cli="$build_dir/tools/infergate-cli"
[ "${INFERGATE_IN_DEBIAN13_ROOT:-0}" = 1 ] && cli="./deploy/debian13-root.sh $cli"
cat <<MSG

infergate is starting on 127.0.0.1:50051 with the demo models in $models.
In another terminal, in $(pwd):
  $cli devices
  $cli models
  $cli infer --model mlp
  $cli infer --model cnn --device cuda --repeat 20
  $cli infer --model embed --input ids=4x8:random
Stop it with Ctrl-C (it drains in-flight requests first).

MSG
exec "$build_dir/service/infergate" --address 127.0.0.1:50051 --model-repository "$models" "$@"
