#!/usr/bin/env bash
# Runs pytest in the venv of an older torch release, a row of the torch
# matrix (docs/CI.md), or skips (exit 77, ctest's SKIP_RETURN_CODE) with the
# reason when scripts/setup.sh could not make that venv.
# Usage: torch_matrix.sh NAME PYTHON PYTEST_ARGS...
name="$1" python="$2"; shift 2
if [ ! -x "$python" ]; then
  echo "skipped: no $name venv ($python): scripts/setup.sh makes it (scripts/setup_pinned.sh $name)"
  exit 77
fi
exec "$python" -m pytest "$@"
