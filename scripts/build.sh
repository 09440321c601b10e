#!/usr/bin/env bash
# Configures and builds tpaudit into a build directory (default ./build):
# everything (tool, tprt, tests, benchmarks) unless the extra cmake args say
# -DTPAUDIT_TOOL_ONLY=ON (scripts/demo.sh: the tool alone).
# Usage: scripts/build.sh PYTHON [BUILD_DIR] [extra cmake args...]
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
python="$1"; shift
build="${1:-$here/build}"; shift || true
# TPAUDIT_TOOL_ONLY given each time, so a demo's tool-only configure does not stay in the cache.
cmake -S "$here" -B "$build" -DTPAUDIT_PYTHON_EXE="$python" -DTPAUDIT_TOOL_ONLY=OFF "$@" >/dev/null
cmake --build "$build" -j "$(nproc)" >/dev/null
