#!/usr/bin/env bash
# Installs every Debian package infergate needs to build, run and test.
# Idempotent: skips apt entirely when everything is already present.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config
  libtorch-dev libopenblas0-pthread
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev prometheus-cpp-dev
  libgtest-dev libgmock-dev
  libboost-dev libssl-dev nlohmann-json3-dev
)
if [ "${1:-}" = "--test" ]; then
  # The cross-language client test runs on Debian's own Python and gRPC.
  packages+=(python3 python3-grpcio python3-protobuf openssl curl)
  # Metrics are checked by a real Prometheus server and promtool.
  packages+=(prometheus)
  # The fuzz target: clang with libFuzzer and the sanitizer runtimes.
  packages+=(clang-14 libfuzzer-14-dev libclang-rt-14-dev)
  # Kubernetes manifests: rendered by kubectl's kustomize, linted, schema-checked with Node.
  packages+=(yamllint)
  command -v kubectl >/dev/null || packages+=(kubernetes-client)
  # The container image test builds the runtime root file system from the
  # package archive (no registry needed).
  packages+=(mmdebstrap)
  # bench/run.sh drives the REST rows with h2load (HTTP/1.1).
  packages+=(nghttp2-client)
  command -v npm >/dev/null || packages+=(nodejs npm)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
$SUDO apt-get install -y --no-install-recommends "${missing[@]}"
