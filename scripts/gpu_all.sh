#!/usr/bin/env bash
# Builds tpaudit and runs every GPU test and benchmark in one call, on a
# machine with an NVIDIA GPU (the project's device runs). Build packages the
# machine lacks come as Debian .deb files in .carry/debs (scripts/device_prep.sh
# fetches them) and are unpacked into a private sysroot. Results and logs go
# under $OUT (default ./gpu-out). Each part is a script of its own
# (scripts/<part>.sh, tprt's in kernels/scripts/); a part that fails is
# reported and the others still run. Ends with a summary table.
set -uo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
export OUT="${OUT:-$here/gpu-out}"
mkdir -p "$OUT"
cd "$here"
if [ -d .carry/debs ] && ! pkg-config --exists libunwind sqlite3 libdw 2>/dev/null; then
  sysroot=/tmp/tpaudit-sysroot
  mkdir -p "$sysroot"
  for deb in .carry/debs/*.deb; do dpkg -x "$deb" "$sysroot"; done
  for pc in "$sysroot"/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc "$sysroot"/usr/share/pkgconfig/*.pc; do
    [ -f "$pc" ] && sed -i "s#^prefix=/usr#prefix=$sysroot/usr#" "$pc"
  done
  # Debian's libdw/libelf/libunwind .so links are relative; keep the real libs reachable.
  export PKG_CONFIG_PATH="$sysroot/usr/lib/x86_64-linux-gnu/pkgconfig:$sysroot/usr/share/pkgconfig:${PKG_CONFIG_PATH:-}"
  export LD_LIBRARY_PATH="$sysroot/usr/lib/x86_64-linux-gnu:$sysroot/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
  export LIBRARY_PATH="$sysroot/usr/lib/x86_64-linux-gnu:$sysroot/lib/x86_64-linux-gnu:${LIBRARY_PATH:-}"
  export CPATH="$sysroot/usr/include:${CPATH:-}"
  export PATH="$sysroot/usr/bin:$PATH"
fi
[ -f scripts/device_env.sh ] && source scripts/device_env.sh
export TPAUDIT_GPU_BUILD="${TPAUDIT_GPU_BUILD:-$here/build-gpu}"
echo "== build"
# TPAUDIT_GPU_CMAKE_ARGS: extra configure options (-DTPAUDIT_TOOL_ONLY=ON for parts that need only the tool).
cmake -S . -B "$TPAUDIT_GPU_BUILD" -DTPAUDIT_PYTHON_EXE="$(command -v python3)" ${TPAUDIT_GPU_CMAKE_ARGS:-} > "$OUT/build.log" 2>&1 &&
  cmake --build "$TPAUDIT_GPU_BUILD" -j 16 >> "$OUT/build.log" 2>&1
build_rc=$?
tail -n 20 "$OUT/build.log"
summary=("build: exit $build_rc")
# TPAUDIT_GPU_PARTS picks a subset (default: all).
for part in ${TPAUDIT_GPU_PARTS:-gpu_ctest gpu_bench gpu_cupti gpu_tprt gpu_multi gpu_frameworks gpu_colossal gpu_leaks gpu_compile_guard}; do
  script="scripts/$part.sh"
  [ -f "$script" ] || script="kernels/scripts/$part.sh" # tprt's parts (gpu_tprt)
  [ -f "$script" ] || { summary+=("$part: not present"); continue; }
  start=$(date +%s)
  bash "$script" > "$OUT/$part.log" 2>&1
  rc=$?
  summary+=("$part: exit $rc in $(( $(date +%s) - start ))s")
  tail -n 30 "$OUT/$part.log"
done
echo "== GPU summary"
printf '%s\n' "${summary[@]}" | tee "$OUT/summary.txt"
