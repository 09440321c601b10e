"""out_of_memory and caught_out_of_memory, with databases made by the real
code paths on the CPU: the probe's allocator observer (tpaudit._oom.on_oom)
called with the allocator's arguments from inside a training step of real
torch CPU tensors (oom_host.py, under `tpaudit run`), and a native host that
records its OOM through the public API (oom_native_host.c).  Each cause is
chosen where it must be (a request over the cap by itself is too_large,
not the step's peak), a caught twin is not judged died-of-OOM (warnings),
a clean twin reports nothing, and each asserts the audits it took; text,
JSON (against its schema), HTML, JUnit, the default gate, diff, ranks and a
killed run.  The observer called from a native thread with no Python frame
(as a CUDA backward calls it) keeps the OOM's audit and the stack of the
thread in backward(); a growth finding stands when its loop's function
raises (the exit audit walks the traceback's frames) or returns, and its
bounded twin is clean; an eval loop with no optimizer that dies of its leak
has both errors and its bounded twin dies of its peak; growth is the cause
before fragmentation, and the
Held list goes by bytes with each named holder's graph on its own; an OOM
in the backward of HF GPT-2 (4 layers) heads its Held list and cause with
"activations of transformer.h.0-3 ... (... each; mlp N%)", its twin in
forward keeps the cause's words; so does the same step whose graph the
program's `out` keeps (the holder's ledger rows told by module, every
audit's rows adding up to its total), while the graph of a list of losses
that grew stays named by `losses`.  Needs
TPAUDIT_BUILD (the build tree) in the environment."""
import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
BUILD = Path(os.environ["TPAUDIT_BUILD"])
TPAUDIT = str(BUILD / "bin" / "tpaudit")
SCHEMA = json.loads((HERE.parents[1] / "docs" / "report.schema.json").read_text())
HOST = str(HERE / "oom_host.py")
SAVED_IN = "saved for backward in "  # TPAUDIT_SAVED_IN of include/tpaudit.h, as a report reads it
LONG = ("growth", "ranks", "backward", "raised", "raised-bounded", "returned", "fragmented-growth", "losses",
        "observer-fails", "eval", "eval-bounded")
STEPS = dict.fromkeys(LONG, "24")  # growth is judged after warm-up; the others need a few steps


def tpaudit(*args):
    return subprocess.run([TPAUDIT, *map(str, args)], capture_output=True, text=True, timeout=300)


def run_case(out, *cmd, steps="6"):
    env = {k: v for k, v in os.environ.items() if k not in ("TPAUDIT_OUT", "TPAUDIT_FAIL_FAST", "LD_PRELOAD")}
    env["OOM_HOST_STEPS"] = steps
    env["HF_HUB_OFFLINE"] = "1"  # the blocks case builds its model from a config: nothing downloaded
    return subprocess.run([TPAUDIT, "run", "-o", str(out), "--", *cmd], capture_output=True, text=True, env=env,
                          timeout=300)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """case -> (directory, completed `tpaudit run`), each case run once."""
    base = tmp_path_factory.mktemp("oom")
    done = {}
    cases = ("peak", "too-large", "step-graph", "blocks", "held-blocks", "fragmentation", "other", "caught", "clean",
             "killed")
    for case in cases + LONG:
        done[case] = (base / case, run_case(base / case, sys.executable, HOST, case, steps=STEPS.get(case, "6")))
    for case in ("fatal", "caught"):
        name = "native-" + case
        done[name] = (base / name, run_case(base / name, str(BUILD / "bin" / "oom_native_host"), case))
    return done


def report(path):
    r = tpaudit("report", "--format", "json", path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    import jsonschema
    jsonschema.Draft202012Validator(SCHEMA).validate(doc)
    return doc


def labels(path):
    """The labels of every closed audit, in order (every database of the run)."""
    out = []
    for db in sorted(Path(path).glob("*.db")):
        c = sqlite3.connect(db)
        out += [r[0] for r in c.execute("SELECT label FROM audit WHERE end_ns IS NOT NULL ORDER BY id")]
        c.close()
    return out


def ooms(doc, kind=None):
    return [f for f in doc["findings"] if "oom" in f and (kind is None or f["kind"] == kind)]


def died(doc):
    (f,) = ooms(doc, "out_of_memory")
    assert f["severity"] == "error"
    return f


def test_the_program_keeps_its_exception_traceback_and_exit_status(runs):
    out, r = runs["growth"]
    assert r.returncode == 1
    assert "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB." in r.stderr
    assert "Traceback (most recent call last):" in r.stderr
    assert runs["caught"][1].returncode == 0 and runs["clean"][1].returncode == 0


def test_growth_names_the_list_its_rate_and_line(runs):
    out, r = runs["growth"]
    doc = report(out)
    f = died(doc)
    assert f["oom"]["cause"] == "growth"
    assert "`kept` +" in f["oom"]["cause_text"] and "oom_host.py:" in f["oom"]["cause_text"]
    assert f["message"].startswith("OUT OF MEMORY at step 25: asked 2.0 GiB")
    assert "kept 24.0 MiB (+" in f["oom"]["held"]
    (growth,) = [g for g in doc["findings"] if g["kind"] == "memory_growth"]
    assert growth["tensor"]["name"] == "kept"
    assert f["oom"]["python_stack"][0]["file"].endswith("oom_host.py")  # the user's line first
    assert f["oom"]["requested_bytes"] == 2 << 30 and f["oom"]["count"] == 1 and f["oom"]["caught"] == 0
    # every audit the run took, the oom audit among them, and the report judged there with its ledger
    seen = labels(out)
    assert seen[:2] == ["step", "step"] and "growth" in seen and "oom" in seen
    run = doc["runs"][0]
    assert run["ledger"] and any(row["owner"] == "__main__.kept" or row["owner"] == "kept" for row in run["ledger"])
    text = tpaudit("report", out).stdout
    assert text.splitlines()[1].startswith("verdict: OUT OF MEMORY at step 25")
    assert 'memory ledger at audit "oom"' in text


def test_the_steps_own_peak_names_no_holder(runs):
    """An OOM in forward: nothing the step saved is told by module (its
    graph is its frames' locals'), so the cause keeps the words it had."""
    doc = report(runs["peak"][0])
    f = died(doc)
    assert f["oom"]["cause"] == "step_peak" and "step's own peak" in f["oom"]["cause_text"]
    assert f["oom"]["cause_text"].startswith("the step's own peak: its tensors in flight (activations, those saved "
                                             "for backward) hold "), f["oom"]["cause_text"]
    assert "activations of" not in f["message"] and saved_rows(runs["peak"][0]) == {}
    assert not [g for g in doc["findings"] if g["kind"] == "memory_growth"]
    assert "oom" in labels(runs["peak"][0])


def saved_rows(out):
    """module -> bytes of the ledger's rows 'saved for backward in <module>' at the oom audit."""
    (db,) = Path(out).glob("*.db")
    c = sqlite3.connect(db)
    rows = c.execute("SELECT owner, sum(bytes) FROM ledger WHERE owner LIKE ? AND audit_id ="
                     " (SELECT id FROM audit WHERE label='oom') GROUP BY owner", (SAVED_IN + "%",)).fetchall()
    c.close()
    return {owner[len(SAVED_IN):]: b for owner, b in rows}


def test_what_the_steps_graph_saved_is_told_by_module(runs):
    """An OOM in the backward of a step whose loss no variable keeps (only
    torch's Tensor.backward frame does): the Held list's "activations of"
    names the modules whose forward made what it saved, the largest first,
    and the ledger has a row for each: a Sequential of Linear 0, ReLU,
    Linear 2, ReLU, Linear 4 saved its input and the first ReLU's output
    (1.25 MiB: the ReLU has no parameter, so it counts with the Linear under
    it, 0) and the second ReLU's output (1 MiB, with 2); what Linear 4 made
    was saved by nodes whose backward already ran."""
    out = runs["step-graph"][0]
    f = died(report(out))
    held = re.search(r"Held: activations of ([^·]*) · ", f["message"])
    assert held, f["message"]
    assert held.group(1) == "0 1.2 MiB, 2 1.0 MiB", held.group(1)
    assert "saved for backward by this step" not in f["message"]  # the module rows are all it saved
    assert saved_rows(out) == {"0": 1280 << 10, "2": 1 << 20}


def modules_at(out, audit_id):
    """module -> bytes saved for backward at audit `audit_id`, as the ledger
    tells them: the rows 'saved for backward in <module>' of a graph no
    holder keeps, and those of a graph a holder keeps whose path says it."""
    (db,) = Path(out).glob("*.db")
    c = sqlite3.connect(db)
    rows = c.execute("SELECT coalesce(CASE WHEN owner LIKE ?1 THEN owner END, path), sum(bytes) FROM ledger"
                     " WHERE owner_kind='autograd' AND (owner LIKE ?1 OR path LIKE ?1) AND audit_id=?2"
                     " GROUP BY 1", (SAVED_IN + "%", audit_id)).fetchall()
    c.close()
    return {m[len(SAVED_IN):]: b for m, b in rows}


def oom_audit(out):
    (db,) = Path(out).glob("*.db")
    c = sqlite3.connect(db)
    (audit,) = c.execute("SELECT id FROM audit WHERE label='oom'").fetchone()
    c.close()
    return audit


def check_every_audit(out):
    """At every audit the run took, each device's rows add up to its measured
    total (no byte counted twice), and the rows of every graph a holder
    keeps are told by module (a path 'saved for backward in <module>') or
    are its one remainder of no known module; {audit id: {holder: bytes}}
    of the graphs holders keep."""
    (db,) = Path(out).glob("*.db")
    c = sqlite3.connect(db)
    graphs = {}
    audits = [a for (a,) in c.execute("SELECT id FROM audit WHERE end_ns IS NOT NULL ORDER BY id")]
    assert audits
    for audit in audits:
        for device, measured, rest in c.execute(
                "SELECT device, sum(CASE WHEN owner_kind='measured' THEN bytes END),"
                " sum(CASE WHEN owner_kind<>'measured' THEN bytes END) FROM ledger WHERE audit_id=? GROUP BY device",
                (audit,)):
            assert measured == rest, (audit, device, measured, rest)
        for owner, rows, told, untold in c.execute(
                "SELECT owner, count(*), sum(path LIKE ?2), sum(path IS NULL) FROM ledger WHERE audit_id=?1"
                " AND owner_kind='autograd' AND owner LIKE 'autograd graph of %' GROUP BY owner, device",
                (audit, SAVED_IN + "%")):
            assert told >= 1 and untold <= 1 and told + untold == rows, (audit, owner, rows, told, untold)
        graphs[audit] = dict(c.execute("SELECT owner, sum(bytes) FROM ledger WHERE audit_id=? AND"
                                       " owner_kind='autograd' AND owner LIKE 'autograd graph of %' GROUP BY owner",
                                       (audit,)))
    c.close()
    return graphs


def test_the_graph_the_programs_out_keeps_is_told_by_block(runs):
    """The GPT-2 step of the blocks case, its graph kept by the program's
    `out = gpt(ids, labels=ids)` and the OOM in the backward of out.loss:
    the Held list and the cause head with "activations of
    transformer.h.0-3 ...", as where no variable keeps the graph, and name
    no graph's holder; the ledger keeps the holders (`out`, its cache
    `out['past_key_values']`, whose keys and values attention saved) and
    tells their rows by module: each module's bytes are those of the blocks
    case, but attention's keys and values, counted once, under the cache
    that holds them; the peak counts them by module too."""
    out = runs["held-blocks"][0]
    doc = report(out)
    f = died(doc)
    audit = oom_audit(out)
    graphs = check_every_audit(out)
    assert labels(out).count("oom") == 1 and any(graphs.values())
    rows, alone = modules_at(out, audit), modules_at(runs["blocks"][0], oom_audit(runs["blocks"][0]))
    assert set(graphs[audit]) >= {"autograd graph of out"}, graphs[audit]
    assert sum(rows.values()) == sum(graphs[audit].values())  # the graphs' every saved byte told by module
    (db,) = Path(out).glob("*.db")
    c = sqlite3.connect(db)
    (cache,) = c.execute("SELECT sum(bytes) FROM ledger WHERE audit_id=? AND owner_kind='held' AND"
                         " owner LIKE 'out[''past_key_values'']%'", (audit,)).fetchone()
    c.close()
    attn = [m for m in alone if m.endswith(".attn")]
    assert len(attn) == 4 and cache > 0 and sum(alone[m] - rows[m] for m in attn) == cache, (rows, alone, cache)
    assert {m: b for m, b in rows.items() if m not in attn and m != "lm_head"} == \
        {m: b for m, b in alone.items() if m not in attn}  # lm_head: the loss out keeps saved the logits
    blocks, kinds = {}, {}
    for module, b in rows.items():
        parts = module.split(".")
        if parts[:2] == ["transformer", "h"]:
            blocks[parts[2]] = blocks.get(parts[2], 0) + b
            if len(parts) > 3:
                kinds[parts[3]] = kinds.get(parts[3], 0) + b
    total = sum(blocks.values())
    kind = max(kinds, key=kinds.get)
    headline = "activations of transformer.h.0-3 %s (%s each; %s %d%%)" % (
        size(total), size(total // 4), kind, (100 * kinds[kind] + total // 2) // total)
    assert f["oom"]["held"].startswith(headline + ", "), (headline, f["oom"]["held"])
    assert "autograd graph of" not in f["message"] and "saved for backward by this step" not in f["message"]
    assert f["oom"]["cause"] == "step_peak"
    assert f["oom"]["cause_text"].startswith("the step's own peak: " + headline + ", of the "), f["oom"]["cause_text"]
    (run,) = doc["runs"]
    assert run["peak"]["label"] == "oom" and run["peak"]["bytes"] == sum(rows.values()), run["peak"]
    assert {m["module"]: m["bytes"] for m in run["peak"]["modules"]} == rows


def size(b):
    """A byte count as the reports write it (tpa_format_bytes)."""
    units = ("B", "KiB", "MiB", "GiB", "TiB")
    u = 0
    while b >= 1024 and u < 4:
        b /= 1024
        u += 1
    return "%d B" % b if u == 0 else "%.1f %s" % (b, units[u])


def test_an_oom_in_a_transformers_backward_is_told_by_block(runs):
    """HF GPT-2 of 4 layers whose backward runs out before any block's
    backward ran: the headline of its Held list and its cause say
    "activations of transformer.h.0-3 <bytes> (<per block> each; <kind>
    <share>%)": the blocks rolled into one range, the bytes of each, and the
    kind of child (attn, mlp, ln_1, ln_2) that made the most of them, each
    figure as the ledger's rows at the oom audit add up (the only audit of
    the step's backward, its rows checked whole); the twin, an OOM in
    forward with nothing saved by module (test_the_steps_own_peak_names_no_holder),
    keeps the words it had."""
    out = runs["blocks"][0]
    f = died(report(out))
    rows = saved_rows(out)
    blocks, kinds = {}, {}
    for module, b in rows.items():
        parts = module.split(".")
        if parts[:2] == ["transformer", "h"] and len(parts) > 2:
            blocks[parts[2]] = blocks.get(parts[2], 0) + b
            if len(parts) > 3:
                kinds[parts[3]] = kinds.get(parts[3], 0) + b
    assert sorted(blocks) == ["0", "1", "2", "3"] and sorted(kinds) == ["attn", "ln_1", "ln_2", "mlp"], rows
    assert max(blocks.values()) - min(blocks.values()) <= max(blocks.values()) / 20  # even: "each"
    total = sum(blocks.values())
    kind = max(kinds, key=kinds.get)
    headline = "activations of transformer.h.0-3 %s (%s each; %s %d%%)" % (
        size(total), size(total // 4), kind, (100 * kinds[kind] + total // 2) // total)
    assert "Held: " + headline + ", " in f["message"], (headline, f["message"])
    assert f["oom"]["cause"] == "step_peak"
    assert f["oom"]["cause_text"].startswith("the step's own peak: " + headline + ", of the "), f["oom"]["cause_text"]
    assert "saved for backward by this step" not in f["message"]
    assert labels(out).count("oom") == 1
    text = tpaudit("report", out).stdout
    assert headline in text


def test_a_request_over_the_cap_by_itself_is_too_large(runs):
    """Nothing grew and the one request (6 GiB) is more than the process's
    cap (2 GiB): no smaller step or freed cache would have made it fit."""
    f = died(report(runs["too-large"][0]))
    assert f["oom"]["cause"] == "too_large", f["oom"]
    assert "the request alone, 6.0 GiB, is more than the process's cap of 2.0 GiB" in f["oom"]["cause_text"]
    assert labels(runs["too-large"][0]).count("oom") == 1


def test_fragmentation_names_the_allocator_setting(runs):
    f = died(report(runs["fragmentation"][0]))
    assert f["oom"]["cause"] == "fragmentation"
    assert "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in f["oom"]["cause_text"]
    # how far it was, in numbers: what the free bytes had over the request, what the largest block lacked
    assert "3.0 GiB reserved but free, 2.0 GiB more than the 1.0 GiB asked" in f["oom"]["cause_text"]
    assert "largest free block is 512.0 MiB, 512.0 MiB short" in f["oom"]["cause_text"]
    assert f["oom"]["reserved_free_bytes"] == 3 << 30 and f["oom"]["largest_free_block"] == 512 << 20


def test_memory_outside_the_allocator_is_named(runs):
    f = died(report(runs["other"][0]))
    assert f["oom"]["cause"] == "other_memory"
    assert f["oom"]["outside_bytes"] > 79 << 30
    assert "512.0 MiB free of 80.0 GiB" in f["message"]


def test_a_caught_oom_is_a_warning_and_the_run_did_not_die_of_it(runs):
    out, r = runs["caught"]
    doc = report(out)
    assert not ooms(doc, "out_of_memory")
    caught = ooms(doc, "caught_out_of_memory")
    assert len(caught) == 2 and all(f["severity"] == "warning" for f in caught)  # batch 64 and 32 failed
    assert caught[0]["oom"]["count"] == 2
    assert labels(out) == ["oom", "oom", "step", "step"]  # both before step 1, then the default step audits
    assert "verdict: warnings only" in tpaudit("report", out).stdout
    assert tpaudit("gate", out).returncode == 0


def test_the_clean_twin_reports_nothing(runs):
    out, r = runs["clean"]
    doc = report(out)
    assert doc["findings"] == [] and labels(out)[:2] == ["step", "step"] and "oom" not in labels(out)
    assert tpaudit("gate", out).returncode == 0


def test_the_default_gate_fails_and_diff_shows_the_oom_that_appeared(runs):
    for case in ("growth", "peak", "fragmentation", "other", "native-fatal"):
        g = tpaudit("gate", runs[case][0])
        assert g.returncode == 1, (case, g.stdout)
    d = tpaudit("diff", runs["clean"][0], runs["peak"][0])
    assert d.returncode == 1 and "appeared" in d.stdout and "out_of_memory" in d.stdout
    assert tpaudit("diff", runs["peak"][0], runs["peak"][0]).returncode == 0


def test_html_and_junit(runs, tmp_path):
    out = runs["fragmentation"][0]
    html = tmp_path / "r.html"
    assert tpaudit("report", "--format", "html", "-o", html, out).returncode == 0
    page = html.read_text()
    assert "OUT OF MEMORY: fragmentation" in page and "expandable_segments:True" in page
    assert "audit &quot;oom&quot;" in page or "oom" in page
    junit = tpaudit("report", "--format", "junit", out).stdout
    assert '<failure type="out_of_memory"' in junit
    caught = tpaudit("report", "--format", "junit", runs["caught"][0]).stdout
    assert 'failure type="caught_out_of_memory"' not in caught and "caught_out_of_memory" in caught


def test_ranks_name_the_rank_that_died_beside_the_others(runs):
    out, r = runs["ranks"]
    doc = report(out)
    f = died(doc)
    assert f["rank"] == 1 and "(rank 1)" in f["message"]
    assert sorted(run["rank"] for run in doc["runs"] if run["rank"] is not None) == [0, 1]  # and the launcher
    text = tpaudit("report", out).stdout
    assert "rank 0" in text and "rank 1" in text


def test_a_killed_run_is_inconclusive_with_its_last_samples(runs):
    out, r = runs["killed"]
    assert r.returncode == 137 or r.returncode < 0
    doc = report(out)
    assert doc["runs"][0]["inconclusive"]
    assert "last samples" in doc["runs"][0]["why_inconclusive"] and "step 6" in doc["runs"][0]["why_inconclusive"]
    assert tpaudit("gate", out).returncode == 3


def test_the_native_path_names_the_runtimes_allocation_stack(runs):
    out, r = runs["native-fatal"]
    assert r.returncode == 1 and "oom_native_host: out of memory" in r.stderr
    f = died(report(out))
    assert f["oom"]["source"] == "oom_native_host" and f["oom"]["cause"] == "allocation"
    assert any(fr["function"] and "arena_alloc_activations" in fr["function"] for fr in f["oom"]["native_stack"])
    caught = report(runs["native-caught"][0])
    assert not ooms(caught, "out_of_memory") and len(ooms(caught, "caught_out_of_memory")) == 1


def test_a_stage_of_the_observer_that_fails_says_so_and_the_oom_still_counts(runs):
    """The allocator's state cannot be read at the OOM: one `tpaudit:` line
    names the stage, the oom row and its audit are written all the same,
    the run died of the OOM (its growth cause), and the field says the
    out-of-memory verdict was not fully judged."""
    out, r = runs["observer-fails"]
    assert r.returncode == 1 and "torch.OutOfMemoryError" in r.stderr
    lines = [line for line in r.stderr.splitlines() if "oom_watch off" in line]
    assert len(lines) == 1 and "allocator: RuntimeError" in lines[0], r.stderr
    doc = report(out)
    assert doc["runs"][0]["python"] == "on; unjudged: oom; parts off: oom_watch"
    f = died(doc)
    assert f["oom"]["cause"] == "growth" and f["oom"]["reserved_free_bytes"] is None
    assert "oom" in labels(out) and tpaudit("gate", out).returncode == 1


def line_of(text):
    """The line number of the first line of oom_host.py that holds `text`."""
    return next(n for n, line in enumerate(Path(HOST).read_text().splitlines(), 1) if text in line)


def growth_named_kept(doc):
    (g,) = [g for g in doc["findings"] if g["kind"] == "memory_growth"]
    assert g["tensor"]["name"] == "kept" and g["severity"] == "error"
    assert g["created_at"] and g["created_at"][0]["file"].endswith("oom_host.py")
    assert g["created_at"][0]["line"] == line_of("kept.append(")
    return g


def test_an_oom_seen_from_a_native_thread_has_the_stack_of_the_thread_in_backward(runs):
    """The observer called from a thread with no Python frame (as the autograd
    engine's device threads call it): no part goes off, the oom audit and row
    are taken, the stack is the program's thread's, through its backward()."""
    out, r = runs["backward"]
    assert r.returncode == 1 and "torch.OutOfMemoryError" in r.stderr
    assert "off after an internal error" not in r.stderr
    doc = report(out)
    assert doc["runs"][0]["python"] == "on"
    f = died(doc)
    assert f["oom"]["cause"] == "growth" and "`kept` +" in f["oom"]["cause_text"]
    stack = [(fr["file"], fr["line"]) for fr in f["oom"]["python_stack"]]
    assert (HOST, line_of("loss.backward()  # the line")) in stack
    assert stack[0][0] == HOST  # the user's line first
    assert "oom" in labels(out)
    growth_named_kept(doc)
    assert tpaudit("gate", out).returncode == 1


@pytest.mark.parametrize("case", ["raised", "returned"])
def test_a_growth_finding_stands_when_its_loop_ends(runs, case):
    """The loop grew: its finding stands in the final verdict and the gate
    whether its function then died of an uncaught exception (the list kept
    by the traceback's frames, which the exit audit walks: named there) or
    returned normally (the list freed, the model and optimizer kept)."""
    out, r = runs[case]
    assert r.returncode == (1 if case == "raised" else 0)
    doc = report(out)
    growth_named_kept(doc)
    text = tpaudit("report", out).stdout
    assert text.splitlines()[1].startswith("verdict: MEMORY GROWTH: `kept` +")
    assert tpaudit("gate", out).returncode == 1
    seen = labels(out)
    assert seen.count("growth") >= 4  # the growth audits and the one at exit, each of them taken
    if case == "raised":  # the exit audit, after the exception, names the list its traceback keeps
        (db,) = Path(out).glob("*.db")
        held = sqlite3.connect(db).execute(
            "SELECT owner, sum(bytes) FROM ledger WHERE audit_id=(SELECT max(id) FROM audit) AND owner_kind='held'"
            " GROUP BY owner ORDER BY 2 DESC").fetchall()
        assert held[0][0] in ("kept", "__main__.kept") and held[0][1] == 24 << 20


def test_the_bounded_twin_of_a_loop_that_raises_is_clean(runs):
    out, r = runs["raised-bounded"]
    assert r.returncode == 1 and "RuntimeError: the program's own error" in r.stderr
    doc = report(out)
    assert doc["findings"] == []
    assert labels(out)[:2] == ["step", "step"]  # audited
    assert tpaudit("gate", out).returncode == 0


SIZE = re.compile(r"(\d+(?:\.\d+)?) (B|KiB|MiB|GiB)\b")
UNIT = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def held_entries(held):
    """[(words, bytes)] of a Held list, in its order, the allocator's cache left out."""
    out = []
    for entry in held.split(" · "):
        if not entry.startswith("allocator cache"):
            m = SIZE.search(entry)
            out.append((entry[:m.start()].strip(), float(m.group(1)) * UNIT[m.group(2)]))
    return out


def test_growth_is_the_cause_before_fragmentation(runs):
    """The growth loop whose OOM also fails for fragmentation: what grew filled the device."""
    f = died(report(runs["fragmented-growth"][0]))
    assert f["oom"]["cause"] == "growth"
    text = f["oom"]["cause_text"]
    assert "`kept` +" in text and "oom_host.py:%d" % line_of("kept.append(") in text
    assert "holding 24.0 MiB, 1% of the process's cap of 2.0 GiB" in text
    assert f["oom"]["reserved_free_bytes"] == 3 << 30 and f["oom"]["largest_free_block"] == 512 << 20


def test_the_held_list_leads_with_the_largest_and_names_the_graph_a_holder_keeps(runs):
    """Losses kept with their graphs: the graph `losses` keeps is its own entry,
    first (largest), not folded into "saved for backward by this step"; every
    entry by bytes, largest first; the cause names it with its rate and line."""
    out, r = runs["losses"]
    doc = report(out)
    f = died(doc)
    entries = held_entries(f["oom"]["held"])
    assert entries[0][0] == "autograd graph of losses" and entries[0][1] >= 24 << 20, entries
    sizes = [b for _, b in entries]
    assert sizes == sorted(sizes, reverse=True), entries
    assert f["oom"]["cause"] == "growth" and "`autograd graph of losses` +" in f["oom"]["cause_text"]
    assert "oom_host.py:" in f["oom"]["cause_text"]
    # the ledger tells the graph of `losses` by module at every audit; the list that grew keeps it whole
    graphs = check_every_audit(out)
    held = [g["autograd graph of losses"] for g in graphs.values() if "autograd graph of losses" in g]
    assert len(held) >= 4 and held == sorted(held) and held[-1] == graphs[oom_audit(out)]["autograd graph of losses"]
    assert size(held[-1]) == size(entries[0][1]), (held[-1], entries[0])
    assert "oom" in labels(out) and tpaudit("gate", out).returncode == 1
    for case in ("growth", "fragmented-growth"):  # the list first there too
        held = held_entries(died(report(runs[case][0]))["oom"]["held"])
        assert held[0][0] == "kept" and [b for _, b in held] == sorted((b for _, b in held), reverse=True), held


def test_an_eval_loop_without_an_optimizer_that_dies_of_its_leak_names_it(runs):
    """No optimizer ever steps: the loop's iterations are its samples (the
    root module's forward), the OOM's step is the iteration it struck in, and
    both the OOM (cause growth: `outs`, its rate and line) and the
    memory_growth finding are errors; the gate fails."""
    out, r = runs["eval"]
    assert r.returncode == 1 and "OutOfMemoryError" in r.stderr
    doc = report(out)
    f = died(doc)
    assert f["oom"]["cause"] == "growth", f["oom"]
    assert "`outs` +" in f["oom"]["cause_text"] and "oom_host.py:%d" % line_of("# the eval leak") in f["oom"]["cause_text"]
    (g,) = [g for g in doc["findings"] if g["kind"] == "memory_growth"]
    assert g["severity"] == "error" and "outs" in g["message"], g
    assert "oom" in labels(out) and tpaudit("gate", out).returncode == 1


def test_the_bounded_twin_of_the_eval_loop_dies_of_its_peak(runs):
    """Its last four batches only: nothing grew, so the OOM's cause is the
    step's own peak and there is no memory_growth finding."""
    out, r = runs["eval-bounded"]
    assert r.returncode == 1 and "OutOfMemoryError" in r.stderr
    doc = report(out)
    f = died(doc)
    assert f["oom"]["cause"] == "step_peak", f["oom"]
    assert [g for g in doc["findings"] if g["kind"] == "memory_growth"] == []
    assert labels(out) == ["oom", "exit"]  # audited (no growth audit: nothing grew)
