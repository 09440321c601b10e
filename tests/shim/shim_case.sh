#!/bin/sh
# shim_case.sh - one shim test case: runs a host under LD_PRELOAD and checks
# its database with the sqlite3 CLI.  usage: shim_case.sh CASE SHIM BINDIR
set -u
case_name=$1 shim=$2 bin=$3 # [PYTHON]
work=$(mktemp -d "${TMPDIR:-/tmp}/tpaudit-shim-test.XXXXXX")
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
q() { sqlite3 "$1" "$2"; }
one_db() { set -- "$work"/out/*.db; [ $# -eq 1 ] && [ -f "$1" ] || fail "expected one db, got: $*"; db=$1; }
warn_count() { grep -c '^tpaudit: ' "$work/err" || true; }

case $case_name in
api)
  (cd "$work" && "$bin/shim_api_host" > "$work/o" 2> "$work/err") || fail "host without shim"
  [ -s "$work/err" ] && fail "output without shim: $(cat "$work/err")"
  [ -e "$work/tpaudit-out" ] && fail "files written without the shim"
  TPAUDIT_OUT="$work/out" LD_PRELOAD="$shim" "$bin/shim_api_host" loaded 2> "$work/err" || fail "host with shim"
  one_db
  for t in "run 1" "audit 1" "tensor 3" "ref 4" "event 6" "stack 2" "alloc 2" "api_call 0"; do
    set -- $t
    n=$(q "$db" "select count(*) from $1"); [ "$n" = "$2" ] || fail "table $1: $n rows, want $2"
  done
  [ "$(q "$db" 'select count(*)>0 from module where build_id is not null')" = 1 ] || fail "module table"
  [ "$(q "$db" 'pragma user_version')" = 3 ] || fail "user_version"
  [ "$(q "$db" 'pragma journal_mode')" = wal ] || fail "journal_mode"
  r=$(q "$db" "select complete,exit_status,rank,world_size,note,pid>0,argv from run")
  case $r in '1|0|1|4|api host|1|["'*'","loaded"]') ;; *) fail "run row: $r";; esac
  [ "$(q "$db" "select local_shape from tensor where key=100")" = "[12565,768]" ] || fail "local_shape"
  [ "$(q "$db" "select count(*) from event where stack_id is not null")" = 6 ] || fail "event stacks"
  [ "$(q "$db" "select end_ns is not null from audit")" = 1 ] || fail "audit end"
  ;;
threads)
  TPAUDIT_OUT="$work/out" LD_PRELOAD="$shim" "$bin/shim_threads" > "$work/o" 2> "$work/err" || fail "host"
  one_db
  ok=$(awk '{print $2}' "$work/o"); dropped=$(awk '{print $4}' "$work/o")
  rows=$(q "$db" "select count(*) from event"); r=$(q "$db" "select dropped_events, complete from run")
  [ "$rows" = "$ok" ] || fail "rows $rows != ok calls $ok"
  [ $((rows + dropped)) -eq 800000 ] || fail "rows $rows + dropped $dropped != 800000"
  if [ "$dropped" -eq 0 ]; then [ "$r" = "0|1" ] || fail "run $r"; else [ "$r" = "$dropped|0" ] || fail "run $r, dropped $dropped"; fi
  echo "stored $rows dropped $dropped"
  ;;
fork)
  TPAUDIT_OUT="$work/out" LD_PRELOAD="$shim" "$bin/shim_fork" 2> "$work/err" || fail "host"
  set -- "$work"/out/*.db; [ $# -eq 2 ] || fail "want 2 dbs: $*"
  pp=$(q "$1" "select pid from run"); p2=$(q "$2" "select pid from run")
  for d in "$1" "$2"; do
    [ "$(q "$d" "select complete, exit_status from run")" = "1|0" ] || fail "$d not complete"
    [ "$(q "$d" "pragma integrity_check")" = ok ] || fail "$d integrity"
  done
  a=$(q "$1" "select count(*) from event"); b=$(q "$2" "select count(*) from event")
  child=$(q "$2" "select ppid from run"); [ "$child" = "$pp" ] || { t=$a; a=$b; b=$t; child=$(q "$1" "select ppid from run"); [ "$child" = "$p2" ] || fail "no parent/child relation"; }
  [ "$a" = 15 ] && [ "$b" = 7 ] || fail "parent $a (want 15) child $b (want 7) events"
  ;;
kill9)
  : > "$work/o"
  TPAUDIT_OUT="$work/out" LD_PRELOAD="$shim" "$bin/shim_killed" > "$work/o" 2> "$work/err" &
  pid=$!
  i=0; while [ $i -lt 100 ] && [ "$(grep -c committed "$work/o" 2>/dev/null)" -lt 20 ]; do sleep 0.1; i=$((i+1)); done
  kill -9 $pid; wait $pid 2>/dev/null
  n=$(grep committed "$work/o" | tail -1 | awk '{print $2}'); [ -n "$n" ] || fail "never committed"
  one_db
  [ "$(q "$db" "pragma integrity_check")" = ok ] || fail "integrity"
  rows=$(q "$db" "select count(*) from event"); [ "$rows" -ge "$n" ] || fail "rows $rows < committed $n"
  [ "$(q "$db" "select complete, note from run")" = "0|killed host" ] || fail "run row of the killed run: $(q "$db" "select complete, note from run")"
  echo "committed $n stored $rows"
  ;;
unwritable)
  mkdir "$work/ro"; chmod 555 "$work/ro"
  dirs="$work/ro"
  if touch "$work/ro/probe" 2>/dev/null; then
    echo "permissions are not enforced for this user; checking only uncreatable dirs"; dirs=""
  fi
  : > "$work/file"
  for dir in $dirs "$work/file/sub" "$work/file"; do
    TPAUDIT_OUT="$dir" LD_PRELOAD="$shim" "$bin/shim_sqlite_host" "$work/host.db" 2> "$work/err"; rc=$?
    [ $rc -eq 0 ] || fail "exit status $rc"
    [ "$(warn_count)" = 1 ] || fail "want one tpaudit: line: $(cat "$work/err")"
    rm -f "$work/host.db"
  done
  ;;
fulldisk)
  TPAUDIT_OUT="$work/out" LD_PRELOAD="$shim" "$bin/shim_fsize" 300000 "$bin/shim_threads" > "$work/o" 2> "$work/err"; rc=$?
  [ $rc -eq 0 ] || fail "exit status $rc"
  [ "$(warn_count)" = 1 ] || fail "want one tpaudit: line: $(cat "$work/err")"
  grep -q 'disabled' "$work/err" || fail "no disable line"
  ;;
badenv)
  for kv in TPAUDIT_CUPTI=maybe TPAUDIT_PYTHON=yes TPAUDIT_STACK_DEPTH=lots TPAUDIT_STACK_DEPTH=999 \
            TPAUDIT_AUDIT=1,x TPAUDIT_AUDIT=5-2 TPAUDIT_LOG=loud TPAUDIT_OUT=; do
    seen=$(cd "$work" && env "$kv" LD_PRELOAD="$shim" env 2>/dev/null | grep "^${kv%%=*}="); [ "$seen" = "$kv" ] || fail "$kv: the shim changed it to '$seen'"
    if [ "$kv" = TPAUDIT_OUT= ]; then
      (cd "$work" && env TPAUDIT_OUT= LD_PRELOAD="$shim" "$bin/shim_sqlite_host" "$work/host.db" 2> "$work/err"); rc=$?
    else
      env "$kv" TPAUDIT_OUT="$work/out" LD_PRELOAD="$shim" "$bin/shim_sqlite_host" "$work/host.db" 2> "$work/err"; rc=$?
    fi
    [ $rc -eq 0 ] || fail "$kv: exit status $rc"
    [ "$(warn_count)" = 1 ] || fail "$kv: want one tpaudit: line: $(cat "$work/err")"
    rm -f "$work/host.db"
  done
  [ "$(ls "$work"/out/*.db | wc -l)" -ge 7 ] || fail "bad values must fall back to defaults and still record"
  ;;
sqlitehost)
  TPAUDIT_OUT="$work/out" LD_PRELOAD="$shim" "$bin/shim_sqlite_host" "$work/host.db" 2> "$work/err" || fail "host"
  [ "$(q "$work/host.db" "select x from t")" = 42 ] || fail "host db"
  one_db
  [ "$(q "$db" "select count(*) from event")" = 1 ] || fail "our db"
  ;;
sigterm)
  TPAUDIT_OUT="$work/out" LD_PRELOAD="$shim" "$bin/shim_sqlite_host" "$work/host.db" wait-term > "$work/o" 2> "$work/err" &
  pid=$!
  i=0; while [ $i -lt 100 ] && ! grep -q ready "$work/o"; do sleep 0.05; i=$((i+1)); done
  kill -TERM $pid; wait $pid; rc=$?
  [ $rc -eq 7 ] || fail "exit status $rc, want 7"
  grep -q "host handler ran" "$work/o" || fail "host handler did not run"
  one_db
  [ "$(q "$db" "select count(*) from event")" = 1 ] || fail "event not flushed"
  [ "$(q "$db" "select complete, exit_status from run")" = "1|7" ] || fail "run $(q "$db" 'select complete, exit_status from run')"
  ;;
sigdefault)
  TPAUDIT_OUT="$work/out" LD_PRELOAD="$shim" "$bin/shim_killed" > "$work/o" 2> "$work/err" &
  pid=$!
  i=0; while [ $i -lt 100 ] && ! grep -q committed "$work/o"; do sleep 0.05; i=$((i+1)); done
  kill -TERM $pid; wait $pid; rc=$?
  [ $rc -eq 143 ] || fail "exit status $rc, want 143 (SIGTERM)"
  one_db
  rows=$(q "$db" "select count(*) from event"); n=$(grep committed "$work/o" | tail -1 | awk '{print $2}')
  [ "$rows" -ge "$n" ] || fail "rows $rows < $n"
  ;;
python)
  py=${4:-python3}
  # a process's database starts with its first record: each run records one
  rec='import ctypes, os; ctypes.CDLL(os.environ["TPAUDIT_LIBRARY"]).tpaudit_v1_audit_begin(b"x", 0)'
  for flags in -I -IE "-W ignore -E" -sE; do
    TPAUDIT_OUT="$work/out" LD_PRELOAD="$shim" "$py" $flags -c "$rec" 2> "$work/err" </dev/null || fail "python $flags"
    [ "$(warn_count)" = 1 ] && grep -q 'python ownership probe off (python -I/-E ignores PYTHONPATH)' "$work/err" || fail "$flags: $(cat "$work/err")"
  done
  [ "$(q "$(ls "$work"/out/*.db | head -1)" "select python from run")" = "off: -I/-E" ] || fail "run.python"
  TPAUDIT_PYTHON=off TPAUDIT_OUT="$work/out2" LD_PRELOAD="$shim" "$py" -c "$rec" 2> "$work/err" || fail "python off"
  [ "$(warn_count)" = 1 ] || fail "TPAUDIT_PYTHON=off: $(cat "$work/err")"
  [ "$(q "$work"/out2/*.db "select python, complete, exit_status from run")" = "off: TPAUDIT_PYTHON=off|1|0" ] || fail "python off run row"
  out=$(TPAUDIT_OUT="$work/out3" LD_PRELOAD="$shim" "$py" -c 'import os; print(os.environ["TPAUDIT_LIBRARY"])' 2>/dev/null)
  [ "$out" = "$(readlink -f "$shim")" ] || fail "TPAUDIT_LIBRARY=$out"
  ;;
*) fail "unknown case $case_name";;
esac
echo "PASS: $case_name"
