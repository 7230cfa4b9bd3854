#!/usr/bin/env bash
# make demo: text generation on a small random-weight demo model.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! ./build/bin/qhx --help | grep -q '^  generate'; then
  echo "demo: the build is ready (build/bin/qhx), but text generation is not built yet." >&2
  exit 1
fi
