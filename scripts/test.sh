#!/usr/bin/env bash
# The test command: installs what is missing, builds tpaudit twice (a normal
# build for every suite, and an ASan/UBSan build for the analyzer and unit
# suites) and runs ctest on both, each test once (the analyzer tests labelled
# once_sanitized on the sanitized build only). GPU tests skip here with their reason;
# scripts/gpu_all.sh runs them on a GPU machine. Ends with ctest's summary.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
python="$(bash "$here/scripts/setup.sh" | tail -n 1)"
jobs="$(nproc)"

bash "$here/scripts/build.sh" "$python" "$here/build"
bash "$here/scripts/build.sh" "$python" "$here/build-asan" -DTPAUDIT_SANITIZE=ON -DTPAUDIT_WITH_CUDA=OFF

status=0
echo "== sanitized build: unit and analyzer suites"
(cd "$here/build-asan" && ctest -L 'unit|analyzer' -j "$jobs" --output-on-failure) || status=1
echo "== full build: all suites"
if ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1'; then
  echo "gpu tests will skip: no NVIDIA driver (libcuda.so.1) on this machine; scripts/gpu_all.sh runs them on a GPU machine"
fi
# The analyzer tests labelled once_sanitized ran above on the sanitized
# build, the same tests on the same sources: not run twice.
(cd "$here/build" && ctest -j "$jobs" -LE once_sanitized --output-on-failure) || status=1
exit $status
