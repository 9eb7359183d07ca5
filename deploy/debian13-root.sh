#!/usr/bin/env bash
# Runs a command inside a Debian 13 (trixie) root file system, for hosts that
# are not Debian 13 (Debian 12, Ubuntu, CI machines): infergate builds
# against Debian 13's LibTorch 2.6, gRPC 1.51 and absl 20240722, and mixing
# releases on the host itself would break it, so the host's own packages are
# never touched.
#
#   deploy/debian13-root.sh COMMAND [ARGS...]
#
# The root is made once with mmdebstrap from deploy/packages.txt (every
# section) and kept outside the clone, in
# ${INFERGATE_ROOT_CACHE:-/var/cache/infergate}/debian13-<hash of the list>,
# so a fresh clone reuses it and a changed list makes a new one (older roots
# are removed). Making it takes a few minutes and about 3.5 GB of disk.
#
# COMMAND runs as root in a private mount namespace (nothing stays mounted
# when it ends) with /proc, /sys and /dev mounted, the folder that
# holds the clone bind-mounted at the same path (so paths in build folders
# and test output are the host's), and the host's ccache folder shared, so
# builds inside the root and out of it use one cache. It sees the host's
# network (loopback included) and the environment of the caller, with a
# Debian PATH. INFERGATE_IN_DEBIAN13_ROOT=1 tells scripts where they are.
# INFERGATE_DEBIAN_MIRROR overrides the package archive.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/.." && pwd)"
list="$here/packages.txt"
mirror="${INFERGATE_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
security_mirror="${INFERGATE_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"
cache="${INFERGATE_ROOT_CACHE:-/var/cache/infergate}"

fail() { echo "debian13-root: $*" >&2; exit 1; }
[ $# -gt 0 ] || fail "usage: debian13-root.sh COMMAND [ARGS...]"
[ "$(id -u)" -eq 0 ] || fail "needs root (mmdebstrap --mode=root, mount, chroot); run it with sudo"

if ! command -v mmdebstrap >/dev/null || ! command -v unshare >/dev/null; then
  echo "debian13-root: installing mmdebstrap on the host (the only host package it needs)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y --no-install-recommends mmdebstrap util-linux >/dev/null
fi

key="$( (grep -v '^#' "$list"; echo "$mirror") | sha256sum | cut -c1-16)"
root="$cache/debian13-$key"
mkdir -p "$cache"
exec 9>"$cache/debian13.lock"
flock 9
if [ ! -f "$root/.infergate-root-complete" ]; then
  packages=$(grep -v '^#' "$list" | grep -v '^\[' | tr -s ' \n' ',' | sed 's/^,//; s/,$//')
  echo "debian13-root: making the Debian 13 root $root (once per package list; a few minutes)"
  t=$(date +%s)
  for old in "$cache"/debian13-*; do
    [ -d "$old" ] && [ "$old" != "$root" ] && rm -rf --one-file-system "$old"
  done
  rm -rf --one-file-system "$root" "$root.log"
  mmdebstrap --mode=root --variant=apt --include="$packages" \
    --aptopt='APT::Install-Recommends "false"' \
    trixie "$root" \
    "deb $mirror trixie main" "deb $mirror trixie-updates main" \
    "deb $security_mirror trixie-security main" \
    >"$root.log" 2>&1 || { tail -n 30 "$root.log"; rm -rf --one-file-system "$root"; fail "mmdebstrap failed (log: $root.log)"; }
  touch "$root/.infergate-root-complete"
  echo "debian13-root: made in $(( $(date +%s) - t )) s ($(du -sh --one-file-system "$root" | cut -f1))"
fi
# The root trusts what the host trusts beyond Debian's own CAs (a site
# proxy's CA, say), so npm and curl in it reach what the host reaches.
local_cas=/usr/local/share/ca-certificates
if [ -d "$local_cas" ] && ! diff -rq "$local_cas" "$root$local_cas" >/dev/null 2>&1; then
  rm -rf "$root$local_cas"
  cp -r "$local_cas" "$root$local_cas"
  chroot "$root" update-ca-certificates --fresh >/dev/null 2>&1 || echo "debian13-root: update-ca-certificates failed in the root" >&2
fi
flock -u 9

# The folder that holds the clone (so shared/ beside it is visible too), or
# the clone itself when it sits at the top of the file system.
share="$(dirname "$repo")"
[ "$share" != "/" ] || share="$repo"
ccache_dir="${CCACHE_DIR:-$HOME/.cache/ccache}"
[ -d "$HOME/.ccache" ] && [ -z "${CCACHE_DIR:-}" ] && ccache_dir="$HOME/.ccache"
mkdir -p "$ccache_dir"

export INFERGATE_IN_DEBIAN13_ROOT=1 CCACHE_DIR="$ccache_dir" HOME=/root
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
exec unshare --mount --propagation private -- bash -euc '
  root="$1" share="$2" ccache_dir="$3" workdir="$4"; shift 4
  # The root a mount point of its own, so that inside it "/" is one and
  # tools that make namespaces of their own (unshare, the image test) can.
  mount --bind "$root" "$root"
  mount -t proc proc "$root/proc"
  mount --rbind /sys "$root/sys"
  mount --rbind /dev "$root/dev"
  mkdir -p "$root$share" "$root$ccache_dir"
  mount --bind "$share" "$root$share"
  mount --bind "$ccache_dir" "$root$ccache_dir"
  exec chroot "$root" bash -c "cd \"\$0\" && exec \"\$@\"" "$workdir" "$@"
' debian13-root "$root" "$share" "$ccache_dir" "$PWD" "$@"
