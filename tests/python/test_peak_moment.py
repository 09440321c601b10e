"""The moment of the device's peak (python/tpaudit/_peak_moment.py, table
peak_part, analyzer/peak_moment.c): what held the memory when the most was
allocated, from PyTorch's caching-allocator history replayed between the
audit inside backward and the step's next part.

The replay itself is a function of the history (compose): tested here on
histories written out by hand, as the allocator's snapshot gives them.  On
the CPU there is no allocator history, so a real run under `--peak` has no
window (its twin, below); the rows a window writes go through the real shim
and reach the text and JSON reports (a program that records compose's rows
through the probe's own recorder).  The device run (gpu_activations:
test_activations.py on CUDA) checks the real history of HF GPT-2 and Llama
against the program's own max_memory_allocated within 1%.
Needs TPAUDIT_TEST_LIB (the built shim) for the runs."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "leaks"))
sys.path.insert(0, str(Path(os.environ["TPAUDIT_TEST_LIB"]).parents[1] / "share" / "tpaudit" / "python"))
from leakrun import TPAUDIT  # noqa: E402

MIB = 1 << 20


def compose(*args):
    from tpaudit import _peak_moment  # the built probe's: compose reads no torch
    return _peak_moment.compose(*args)


def history(*entries):
    return [{"action": a, "addr": addr, "size": size} for a, addr, size in entries]


# at the audit: a parameter (4 MiB), two activations saved by two modules (8 and 2 MiB), one block no owner has
START = [(0x1000, 4 * MIB), (0x2000, 8 * MIB), (0x3000, 2 * MIB), (0x4000, 1 * MIB)]
OWNERS = {0x1000: ("parameter", "fc"), 0x2000: ("autograd", "saved for backward in fc"),
          0x3000: ("autograd", "saved for backward in act")}


def test_the_blocks_live_at_the_most_allocated_moment():
    """Backward: a temporary (16 MiB) and fc's gradient (4 MiB) are made, act's activation freed, then at the most
    (15 + 16 + 4 - 2 = 33 MiB) the temporary is freed; a later 10 MiB temporary comes after fc's activation went
    (33 - 16 - 8 + 10 = 19 MiB: not the peak).  The parts at the peak add up to it, by owner."""
    trace = history(("segment_alloc", 0x9000, 32 * MIB), ("alloc", 0x9000, 16 * MIB), ("alloc", 0x5000, 4 * MIB),
                    ("free_requested", 0x3000, 2 * MIB), ("free_completed", 0x3000, 2 * MIB),
                    ("free_requested", 0x9000, 16 * MIB), ("free_requested", 0x2000, 8 * MIB),
                    ("alloc", 0x9000, 10 * MIB), ("free_requested", 0x9000, 10 * MIB))
    rows = compose(START, 40 * MIB, trace, OWNERS, {0x5000: "fc"})
    assert rows[0] == ("measured", "replayed allocator history", 35 * MIB, 6), rows
    assert rows[1:] == [("temporary", None, 16 * MIB, 1), ("autograd", "saved for backward in fc", 8 * MIB, 1),
                        ("gradient", "fc", 4 * MIB, 1), ("parameter", "fc", 4 * MIB, 1),
                        ("autograd", "saved for backward in act", 2 * MIB, 1), ("unattributed", None, 1 * MIB, 1),
                        ("allocator_cache", None, 72 * MIB - 35 * MIB, 0)], rows
    assert sum(r[2] for r in rows[1:-1]) == rows[0][2]


def test_a_window_that_only_frees_peaks_at_its_start():
    """The twin: nothing made after the audit, so the peak is the audit's own blocks, told by the ledger's owners,
    with no temporary and no gradient."""
    trace = history(("free_requested", 0x2000, 8 * MIB), ("free_requested", 0x3000, 2 * MIB))
    rows = compose(START, 15 * MIB, trace, OWNERS, {})
    assert rows[0][2] == 15 * MIB and {r[0] for r in rows[1:]} == {"parameter", "autograd", "unattributed"}, rows
    assert sum(r[2] for r in rows[1:]) == 15 * MIB


def test_a_block_made_and_kept_that_is_no_gradient():
    """A block made in backward and alive when the window ends that no parameter has as its gradient is
    `made_in_backward`; an address freed and made again after the peak is another block."""
    trace = history(("alloc", 0x7000, 3 * MIB), ("alloc", 0x8000, 5 * MIB), ("free_requested", 0x8000, 5 * MIB),
                    ("alloc", 0x8000, 1 * MIB))
    rows = compose([], 0, trace, {}, {})
    assert rows == [("measured", "replayed allocator history", 8 * MIB, 2), ("temporary", None, 5 * MIB, 1),
                    ("made_in_backward", None, 3 * MIB, 1)], rows


def test_blocks_count_as_the_allocator_counts_them():
    """The history gives the size asked for; the allocator counts whole blocks (max_memory_allocated's unit): a
    request counts rounded up to 512 bytes, a block alive at the end at the size the end's snapshot gives (a cached
    block handed out unsplit), and a free takes off what its block counted, the start's blocks at their own size
    (as the GPU run found: a replay of the sizes asked for drifted 508 bytes from the parts' sum)."""
    trace = history(("alloc", 0x7000, 2 * MIB + 4), ("alloc", 0x8000, 3 * MIB - 100),
                    ("free_requested", 0x1000, 4 * MIB - 300), ("alloc", 0x9000, 4), ("free_requested", 0x7000, 2 * MIB + 4))
    rows = compose(START, 15 * MIB, trace, OWNERS, {}, {0x8000: 3 * MIB + MIB // 2})
    # at the peak (the second alloc): the start's 15 MiB, 2 MiB + 512 and the unsplit 3.5 MiB block
    assert rows[0] == ("measured", "replayed allocator history", 15 * MIB + 2 * MIB + 512 + 3 * MIB + MIB // 2, 6)
    assert sum(r[2] for r in rows[1:] if r[0] != "allocator_cache") == rows[0][2], rows
    assert ("temporary", None, 2 * MIB + 512, 1) in rows and ("made_in_backward", None, 3 * MIB + MIB // 2, 1) in rows


class StandInAllocator:
    """The three calls of torch.cuda the window makes (current_device, get_device_capability, memory's _snapshot
    and _record_memory_history), kept as a list of calls: the window's bookkeeping on the CPU.  What the real
    allocator records is checked on the device (gpu_activations, the fixture)."""

    def __init__(self, history=(), clears=False):
        self.trace, self.recording, self.calls = list(history), False, []
        self.clears = clears  # turning the history off clears it (torch 2.11), else it is kept
        self.blocks = [{"address": 0x1000, "size": 4 * MIB, "requested_size": 4 * MIB, "state": "active_allocated"}]
        self.memory = self

    def current_device(self):
        return 0

    def get_device_capability(self, index):
        return (9, 0)

    def _snapshot(self):
        snap = {"segments": [{"device": 0, "total_size": 32 * MIB, "blocks": list(self.blocks)}],
                "device_traces": [list(self.trace)]}
        if self.recording:  # a snapshot taken while recording is an entry of the history too
            self.trace.append({"action": "snapshot", "addr": 0, "size": 0})
        return snap

    def _record_memory_history(self, enabled, **options):
        self.recording = enabled is not None
        self.calls.append((enabled, options.get("max_entries")))
        if enabled is None and self.clears:
            self.trace.clear()

    def step(self, temporary):
        """A backward: a temporary made and freed."""
        self.trace += history(("alloc", 0x5000, temporary), ("free_requested", 0x5000, temporary))


@pytest.mark.parametrize("clears", [True, False], ids=["history-cleared-when-off", "history-kept-when-off"])
def test_the_window_opens_reads_and_closes(monkeypatch, clears):
    """Each planned step's window turns the history on after the audit and off at its end, and writes its rows; the
    second reads from where the first ended (though a snapshot added an entry), or from an empty history where
    turning it off cleared it (torch 2.11 on the H100: the second window was missing before); a process whose
    history the program recorded before gets no window, and the history stays as it was."""
    from tpaudit import _ledger, _peak_moment
    cuda = StandInAllocator(clears=clears)
    monkeypatch.setattr(_peak_moment._allocator, "cuda", lambda: cuda)
    monkeypatch.setattr(_peak_moment, "_history_free", lambda: True)
    written = []
    rec = type("Rec", (), {"peak_part": lambda self, *row: written.append(row)})()
    window = _peak_moment.PeakWindow(rec)
    for step, temporary in ((1, 8 * MIB), (2, 2 * MIB)):
        window.begin()
        _ledger.owners_out.owners[("cuda:0", 0x1000)] = ("parameter", "fc")  # what the audit's ledger kept
        window.opened(step)
        assert cuda.recording and window.open is not None
        cuda.step(temporary)
        window.end()
        assert not cuda.recording and window.open is None
        rows = [r for r in written if r[0] == step]
        assert rows[0] == (step, "cuda:0", "measured", "replayed allocator history", 4 * MIB + temporary, 2), rows
        assert (step, "cuda:0", "temporary", None, temporary, 1) in rows, rows
    assert [enabled for enabled, _ in cuda.calls] == ["all", None, "all", None]
    # the program's own history, recorded and stopped before: no window, nothing turned on
    theirs = StandInAllocator(history(("alloc", 0x9000, MIB)))
    monkeypatch.setattr(_peak_moment._allocator, "cuda", lambda: theirs)
    window = _peak_moment.PeakWindow(rec)
    window.begin()
    window.opened(1)
    assert window.open is None and theirs.calls == [] and len(theirs.trace) == 1
    assert _ledger.owners_out is None


PROGRAM = """\
import sys
import torch
model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 64))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(2):
    model(torch.randn(32, 64)).square().mean().backward()
    opt.step()
    opt.zero_grad()
if sys.argv[1] == "rows":  # what a window on the GPU writes, through the probe's recorder
    from tpaudit import _hooks, _peak_moment
    MIB = 1 << 20
    rows = _peak_moment.compose([(1, 4 * MIB), (2, 8 * MIB)], 22 * MIB,
                                [{"action": "alloc", "addr": 3, "size": 6 * MIB, "time_us": 20},
                                 {"action": "alloc", "addr": 4, "size": 2 * MIB, "time_us": 30},
                                 {"action": "free_requested", "addr": 4, "size": 2 * MIB, "time_us": 40}],
                                {1: ("parameter", "0"), 2: ("autograd", "saved for backward in 1")}, {3: "0"},
                                None, ([10, 25], ["1", "0"]))
    for kind, owner, nbytes, blocks in rows:
        assert _hooks.state.recorder.peak_part(2, "cuda:0", kind, owner, nbytes, blocks) == 0
print("done")
"""


def run(tmp_path, mode):
    (tmp_path / "prog.py").write_text(PROGRAM)
    out = tmp_path / mode
    env = {k: v for k, v in os.environ.items() if not k.startswith("TPAUDIT_") or k == "TPAUDIT_TEST_LIB"}
    r = subprocess.run([TPAUDIT, "run", "-o", str(out), "--peak", "--", sys.executable, str(tmp_path / "prog.py"), mode],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0 and r.stdout == "done\n", r.stdout + r.stderr
    return out


def report(out, *flags):
    r = subprocess.run([TPAUDIT, "report", *flags, str(out)], capture_output=True, text=True, timeout=120)
    assert r.returncode in (0, 1), r.stderr
    return r.stdout


def test_the_cpu_has_no_window(tmp_path):
    """`--peak` on the CPU: audits inside backward and phase marks, but no allocator history, so no peak_part
    row, and the reports tell no moment."""
    import sqlite3
    out = run(tmp_path, "plain")
    (path,) = out.glob("*.db")
    db = sqlite3.connect(path)
    assert db.execute("select count(*) from audit where label='backward'").fetchone()[0] >= 1
    assert db.execute("select count(*) from phase_mark").fetchone()[0] > 0
    assert db.execute("select count(*) from peak_part").fetchone()[0] == 0
    (run_doc,) = json.loads(report(out, "--format", "json"))["runs"]
    assert run_doc["peak"] and run_doc["peak"]["moment"] is None, run_doc["peak"]
    assert "at the peak's moment" not in report(out)


def test_a_windows_rows_reach_the_reports(tmp_path):
    """The rows of one window, recorded through the shim, in the text report (owners in words, the most bytes
    first, the cache last) and in JSON under runs[].peak.moment, valid against the schema."""
    out = run(tmp_path, "rows")
    text = report(out)
    assert "at the peak's moment in step 2 (the allocator's history replayed): 20.0 MiB allocated:" in text, text
    lines = text.split("at the peak's moment", 1)[1].splitlines()[1:6]
    assert [" ".join(line.split()) for line in lines] == [
        "saved for backward in 1 8.0 MiB", "gradients of 0 6.0 MiB", "parameters of 0 4.0 MiB",
        "temporaries of the backward of 0 2.0 MiB", "allocator cache 2.0 MiB"], lines
    doc = json.loads(report(out, "--format", "json"))
    import jsonschema
    jsonschema.Draft202012Validator(json.loads((HERE.parents[1] / "docs" / "report.schema.json").read_text())
                                    ).validate(doc)
    (run_doc,) = doc["runs"]
    moment = run_doc["peak"]["moment"]
    assert moment["step"] == 2 and moment["bytes"] == 20 * MIB, moment
    assert {"kind": "temporary", "owner": "0", "bytes": 2 * MIB, "blocks": 1} in moment["parts"], moment
    assert moment["parts"][0] == {"kind": "autograd", "owner": "saved for backward in 1", "bytes": 8 * MIB,
                                  "blocks": 1}, moment
    # the HTML report: a table of the moment under the peak's chart, a row and a bar per owner
    import re
    page = report(out, "--format", "html")
    table = re.search(r'<table class="libs peak moment">.*?</table>', page, re.S)
    assert table and "moment in step 2 (the allocator" in table.group(0), page[-2000:]
    owners = re.findall(r"<tr><td><code>([^<]*)</code>", table.group(0))
    assert owners == ["saved for backward in 1", "gradients of 0", "parameters of 0",
                      "temporaries of the backward of 0", "allocator cache"], owners


def test_temporaries_are_named_by_the_backward_that_made_them():
    """Backward marked module by module (mlp, then attn): each temporary and each block kept that is no gradient is
    the module's whose backward mark came last before it was made; a block made before the first mark, or a
    history without times, has no module (the twin: the parts as before)."""
    trace = [{"action": "alloc", "addr": 0x9000, "size": 2 * MIB, "time_us": 90},  # before any mark
             {"action": "alloc", "addr": 0xa000, "size": 6 * MIB, "time_us": 110},  # the MLP's backward
             {"action": "alloc", "addr": 0xb000, "size": 4 * MIB, "time_us": 210},  # the attention's
             {"action": "alloc", "addr": 0xc000, "size": 1 * MIB, "time_us": 220},  # the attention's, kept
             {"action": "free_requested", "addr": 0xa000, "size": 6 * MIB, "time_us": 300},
             {"action": "free_requested", "addr": 0xb000, "size": 4 * MIB, "time_us": 300},
             {"action": "free_requested", "addr": 0x9000, "size": 2 * MIB, "time_us": 300}]
    marks = ([100, 200], ["h.0.mlp", "h.0.attn"])
    rows = compose([], 0, trace, {}, {}, None, marks)
    assert rows == [("measured", "replayed allocator history", 13 * MIB, 4), ("temporary", "h.0.mlp", 6 * MIB, 1),
                    ("temporary", "h.0.attn", 4 * MIB, 1), ("temporary", None, 2 * MIB, 1),
                    ("made_in_backward", "h.0.attn", 1 * MIB, 1)], rows
    untimed = [{k: v for k, v in e.items() if k != "time_us"} for e in trace]
    assert compose([], 0, untimed, {}, {}, None, marks) == compose([], 0, trace, {}, {}) == [
        ("measured", "replayed allocator history", 13 * MIB, 4), ("temporary", None, 12 * MIB, 3),
        ("made_in_backward", None, 1 * MIB, 1)]
