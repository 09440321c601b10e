#!/usr/bin/env bash
# The venvs of the older torch releases the tests also run on, each from its
# own lock, with its own packages (it does not see the main venv's):
#   seed     requirements-seed.lock: colossalai 0.3.6, torch 2.2.1 and
#            transformers 4.36.2, the seed bug's releases
#            (tests/frameworks/test_seed_colossal.py, the torch matrix's 2.2 row)
#   torch26  requirements-torch26.lock: torch 2.6.0, transformers 4.51.3
#            (the torch matrix's middle row)
# Cached outside the clone under venv-NAME-<key>, keyed by the lock file; made
# from the main venv's interpreter.  colossalai, published as source only, is
# built without its CUDA extensions.
# Usage: setup_pinned.sh NAME MAIN_VENV_PYTHON   makes it if missing, prints its python
#        (scripts/setup.sh calls it so, holding the cache's setup lock)
#        setup_pinned.sh NAME --path              prints where its python is (makes nothing)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
name="${1:?usage: setup_pinned.sh seed|torch26 MAIN_VENV_PYTHON | --path}"
lock="$here/requirements-$name.lock"
[ -f "$lock" ] || { echo "setup_pinned.sh: no lock file $lock" >&2; exit 2; }
key="$(sha256sum "$lock" | cut -c1-16)"
cache="${TPAUDIT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tpaudit}"
venv="$cache/venv-$name-$key"
if [ "${2:-}" = --path ]; then echo "$venv/bin/python"; exit 0; fi
main_python="${2:?usage: setup_pinned.sh NAME MAIN_VENV_PYTHON | --path}"

if [ ! -f "$venv/.complete" ]; then
  echo "setup: creating $venv (torch $(sed -n 's/^torch==//p' "$lock") and its CUDA wheels, a few GB)" >&2
  rm -rf "$venv"
  "$("$main_python" -c 'import sys; print(sys._base_executable)')" -m venv "$venv"
  BUILD_EXT=0 CUDA_EXT=0 "$venv/bin/pip" install -q --disable-pip-version-check --no-deps -r "$lock" >&2
  "$venv/bin/python" -c "
import importlib.metadata as m, sys
for line in open(sys.argv[1]):
    if '==' in line and not line.startswith('#'):
        pkg, want = line.strip().split('==')
        assert m.version(pkg).split('+')[0] == want, (pkg, m.version(pkg), want)
import torch, transformers" "$lock" >&2
  touch "$venv/.complete"
fi
echo "$venv/bin/python"
