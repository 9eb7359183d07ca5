#!/bin/sh
# Runs infergate as PID 1's only child-free process so SIGTERM reaches it
# directly (exec). Flags come from INFERGATE_* environment variables (a
# ConfigMap in Kubernetes) and from the container's args.
set -eu
if [ "${INFERGATE_DEMO_MODELS:-0}" = "1" ] && [ ! -d "${INFERGATE_MODEL_REPOSITORY}/mlp" ]; then
  make-demo-models "${INFERGATE_MODEL_REPOSITORY}"
fi
exec infergate "$@"
