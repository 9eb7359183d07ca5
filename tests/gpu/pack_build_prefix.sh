#!/usr/bin/env bash
# Packs the Debian 13 packages tests/gpu/fetch_build_packages.sh downloaded
# into one smaller archive, OUT_DIR/prefix.tar.xz, for a lent GPU machine
# whose upload is limited (64 MiB with the working tree; the packages are
# 53 MB): the packages unpacked, less their documentation, the static
# libraries no CMake package file names, the compiler's own files, and the
# Boost headers the server does not include (those it does are found by
# the preprocessor over service/http/http_server.cc, with Boost's
# configuration headers whole, which pick per compiler). cuda_check.sh
# unpacks PACKAGES_DIR/prefix.tar.xz where it finds one instead of the
# packages. Runs in the Debian 13 root:
#
#   deploy/debian13-root.sh tests/gpu/pack_build_prefix.sh PACKAGES_DIR OUT_DIR
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: pack_build_prefix.sh PACKAGES_DIR OUT_DIR" >&2; exit 2; }
[ "${INFERGATE_IN_DEBIAN13_ROOT:-0}" = 1 ] || { echo "run it through deploy/debian13-root.sh" >&2; exit 2; }
repo="$(cd "$(dirname "$0")/../.." && pwd)"
packages="$(cd "$1" && pwd)"
out="$(mkdir -p "$2" && cd "$2" && pwd)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root="$work/prefix"
mkdir -p "$root"
for deb in "$packages"/*.deb; do dpkg -x "$deb" "$root"; done
rm -rf "$root/usr/share/doc" "$root/usr/share/man" "$root/usr/lib/gcc"
# Static libraries: kept where a CMake package file names one (CMake
# refuses an imported target whose file is missing), else dropped (the
# server links the shared ones).
named=$(grep -rhoE 'lib[A-Za-z0-9_+.-]+\.a\b' "$root/usr/lib/x86_64-linux-gnu/cmake" "$root/usr/share/cmake" 2>/dev/null | sort -u)
find "$root" -name '*.a' | while read -r a; do
  grep -qxF "$(basename "$a")" <<< "$named" || rm -f "$a"
done
# Boost: the headers the server includes, from the system's (the same
# package), with boost/config whole.
c++ -std=c++20 -I"$repo" -M -MG "$repo/service/http/http_server.cc" 2>/dev/null |
  tr ' \\' '\n\n' | grep -o '^/usr/include/boost/.*' | sort -u > "$work/boost-headers"
[ -s "$work/boost-headers" ] || { echo "pack_build_prefix: no Boost header found through http_server.cc" >&2; exit 1; }
rm -rf "$root/usr/include/boost"
(cd / && sed 's|^/||' "$work/boost-headers" | tar -cf - -T - | tar -xf - -C "$root")
cp -r /usr/include/boost/config "$root/usr/include/boost/"
cp /usr/include/boost/config.hpp /usr/include/boost/version.hpp "$root/usr/include/boost/"
tar -C "$root" -cf - . | xz -T0 -6 > "$out/prefix.tar.xz"
echo "pack_build_prefix: $(wc -l < "$work/boost-headers") Boost headers; unpacked $(du -sh "$root" | cut -f1), packed $(du -sh "$out/prefix.tar.xz" | cut -f1), in $out/prefix.tar.xz"
