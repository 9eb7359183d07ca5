#!/usr/bin/env bash
# Installs what the build and tests need, builds, and runs every test
# through CTest. Usage: ./tests/run.sh [extra ctest args]
# BUILD_DIR (default: build) picks the build folder.
set -euo pipefail
cd "$(dirname "$0")/.."

./deploy/install-deps.sh --test

build_dir="${BUILD_DIR:-build}"
start=$(date +%s)
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DINFERGATE_BUILD_TESTS=ON
cmake --build "$build_dir"
echo "build took $(( $(date +%s) - start )) s"
if command -v ccache >/dev/null; then ccache --show-stats 2>/dev/null | grep -iE "hits|misses" | head -4 || true; fi

cd "$build_dir"
ctest --output-on-failure -j "$(nproc)" "$@"
