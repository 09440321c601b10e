#!/usr/bin/env bash
# The optional second venv of the ColossalAI tests (tests/frameworks), which
# need transformers 4.51.3 where the main lock has 5.17. It is a venv of the
# main venv's interpreter that sees the main venv's packages (torch and the
# rest) behind its own, with requirements-colossal.lock installed into it
# with --no-deps; cached outside the clone, keyed by both lock files.
# Usage: setup_colossal.sh MAIN_VENV_PYTHON   makes it if missing, prints its python
#        (scripts/setup.sh calls it so, holding the cache's setup lock)
#        setup_colossal.sh --path               prints where its python is (makes nothing)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
lock="$here/requirements-colossal.lock"
key="$(cat "$lock" "$here/requirements.lock" | sha256sum | cut -c1-16)"
cache="${TPAUDIT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tpaudit}"
venv="$cache/venv-colossal-$key"
if [ "${1:-}" = --path ]; then echo "$venv/bin/python"; exit 0; fi
main_python="${1:?usage: setup_colossal.sh MAIN_VENV_PYTHON | --path}"

if [ ! -f "$venv/.complete" ]; then
  echo "setup: creating $venv (colossalai and transformers 4.51.3 over the main venv)" >&2
  rm -rf "$venv"
  "$("$main_python" -c 'import sys; print(sys._base_executable)')" -m venv "$venv"
  site_of() { "$1" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])"; }
  # After the venv's own site-packages, so its transformers and hub win.
  echo "import site; site.addsitedir('$(site_of "$main_python")')" > "$(site_of "$venv/bin/python")/zz-tpaudit-main-venv.pth"
  BUILD_EXT=0 "$venv/bin/pip" install -q --disable-pip-version-check --no-deps --ignore-installed -r "$lock" >&2
  "$venv/bin/python" -c "
import transformers, colossalai.booster.plugin
assert transformers.__version__ == '4.51.3', transformers.__version__" >&2
  touch "$venv/.complete"
fi
echo "$venv/bin/python"
