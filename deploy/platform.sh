# Sourced by quickstart.sh and tests/run.sh: whether this host builds
# infergate natively. Debian 13 (trixie) or later does, and so does the
# Debian 13 root that deploy/debian13-root.sh runs commands in; any other
# host builds in that root. INFERGATE_NATIVE=1 builds natively anyway, for a
# host that has LibTorch >= 2.6 and the other libraries of
# deploy/packages.txt installed by other means (CMAKE_PREFIX_PATH pointing
# at them); deploy/install-deps.sh then installs nothing.
infergate_builds_natively() {
  [ "${INFERGATE_IN_DEBIAN13_ROOT:-0}" = 1 ] && return 0
  [ "${INFERGATE_NATIVE:-0}" = 1 ] && return 0
  [ -r /etc/os-release ] || return 1
  local id version
  id=$(. /etc/os-release && echo "${ID:-}")
  version=$(. /etc/os-release && echo "${VERSION_ID:-}")
  # Debian testing and unstable carry no VERSION_ID; they are newer than 13.
  [ "$id" = debian ] && { [ -z "$version" ] || [ "${version%%.*}" -ge 13 ]; }
}
