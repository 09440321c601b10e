#!/usr/bin/env bash
# An out-of-tree consumer against an installed prefix: installs the build
# into a temporary prefix, moves it (the .pc and CMake config are
# relocatable), then builds consumer/consumer.c once through pkg-config and
# once through find_package(tpaudit), and runs each without and with the
# installed shim preloaded.
# Usage: test_consumer.sh BUILD_DIR CONSUMER_SOURCE_DIR C_COMPILER
set -euo pipefail
build="$1"; src="$2"; cc="$3"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/installed" >/dev/null
mv "$tmp/installed" "$tmp/prefix"
prefix="$tmp/prefix"

check() { # check LABEL PROGRAM: abi 0 alone, abi 1 with the shim, which writes a database
  local out
  out="$("$2")"
  [ "$out" = "tpaudit abi 0" ] || { echo "FAIL $1 without the shim: '$out'"; exit 1; }
  out="$(LD_PRELOAD="$shim" TPAUDIT_OUT="$tmp/out-$1" "$2")"
  [ "$out" = "tpaudit abi 1" ] || { echo "FAIL $1 with the shim: '$out'"; exit 1; }
  ls "$tmp/out-$1"/*.db >/dev/null || { echo "FAIL $1: no database written"; exit 1; }
  echo "ok $1: $out under the shim"
}

echo "== pkg-config"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
shim="$(pkg-config --variable=shim tpaudit)"
[ -f "$shim" ] || { echo "FAIL: the .pc's shim variable names no file: $shim"; exit 1; }
# shellcheck disable=SC2046  # word splitting of the flags is wanted
"$cc" -std=c11 -Wall -Wextra -Werror $(pkg-config --cflags tpaudit) "$src/consumer.c" \
  -o "$tmp/consumer-pc" $(pkg-config --libs tpaudit)
check pkg-config "$tmp/consumer-pc"

echo "== find_package"
unset PKG_CONFIG_PATH
cmake -S "$src" -B "$tmp/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="$cc" \
  -DCMAKE_C_FLAGS="-Wall -Wextra -Werror" >"$tmp/cmake.log" || { cat "$tmp/cmake.log"; exit 1; }
grep "tpaudit 0" "$tmp/cmake.log"
cmake --build "$tmp/cmake-build" >/dev/null
check find_package "$tmp/cmake-build/consumer"
