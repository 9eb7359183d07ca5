#!/usr/bin/env bash
# Every source file the build uses is in git. A file that .gitignore hides
# (a folder named like a runtime output, say) builds here and is missing from
# every fresh clone; CI then fails at configure. Lists each such file and
# fails if there is any. Outside a git work tree (an unpacked archive) it
# cannot check, and says so by failing: a check that cannot run is not a
# pass (CI and tests/run.sh always run in a clone).
set -euo pipefail
cd "$(dirname "$0")/.."
git rev-parse --is-inside-work-tree >/dev/null 2>&1 ||
  { echo "sources: not a git work tree, so whether every source file is tracked cannot be checked" >&2; exit 1; }
sources=$(git ls-files --others --ignored --exclude-standard -- \
  '*.h' '*.cc' '*.proto' '*.py' '*.sh' 'CMakeLists.txt' '*/CMakeLists.txt' |
  grep -v -E '^(build[^/]*|deploy/k8s/validate/node_modules)/' || true)
if [ -n "$sources" ]; then
  echo "source files .gitignore hides from git (a fresh clone would lack them):" >&2
  echo "$sources" >&2
  exit 1
fi
echo "sources: every source file is tracked"
