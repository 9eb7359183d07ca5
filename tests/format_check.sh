#!/usr/bin/env bash
# The C++ files are in the project's style (.clang-format, checked by
# Debian's clang-format-19). Lists each file clang-format would change, with
# its first differing lines, and fails if there is any; fix one with
#   clang-format-19 -i FILE
#
#   tests/format_check.sh             every tracked .h and .cc
#   tests/format_check.sh REV         only those changed since REV (and
#                                     those changed or new in the work tree)
# A missing clang-format fails: a check that cannot run is not a pass
# (tests/run.sh installs it with the test packages).
set -euo pipefail
cd "$(dirname "$0")/.."
format="${CLANG_FORMAT:-clang-format-19}"
command -v "$format" >/dev/null ||
  { echo "format: $format is not installed (deploy/packages.txt [test])" >&2; exit 1; }
if [ $# -gt 0 ]; then
  files=$( (git diff --name-only --diff-filter=d "$1" -- '*.h' '*.cc'; git diff --name-only --diff-filter=d -- '*.h' '*.cc'
    git ls-files --others --exclude-standard -- '*.h' '*.cc') | sort -u)
else
  files=$(git ls-files -- '*.h' '*.cc')
fi
[ -n "$files" ] || { echo "format: no C++ file to check"; exit 0; }
# Generated and third-party-shaped files are not ours to style: none today.
bad=$(echo "$files" | xargs -P "$(nproc)" -n 16 "$format" --dry-run 2>&1 | sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: .*-Wclang-format-violations.*/\1/p' | sort -u)
if [ -n "$bad" ]; then
  echo "format: these files are not in the style of .clang-format (clang-format-19 -i FILE fixes each):" >&2
  for f in $bad; do
    echo "== $f" >&2
    "$format" "$f" | diff -u "$f" - | sed -n '3,14p' >&2 || true
  done
  exit 1
fi
echo "format: $(echo "$files" | wc -l) C++ files in the style of .clang-format"
