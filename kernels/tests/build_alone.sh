#!/usr/bin/env bash
# tprt built alone, as an outside project builds it against an installed
# tpaudit: installs tpaudit's build into a temporary prefix, copies kernels/
# out of tpaudit's tree (nothing of tpaudit's sources in reach), configures it
# with CMAKE_PREFIX_PATH=<prefix> and the CPU backend only, builds it, and
# runs its runtime tests there (test_tprt_train.py audits tprt with the
# installed tpaudit). Fails when it found tpaudit anywhere but in the prefix,
# when its build names tpaudit's source tree, or when no test ran.
# Usage: build_alone.sh TPAUDIT_BUILD_DIR KERNELS_SOURCE_DIR PYTHON
set -euo pipefail
build="$1"; src="$(cd "$2" && pwd)"; python="$3"
tpaudit_src="$(dirname "$src")"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $1"; [ -z "${2:-}" ] || cat "$2"; exit 1; }

cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
cp -r "$src" "$tmp/kernels"
cmake -S "$tmp/kernels" -B "$tmp/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" -DTPRT_WITH_CUDA=OFF \
  -DTPRT_PYTHON_EXE="$python" >"$tmp/cmake.log" 2>&1 || fail "configure" "$tmp/cmake.log"
found="tprt: tpaudit 0.1.0 from $tmp/prefix/lib/cmake/tpaudit"
grep -qF "$found" "$tmp/cmake.log" || fail "no '$found' line" "$tmp/cmake.log"
echo "ok configure: $found"
cmake --build "$tmp/build" -j 2 >"$tmp/build.log" 2>&1 || fail "build" "$tmp/build.log"
named="$(grep -rlF "$tpaudit_src/" "$tmp/build" --include=CMakeCache.txt --include='*.make' --include='*.cmake' || true)"
[ -z "$named" ] || fail "the build names tpaudit's source tree ($tpaudit_src) in: $named"
echo "ok build: $(cd "$tmp/build/bin" && echo *)"
(cd "$tmp/build" && ctest -L runtime --output-on-failure) >"$tmp/ctest.log" 2>&1 || fail "ctest" "$tmp/ctest.log"
grep -E "tests passed, 0 tests failed out of [1-9]" "$tmp/ctest.log" || fail "no test ran" "$tmp/ctest.log"
