#!/usr/bin/env bash
# Runs CMD on this machine as one without tpaudit's build packages: in a
# private mount namespace (unshare; as root, or as a user through a user
# namespace) every file of the libunwind, libdw/libelf (and libdebuginfod),
# SQLite and compression libraries, their headers and .pc files, the
# compilers, cmake and pkg-config, and the CUDA toolkit's folder are covered
# (/dev/null over a file, an empty tmpfs over a folder), so a program that
# still needed one fails to start. Only that namespace sees it; the machine
# is unchanged. Where no mount namespace can be made, CMD runs as it is and
# says so (exit 0 from this script means nothing about hiding then; the
# callers' ELF checks still hold).
# Usage: tests/package/hide_dev.sh CMD...
set -euo pipefail
if [ "${TPA_DEV_HIDDEN:-}" != 1 ]; then
  for how in "--mount" "--mount --map-root-user"; do
    # shellcheck disable=SC2086
    if unshare $how true 2>/dev/null; then
      exec unshare $how env TPA_DEV_HIDDEN=1 bash "$0" "$@"
    fi
  done
  echo "hide_dev: no mount namespace here (unshare refused): the build packages stay visible" >&2
  exec env TPA_DEV_HIDDEN=visible "$@"
fi

files=() dirs=()
add() { for f in "$@"; do [ -e "$f" ] && files+=("$(realpath "$f")"); done; return 0; }
libdirs=(/usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib /lib/x86_64-linux-gnu /lib64)
shopt -s nullglob
for d in "${libdirs[@]}"; do
  add "$d"/lib{unwind,dw,elf,debuginfod,sqlite3,lzma,bz2,zstd}[-.]* "$d"/pkgconfig/{libunwind,libdw,libelf,sqlite3}*.pc
done
add /usr/include/{libunwind,unwind,sqlite3,libelf,gelf,nlist,dwarf}*.h
for tool in cmake cc gcc c++ g++ clang ld pkg-config pkgconf nvcc; do add "$(command -v "$tool" || true)"; done
for d in /usr/include/elfutils /usr/local/cuda "${CUDA_HOME:-}"; do
  [ -n "$d" ] && [ -d "$d" ] && dirs+=("$(realpath "$d")")
done
mapfile -t files < <(printf '%s\n' "${files[@]}" | sort -u)
for f in "${files[@]}"; do mount --bind /dev/null "$f"; done
for d in "${dirs[@]}"; do mount -t tmpfs -o ro tpaudit-hidden "$d"; done
echo "hide_dev: ${#files[@]} files and ${#dirs[@]} folders hidden" >&2
exec "$@"
