"""Judges one GPU leak case of scripts/gpu_leaks.sh beside its twin and prints
its figures: the memory_growth finding (holder, line, rate; the rate within
5% of the per-step rise of the tensors the loop keeps, where its `kept`
lines count them, else of memory_allocated()'s over the same steps), the ledger's
"held by" row against the device growth `torch.cuda.memory_allocated()`
shows (leak minus twin at the judged step, within 5%), the ledger's owners
against the measured total (CUPTI's live device bytes in the JSON report, the
probe's memory_reserved() in each audit's rows: within 1%), and the twin:
no finding, audits taken, its ledger adding up.

    python judge.py LABEL CASE LEAK_OUT LEAK_LOG TWIN_OUT TWIN_LOG

LEAK_OUT/TWIN_OUT are `tpaudit run -o` directories, the LOGs the programs'
stdout (tests/gpu/leaks/gpt2_leaks.py: `alloc <step> <allocated> <reserved>`
lines).  Prints `check: <what>: PASS|FAIL (...)` lines and a table row; exits 1
when any check failed."""
import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
GIB, MIB = float(1 << 30), float(1 << 20)
# case: (words of the holder path, the `# made:` markers the user's line may be at, the scenario script)
EXPECTED = {
    "logits": (["__main__.kept"], {"forward"}, "gpt2_leaks.py"),
    "hook": (["acts"], {"forward"}, "gpt2_leaks.py"),
    "total_loss": (["total_loss"], {"forward", "total_loss"}, "gpt2_leaks.py"),
    "module": (["__main__.kept"], {"module"}, "gpt2_loops.py"),
    "eval": (["__main__.kept"], {"eval"}, "gpt2_loops.py"),
    "eval_function": (["__main__.kept"], {"eval_function"}, "gpt2_loops.py"),
    "generate": (["__main__.kept"], {"generate"}, "gpt2_loops.py"),
}
failed = []


def check(what, ok, detail=""):
    print(f"check: {what}: {'PASS' if ok else 'FAIL'}{f' ({detail})' if detail else ''}")
    if not ok:
        failed.append(what)


def report(tpaudit, out):
    r = subprocess.run([tpaudit, "report", "--format", "json", str(out)], capture_output=True, text=True)
    return json.loads(r.stdout) if r.returncode == 0 and r.stdout else {"runs": [], "findings": []}


def kept_bytes(log):
    """{step: bytes of the tensors the loop keeps} from a scenario's `kept` lines (none: {})."""
    found = {}
    for line in Path(log).read_text(errors="replace").splitlines():
        m = re.match(r"kept (\d+) (\d+)$", line)
        if m:
            found[int(m.group(1))] = int(m.group(2))
    return found


def allocs(log):
    """{step: (allocated, reserved)} from a scenario's stdout; step "end":
    after the loop, its last output dropped (what the exit audit sees)."""
    found = {}
    for line in Path(log).read_text(errors="replace").splitlines():
        m = re.match(r"alloc (\d+) (\d+) (\d+)$", line)
        if m:
            found[int(m.group(1))] = (int(m.group(2)), int(m.group(3)))
        m = re.match(r"alloc_end (\d+) (\d+)$", line)
        if m:
            found["end"] = (int(m.group(1)), int(m.group(2)))
    return found


def held_at_audit(out, path, step):
    """(the holder's bytes on the GPU in the ledger of the last audit taken at
    `step`, whether that audit is the run's last) from the databases."""
    for db in sorted(Path(out).glob("*.db")):
        con = sqlite3.connect(str(db))
        audit, last = con.execute("select max(id), (select max(id) from audit where end_ns is not null) from audit"
                                  " where step=? and end_ns is not null", (step,)).fetchone()
        if audit is None:
            continue
        held = con.execute("select sum(bytes) from ledger where audit_id=? and owner=? and device like 'cuda%'",
                           (audit, path)).fetchone()[0]
        return held, audit == last
    return None, False


def made_lines(script, markers):
    lines = (HERE / script).read_text().splitlines()
    return {i + 1 for i, text in enumerate(lines) for m in markers if text.rstrip().endswith("# made:" + m)}


def ledger_checks(label, out, doc):
    """The owners add up to the measured total: in the JSON (judged audit, CUPTI's
    total where CUPTI ran) and at every audit in the probe's rows."""
    for run in doc["runs"]:
        if not run.get("ledger"):
            continue
        total, rows = run["ledger_total"], run["ledger"]
        owned = sum(r["bytes"] for r in rows)
        unattributed = sum(r["bytes"] for r in rows if r["owner_kind"] == "unattributed")
        check(f"{label}: JSON ledger adds up to the measured total (cupti {run['cupti']})",
              total > 0 and abs(owned - total) <= 0.01 * total,
              f"owners {owned / MIB:.1f} MiB, total {total / MIB:.1f} MiB, unattributed {unattributed / MIB:.1f} MiB"
              f" = {100.0 * unattributed / max(total, 1):.2f}%")
        for r in rows:
            print(f"  ledger {label}: {r['device']} {r['owner_kind']:<16} {r['owner'] or '':<48} "
                  f"{r['bytes'] / MIB:10.1f} MiB {r['tensors']:6d} tensors  {r['example'] or ''}")
    for db in sorted(Path(out).glob("*.db")):
        con = sqlite3.connect(str(db))
        owned_share = []  # (step, label, attributed / memory_allocated) on the GPU at each audit
        for step, audit_label, measured, cache, attributed in con.execute(
                "select a.step, a.label, sum(case when owner_kind='measured' then bytes end),"
                " sum(case when owner_kind='allocator_cache' then bytes else 0 end),"
                " sum(case when owner_kind in ('parameter','gradient','optimizer_state','stale','held','autograd','library')"
                " then bytes else 0 end) from audit a join ledger l on l.audit_id=a.id"
                " where l.device like 'cuda%' group by a.id order by a.id"):
            allocated = (measured or 0) - cache
            owned_share.append((step, audit_label, attributed / allocated if allocated > 0 else 0.0))
        shares = ", ".join(f"{lb} {st}: {100 * sh:.2f}%" for st, lb, sh in owned_share)
        walked = [sh for _, lb, sh in owned_share if lb == "growth"]  # the holder walk runs at growth audits
        if walked:
            check(f"{label}: owners other than unattributed hold >= 99% of memory_allocated at each growth audit"
                  f" ({db.name})", min(walked) >= 0.99, shares)
        else:
            print(f"  attributed share of memory_allocated {label} ({db.name}, no growth audit): {shares}")
        bad = []
        n = 0
        for audit_id, step, audit_label in con.execute(
                "select id, step, label from audit where end_ns is not null order by id"):
            for device, measured, owned in con.execute(
                    "select device, sum(case when owner_kind='measured' then bytes end),"
                    " sum(case when owner_kind<>'measured' then bytes end) from ledger"
                    " where audit_id=? group by device",
                    (audit_id,)):
                n += 1
                if not measured or abs((owned or 0) - measured) > 0.01 * measured:
                    bad.append(f"{audit_label} {step} {device}: {owned} of {measured}")
        check(f"{label}: every audit's ledger adds up ({db.name})", n > 0 and not bad,
              f"{n} audit ledgers" + (f"; {bad[:3]}" if bad else ""))


def main():
    label, case, leak_out, leak_log, twin_out, twin_log = sys.argv[1:7]
    tpaudit = sys.argv[7] if len(sys.argv) > 7 else "tpaudit"
    words, markers, script = EXPECTED[case]
    leak, twin = report(tpaudit, leak_out), report(tpaudit, twin_out)
    leak_alloc, twin_alloc = allocs(leak_log), allocs(twin_log)
    found = [f for f in leak["findings"] if f["kind"] == "memory_growth"]
    check(f"{label}: one memory_growth finding", len(found) == 1, f"{len(found)} found")
    row = f"| {label} | none | | | "
    if found:
        f = found[0]
        path, rate = f["holder"]["path"], f["growth"]["bytes_per_step"]
        at = f["growth"].get("created_at") or ""
        m = re.search(r"([^\s:]+):(\d+) in ", at)
        check(f"{label}: names the holder", all(w in (path or "") for w in words), path)
        check(f"{label}: names the user's line", bool(m) and m.group(1).endswith(script)
              and int(m.group(2)) in made_lines(script, markers), at)
        print(f"  finding {label}: step {f['step']}: {f['message']}")
        step = f["step"] if f["step"] > 0 else max(k for k in leak_alloc if k != "end")
        # the finding's own audit: at exit, against memory_allocated() after the loop
        held_bytes, at_exit = held_at_audit(leak_out, path, step)
        held = [held_bytes] if held_bytes else []
        at = "end" if at_exit and "end" in leak_alloc and "end" in twin_alloc else step
        grown = leak_alloc.get(at, (0, 0))[0] - twin_alloc.get(at, (0, 0))[0]
        check(f"{label}: held-by row within 5% of the device growth memory_allocated() shows",
              bool(held) and grown > 0 and abs(held[0] - grown) <= 0.05 * grown,
              f"held {held[0] / MIB if held else 0:.1f} MiB at step {step}, memory_allocated leak - twin "
              f"{grown / MIB:.1f} MiB")
        since = f["growth"]["since_step"]
        kept = kept_bytes(leak_log)
        for db in sorted(Path(leak_out).glob("*.db")):
            con = sqlite3.connect(str(db))
            held_at = dict(con.execute(
                "select a.step, sum(l.bytes) from audit a join ledger l on l.audit_id=a.id where l.owner=?"
                " and a.step in (?, ?) group by a.id order by a.id", (path, since, step)).fetchall())
            live_at = dict(con.execute("select step, live_bytes from sample where step in (?, ?)", (since, step)))
            if len(held_at) == 2 and since in kept and step in kept:
                d_held, d_kept = held_at[step] - held_at[since], kept[step] - kept[since]
                check(f"{label}: held-by row's growth within 5% of the kept tensors' from step {since} to {step}",
                      d_kept > 0 and abs(d_held - d_kept) <= 0.05 * d_kept,
                      f"held +{d_held / MIB:.1f} MiB, kept +{d_kept / MIB:.1f} MiB")
            elif len(held_at) == 2 and len(live_at) == 2:
                d_held, d_live = held_at[step] - held_at[since], live_at[step] - live_at[since]
                check(f"{label}: held-by row's growth within 5% of memory_allocated()'s (samples) from step {since}"
                      f" to {step}", d_live > 0 and abs(d_held - d_live) <= 0.05 * d_live,
                      f"held +{d_held / MIB:.1f} MiB, memory_allocated +{d_live / MIB:.1f} MiB")
        rate_alloc = ((leak_alloc[step][0] - leak_alloc[f["growth"]["since_step"]][0]) /
                      max(step - f["growth"]["since_step"], 1)) if step in leak_alloc and \
            f["growth"]["since_step"] in leak_alloc else 0
        rate_kept = (kept[step] - kept[since]) / max(step - since, 1) if step in kept and since in kept else None
        print(f"  rate {label}: finding {rate / MIB:.2f} MiB/step, memory_allocated {rate_alloc / MIB:.2f} MiB/step"
              + (f", the kept tensors' storages {rate_kept / MIB:.2f} MiB/step" if rate_kept is not None else ""))
        if rate_kept is not None:
            # the truth where the loop can count what it keeps: memory_allocated() also counts the
            # allocator's rounding of the blocks it handed out, which varies from step to step in a
            # plain run too (hook-124M on an H100, steps 5 to 11: 3.08 MiB/step plain for 3.00 kept)
            check(f"{label}: rate within 5% of the kept tensors' per-step rise from step {since} to {step}",
                  rate_kept > 0 and abs(rate - rate_kept) <= 0.05 * rate_kept,
                  f"finding {rate / MIB:.2f} MiB/step, kept {rate_kept / MIB:.2f} MiB/step")
        else:
            check(f"{label}: rate within 5% of memory_allocated()'s per-step rise from step {since} to {step}",
                  rate_alloc > 0 and abs(rate - rate_alloc) <= 0.05 * rate_alloc,
                  f"finding {rate / MIB:.2f} MiB/step, memory_allocated {rate_alloc / MIB:.2f} MiB/step")
        row = (f"| {label} | `{path}` {rate / MIB:.1f} MiB/step | {at} | "
               f"{held[0] / GIB if held else 0:.2f} GiB vs {grown / GIB:.2f} GiB | ")
    ledger_checks(label, leak_out, leak)
    check(f"{label} twin: no finding", twin["findings"] == [], str([f["kind"] for f in twin["findings"]]))
    audits = [run["audits"] for run in twin["runs"] if run.get("python") == "on"]
    check(f"{label} twin: audits taken", bool(audits) and min(audits) >= 2, str(audits))
    ledger_checks(label + " twin", twin_out, twin)
    steps = [k for k in leak_alloc if k != "end"]
    first, last = min(steps, default=0), max(steps, default=0)
    span = (f"{leak_alloc.get(first, (0, 0))[0] / GIB:.2f} -> {leak_alloc.get(last, (0, 0))[0] / GIB:.2f} GiB; twin "
            f"{twin_alloc.get(first, (0, 0))[0] / GIB:.2f} -> {twin_alloc.get(last, (0, 0))[0] / GIB:.2f} GiB")
    print(f"  memory_allocated {label} steps {first}-{last}: {span}")
    print(row + f"{span} | {'clean' if not twin['findings'] else 'FINDINGS'} |")
    print(f"judge {label}: {'FAIL ' + '; '.join(failed) if failed else 'PASS'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
