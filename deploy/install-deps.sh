#!/usr/bin/env bash
# Installs the Debian 13 packages infergate needs (deploy/packages.txt):
# the [build] section, and with --test the [test] section too.
# INFERGATE_LIBTORCH_PACKAGES replaces libtorch-dev (Dockerfile.cuda sets
# "libtorch-cuda-dev nvidia-cuda-toolkit" from Debian's contrib and non-free).
# Idempotent: skips apt entirely when everything is already present. On a
# host that does not build natively (see deploy/platform.sh) the packages
# come with the Debian 13 root instead, and this does nothing.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/platform.sh"
infergate_builds_natively || exit 0
[ "${INFERGATE_NATIVE:-0}" = 1 ] && [ "${INFERGATE_IN_DEBIAN13_ROOT:-0}" != 1 ] && exit 0

sections="build"
[ "${1:-}" = "--test" ] && sections="build test"
packages=()
section=""
while read -r line; do
  case "$line" in
    ''|'#'*) continue ;;
    '['*']') section="${line#[}"; section="${section%]}"; continue ;;
  esac
  if [ "$line" = libtorch-dev ] && [ -n "${INFERGATE_LIBTORCH_PACKAGES:-}" ]; then
    read -r -a line_packages <<<"$INFERGATE_LIBTORCH_PACKAGES"
  else
    line_packages=("$line")
  fi
  case " $sections " in *" $section "*) packages+=("${line_packages[@]}") ;; esac
done <"$here/packages.txt"

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
