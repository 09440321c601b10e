#!/usr/bin/env bash
# The binary wheel on a GPU machine that has PyTorch's CUDA wheels and none
# of tpaudit's build packages (no libunwind, libdw or SQLite): installs the
# wheel with pip alone (no .deb, no sysroot), traces examples/finetune.py on
# the GPU through `tpaudit run` in the buggy and the fixed order (report
# with device memory by library, gate 1 then 0), then the buggy run again
# with the CUDA toolkit and the build packages hidden (hide_dev.sh), where
# CUPTI can only come from torch's own nvidia package. Prints what it
# finds; the logs and reports go to OUT_DIR (docs/GPU_RUNS.md).
# Usage: tests/package/gpu_wheel.sh WHEEL OUT_DIR [PYTHON]
set -uo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
wheel="$(realpath "$1")" out="$(realpath "$2")" python="${3:-python3}"
finetune="$here/examples/finetune.py"
work="$(mktemp -d)"
cd "$work" || exit 1

echo "== machine: $(. /etc/os-release && echo "$PRETTY_NAME"), $(ldd --version | head -n 1)"
echo "   build packages in the loader's cache: $(ldconfig -p | grep -cE 'libunwind\.so|libdw\.so|libsqlite3\.so') (libunwind, libdw, libsqlite3)"
echo "   $("$python" -c 'import torch; print("torch", torch.__version__, "cuda", torch.cuda.is_available())')"
echo "   CUDA toolkit: $(ls -d /usr/local/cuda* 2>/dev/null | tr '\n' ' ')LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
echo "   libcuda: $(ldconfig -p | grep -m1 'libcuda\.so\.1' | sed 's/.*=> //')"
site="$("$python" -c 'import torch, os; print(os.path.dirname(os.path.dirname(torch.__file__)))')"
echo "   torch's CUPTI: $(ls "$site"/nvidia/*/lib/libcupti.so* 2>/dev/null | tr '\n' ' ')"

start=$(date +%s%N)
"$python" -m pip install -q --no-index --no-deps --disable-pip-version-check --target "$work/site" "$wheel" || exit 1
echo "== pip install --target: $((($(date +%s%N) - start) / 1000000)) ms, $(basename "$wheel")"
export PYTHONPATH="$work/site"
tpaudit=("$python" -m tpaudit)
ldd "$work"/site/tpaudit/_bin/tpaudit "$work"/site/tpaudit/_lib/libtpaudit.so | grep -E "not found|tpaudit.libs" | sed 's/^/   /'

status=0
for order in buggy fixed; do
  TPAUDIT_LOG=info "${tpaudit[@]}" run -o "$order" -- "$python" "$finetune" --order "$order" >"$out/$order.log" 2>&1
  grep -E "CUPTI from|verdict" "$out/$order.log" | sed "s/^/   $order: /"
  "${tpaudit[@]}" report "$order" >"$out/$order-report.txt" 2>&1
  grep -E "cupti|device memory by library" "$out/$order-report.txt" | sed "s/^/   $order: /"
  "${tpaudit[@]}" gate --max-retained 0 "$order" >/dev/null
  gate=$?
  echo "   $order: gate $gate"
  [ "$order" = buggy ] && [ "$gate" != 1 ] && status=1
  [ "$order" = fixed ] && [ "$gate" != 0 ] && status=1
done
"${tpaudit[@]}" report --format html -o "$out/buggy-report.html" buggy

echo "== again with the CUDA toolkit and the build packages hidden"
bash "$here/tests/package/hide_dev.sh" env TPAUDIT_LOG=info "${tpaudit[@]}" run -o hidden -- \
  "$python" "$finetune" --order buggy >"$out/hidden.log" 2>&1
grep -E "hide_dev|CUPTI from|verdict" "$out/hidden.log" | sed 's/^/   hidden: /'
"${tpaudit[@]}" report hidden 2>&1 | grep -E "cupti|device memory by library" | sed 's/^/   hidden: /'
"${tpaudit[@]}" gate --max-retained 0 hidden >/dev/null
echo "   hidden: gate $? (1 expected)"
exit $status
