#!/usr/bin/env bash
# Downloads the Debian 13 packages that building infergate needs, less
# LibTorch and the compiler, into DIR, for a machine that is not Debian 13
# and has its own CUDA-enabled PyTorch: tests/gpu/cuda_check.sh unpacks
# them into a private prefix there (nothing is installed). Runs in the
# Debian 13 root on any host:
#
#   deploy/debian13-root.sh tests/gpu/fetch_build_packages.sh DIR
#
# The libraries' newest glibc symbol is 2.38 and libstdc++ symbol 3.4.32
# (checked with objdump -T when this was written), so they run on
# glibc 2.38+ distributions with GCC 13+ (Ubuntu 24.04 and later).
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: fetch_build_packages.sh DIR" >&2; exit 2; }
out="$(mkdir -p "$1" && cd "$1" && pwd)"
[ "${INFERGATE_IN_DEBIAN13_ROOT:-0}" = 1 ] || { echo "run it through deploy/debian13-root.sh" >&2; exit 2; }

wanted="libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev prometheus-cpp-dev
  libgtest-dev libgmock-dev libboost-dev libssl-dev nlohmann-json3-dev zlib1g-dev opentelemetry-cpp-dev
  libopentelemetry-proto-dev opentelemetry-proto libjpeg62-turbo-dev libpng-dev libjemalloc-dev"
# The C library, the compiler's own libraries and tools: the target
# machine's are used.
toolchain=" gcc-14-base libasan8 libatomic1 libc-dev-bin libc6 libc6-dev libcrypt-dev libcrypt1 libgcc-14-dev
  libgcc-s1 libgomp1 libhwasan0 libitm1 liblsan0 libquadmath0 libstdc++-14-dev libstdc++6 libtsan2 libubsan1
  linux-libc-dev rpcsvc-proto pkgconf pkgconf-bin libpkgconf3 googletest "

# One space around every name, line breaks too, so a name at a line's end
# matches (libgcc-14-dev and libubsan1 slipped through before).
toolchain=" $(tr -s ' \n' '  ' <<< "$toolchain") "
apt-get update -qq
list=""
for p in $(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces \
             --no-enhances $wanted | grep -v '^[ <]' | sort -u); do
  case "$toolchain" in *" $p "*) ;; *) list="$list $p" ;; esac
done
cd "$out"
rm -f ./*.deb
apt-get download $list >/dev/null
echo "fetch_build_packages: $(ls ./*.deb | wc -l) packages, $(du -sh . | cut -f1), in $out"
