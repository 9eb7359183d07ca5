#!/usr/bin/env bash
# Builds the infergate runtime image's root file system without Docker:
# Debian 13 (trixie) minbase (what debian:trixie-slim is made of) plus the
# packages of runtime-packages.txt, prepared by prepare-runtime.sh (the
# Dockerfile's own steps), with the three binaries and the entrypoint in
# /usr/local/bin. Then checks that every shared library of the binaries is
# in it, naming any that is missing.
#
#   deploy/docker/build-rootfs.sh ROOT BUILD_DIR
#
# Needs root and mmdebstrap. The packages are installed once and kept
# (ROOT.stamp records the list they came from); later runs only refresh
# the binaries. INFERGATE_DEBIAN_MIRROR and INFERGATE_DEBIAN_SECURITY_MIRROR
# override the package archive.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="${1:?usage: build-rootfs.sh ROOT BUILD_DIR}"
build_dir="${2:?usage: build-rootfs.sh ROOT BUILD_DIR}"
packages_file="$here/runtime-packages.txt"
mirror="${INFERGATE_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
security_mirror="${INFERGATE_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"

fail() { echo "build-rootfs: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || fail "needs root (mmdebstrap --mode=root, chroot)"
command -v mmdebstrap >/dev/null || fail "mmdebstrap is missing (apt-get install mmdebstrap)"
binaries=("$build_dir/service/infergate" "$build_dir/tools/infergate-cli" "$build_dir/tools/make-demo-models")
for bin in "${binaries[@]}"; do [ -x "$bin" ] || fail "$bin is not built"; done

packages=$(grep -v '^#' "$packages_file" | tr -s ' \n' ',' | sed 's/^,//; s/,$//')
[ -n "$packages" ] || fail "$packages_file lists no package"
stamp="$(cat "$packages_file" "$here/prepare-runtime.sh" | sha256sum | cut -c1-16) $mirror"
if [ ! -f "$root.stamp" ] || [ "$(cat "$root.stamp")" != "$stamp" ]; then
  echo "building the runtime root file system (trixie minbase + $packages)"
  t=$(date +%s)
  rm -rf "$root" "$root.stamp"
  mkdir -p "$(dirname "$root")"
  mmdebstrap --mode=root --variant=minbase --include="$packages" \
    --customize-hook='cp "'"$here"'/prepare-runtime.sh" "$1/tmp/" && chroot "$1" sh /tmp/prepare-runtime.sh && rm "$1/tmp/prepare-runtime.sh"' \
    trixie "$root" \
    "deb $mirror trixie main" "deb $mirror trixie-updates main" "deb $security_mirror trixie-security main" \
    >"$root.log" 2>&1 || { tail -n 30 "$root.log"; fail "mmdebstrap could not build the root file system (log: $root.log)"; }
  echo "$stamp" >"$root.stamp"
  echo "root file system built in $(( $(date +%s) - t )) s ($(du -sh "$root" | cut -f1))"
fi
install -m 0755 "${binaries[@]}" "$here/entrypoint.sh" "$root/usr/local/bin/"
strip "$root/usr/local/bin/infergate" "$root/usr/local/bin/infergate-cli" "$root/usr/local/bin/make-demo-models"

missing=""
for bin in infergate infergate-cli make-demo-models; do
  for lib in $(chroot "$root" /usr/bin/ldd "/usr/local/bin/$bin" | awk '/not found/ {print $1}'); do
    owner=$(dpkg -S "*/$lib" 2>/dev/null | head -n 1 | cut -d: -f1 || true)
    missing+="  $lib, needed by $bin${owner:+ (Debian package $owner on the build machine)}"$'\n'
  done
done
[ -z "$missing" ] || fail "the image lacks shared libraries; add their packages to deploy/docker/runtime-packages.txt:
$missing"
echo "every shared library of the three binaries is in the image"
