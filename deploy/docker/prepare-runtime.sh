#!/bin/sh
# Prepares the infergate runtime image's root file system: installs the
# runtime packages (when a package list is given) and creates the
# unprivileged `infergate` user (uid/gid 10001, the Deployment's runAsUser)
# and the mount points the Deployment uses (models, state, token and TLS
# Secrets). Run as root inside the image:
# by deploy/docker/Dockerfile, and by tests/container/image_test.sh in the
# root file system it builds with mmdebstrap.
#   prepare-runtime.sh [runtime-packages.txt]
set -eu
if [ $# -ge 1 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update
  grep -v '^#' "$1" | xargs apt-get install -y --no-install-recommends
  rm -rf /var/lib/apt/lists/*
fi
groupadd --system --gid 10001 infergate
useradd --system --uid 10001 --gid infergate --home-dir /nonexistent --shell /usr/sbin/nologin infergate
mkdir -p /models /var/lib/infergate /etc/infergate/tokens /etc/infergate/tls
chown infergate:infergate /models /var/lib/infergate
