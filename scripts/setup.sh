#!/usr/bin/env bash
# Installs what tpaudit needs on a fresh Debian/Ubuntu machine: the build and
# test packages (apt-get) and a Python venv with the pinned torch,
# transformers, pytest and the training frameworks tested against, cached
# outside the clone and keyed by the lock file, the ColossalAI tests'
# second venv (scripts/setup_colossal.sh) and the venvs of older torch
# releases (scripts/setup_pinned.sh: the seed's ColossalAI 0.3.6 with torch
# 2.2.1, and torch 2.6). Prints the main venv's python path on its last line.
# Safe to rerun.
# Usage: setup.sh          everything the tests need (scripts/test.sh)
#        setup.sh --demo   only what scripts/demo.sh needs: the build packages
#                          and the main venv's torch (its first stage; a later
#                          setup.sh adds the rest of the lock to that venv)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
case "${1:-}" in
  "") demo_only=0 ;;
  --demo) demo_only=1 ;;
  *) echo "setup: unknown option '$1' (usage: setup.sh [--demo])" >&2; exit 2 ;;
esac

packages=(build-essential cmake pkg-config libsqlite3-dev sqlite3 libunwind-dev libdw-dev
          libelf-dev python3-venv)
# The tests' own: the HTML report's browser checks and the JUnit schema check.
((demo_only)) || packages+=(chromium libxml2-utils)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  sudo_cmd=""; [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q "${missing[@]}" >&2
fi

lock="$here/requirements.lock"
key="$(sha256sum "$lock" | cut -c1-16)"
cache="${TPAUDIT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tpaudit}"
venv="$cache/venv-$key"
mkdir -p "$cache"
# One setup at a time per cache: a second one waits here instead of removing
# the venv the first is still installing into.
exec 9>"$cache/.setup.lock"
flock 9
# Two stages: torch and numpy (torch warns without it) with what they need,
# at the lock's versions (all the demo needs; marked .torch-complete), then
# the rest of the lock (.complete).
if [ ! -f "$venv/.complete" ] && [ ! -f "$venv/.torch-complete" ]; then
  echo "setup: creating $venv (first run downloads torch, a few GB)" >&2
  rm -rf "$venv"
  mkdir -p "$cache"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -c "$lock" torch numpy >&2
  touch "$venv/.torch-complete"
fi
if ((demo_only)); then
  echo "$venv/bin/python"
  exit 0
fi
if [ ! -f "$venv/.complete" ]; then
  echo "setup: completing $venv (transformers, pytest, the frameworks)" >&2
  # Everything but deepspeed first; deepspeed's sdist imports torch to build,
  # so it is built without isolation and without compiled ops afterwards.
  grep -v '^deepspeed==' "$lock" > "$cache/lock-$key.txt"
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$cache/lock-$key.txt" >&2
  DS_BUILD_OPS=0 "$venv/bin/pip" install -q --disable-pip-version-check --no-deps --no-build-isolation \
    "$(grep '^deepspeed==' "$lock")" >&2
  touch "$venv/.complete"
fi
# The optional second venv of the ColossalAI tests (requirements-colossal.lock);
# without it those tests skip and say why. TPAUDIT_NO_COLOSSAL=1 leaves it out.
if [ "${TPAUDIT_NO_COLOSSAL:-0}" != 1 ]; then
  bash "$here/scripts/setup_colossal.sh" "$venv/bin/python" >/dev/null ||
    echo "setup: the ColossalAI venv could not be made; the ColossalAI tests will skip" >&2
fi
# The optional venvs of older torch releases (requirements-seed.lock,
# requirements-torch26.lock; docs/CI.md); without one its tests skip and say
# why. TPAUDIT_NO_OLDER_TORCH=1 leaves them out.
if [ "${TPAUDIT_NO_OLDER_TORCH:-0}" != 1 ]; then
  for pinned in seed torch26; do
    bash "$here/scripts/setup_pinned.sh" "$pinned" "$venv/bin/python" >/dev/null ||
      echo "setup: the $pinned venv (requirements-$pinned.lock) could not be made; its tests will skip" >&2
  done
fi
echo "$venv/bin/python"
