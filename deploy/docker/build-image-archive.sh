#!/usr/bin/env bash
# Builds the infergate image as an OCI image archive without Docker or a
# registry: the root file system of build-rootfs.sh (the Dockerfile's
# packages and steps) as one layer, with the Dockerfile's user, entrypoint,
# environment, volume and ports. `docker load` (Docker 25 or later) and
# `podman load` accept the archive.
#
#   deploy/docker/build-image-archive.sh BUILD_DIR [OUTPUT.tar]
#
# Needs root, mmdebstrap and umoci (both Debian packages; this script
# installs them when missing). OUTPUT defaults to BUILD_DIR/infergate-VERSION.oci.tar.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
build_dir="$(cd "${1:?usage: build-image-archive.sh BUILD_DIR [OUTPUT.tar]}" && pwd)"
version=$(sed -n 's/^project(infergate VERSION \([0-9.]*\).*/\1/p' "$here/../../CMakeLists.txt")
[ -n "$version" ] || version=0.0.0
output="${2:-$build_dir/infergate-$version.oci.tar}"
[ "$(id -u)" -eq 0 ] || { echo "build-image-archive: needs root" >&2; exit 1; }
missing=()
for tool in mmdebstrap umoci; do command -v "$tool" >/dev/null || missing+=("$tool"); done
if [ ${#missing[@]} -gt 0 ]; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
fi

root="$build_dir/image/rootfs"
"$here/build-rootfs.sh" "$root" "$build_dir"

scratch=$(mktemp -d "$build_dir/image/oci-XXXXXX")
trap 'rm -rf "$scratch"' EXIT
layout="$scratch/layout"
image="$layout:$version"
umoci init --layout "$layout"
umoci new --image "$image"
umoci insert --image "$image" "$root" /
umoci config --image "$image" \
  --config.user 10001:10001 \
  --config.entrypoint /usr/local/bin/entrypoint.sh \
  --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --config.env INFERGATE_MODEL_REPOSITORY=/models \
  --config.env INFERGATE_ADDRESS=0.0.0.0:50051 \
  --config.env INFERGATE_METRICS_ADDRESS=0.0.0.0:9464 \
  --config.env INFERGATE_HTTP_ADDRESS=0.0.0.0:8000 \
  --config.volume /models \
  --config.exposedports 50051/tcp --config.exposedports 8000/tcp --config.exposedports 9464/tcp \
  --config.label org.opencontainers.image.title=infergate \
  --config.label org.opencontainers.image.version="$version"
umoci gc --layout "$layout"
# Docker names a loaded OCI image after this annotation.
manifest=$(sed -n 's/.*"digest":"\(sha256:[0-9a-f]*\)".*/\1/p' "$layout/index.json" | head -n 1)
[ -n "$manifest" ] || { echo "build-image-archive: no manifest in index.json" >&2; exit 1; }
size=$(stat -c %s "$layout/blobs/sha256/${manifest#sha256:}")
cat >"$layout/index.json" <<JSON
{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"$manifest","size":$size,"annotations":{"org.opencontainers.image.ref.name":"$version","io.containerd.image.name":"docker.io/library/infergate:$version"}}]}
JSON
tar -C "$layout" -cf "$output" oci-layout index.json blobs
echo "wrote $output ($(du -h "$output" | cut -f1)): docker load -i $output  (or podman load -i)"
