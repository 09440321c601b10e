#!/usr/bin/env bash
# The binary wheel, end to end (ctest package_wheel, labels package and
# wheel): builds it with scripts/build_wheel.sh (pip wheel + auditwheel
# repair), then runs tests/package/test_wheel.py on a machine made to look
# like one without tpaudit's build packages (hide_dev.sh: libunwind, libdw,
# libelf, SQLite, the compression libraries, compilers, cmake, pkg-config
# and the CUDA toolkit hidden in a private mount namespace). That test
# installs the wheel into a fresh venv, with --target, --user and --prefix,
# and runs the demo's buggy and fixed runs through each install.
# Usage: test_wheel.sh BUILD_DIR PYTHON (the project venv's python, for torch)
set -euo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
build="$1" python="$2"
dist="$(mktemp -d)"
trap 'rm -rf "$dist"' EXIT
start=$(date +%s)
wheel="$(bash "$here/scripts/build_wheel.sh" "$dist" "$build/wheel-test/skbuild" | tail -n 1)"
echo "test_wheel: built $(basename "$wheel") ($(stat -c %s "$wheel") bytes) in $(($(date +%s) - start)) s"
TPAUDIT_WHEEL="$wheel" TPAUDIT_SOURCE_DIR="$here" \
  bash "$here/tests/package/hide_dev.sh" "$python" -m pytest -q -p no:cacheprovider -s \
  "$here/tests/package/test_wheel.py"
