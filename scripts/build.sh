#!/usr/bin/env bash
# Configures and builds tpaudit into a build directory (default ./build).
# Usage: scripts/build.sh PYTHON [BUILD_DIR] [extra cmake args...]
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
python="$1"; shift
build="${1:-$here/build}"; shift || true
cmake -S "$here" -B "$build" -DTPAUDIT_PYTHON_EXE="$python" "$@" >/dev/null
cmake --build "$build" -j "$(nproc)" >/dev/null
