"""The live status line of `tpaudit run`: on a terminal (a pty), one line
on stderr redrawn in place with the processes, audits and findings so far,
cleared before the verdict; nothing of it when stderr is not a terminal,
where the output is the same as before.  Needs TPAUDIT_BUILD."""
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

BUILD = Path(os.environ["TPAUDIT_BUILD"])
TPAUDIT = str(BUILD / "bin" / "tpaudit")

# The seed bug, audited at step 1, then two more seconds of "training".
HOST = """
import time
import torch
from torch import nn
model = nn.Sequential(nn.Embedding(50257, 8), nn.Linear(8, 4))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
model[0] = nn.Embedding(50260, 8)
model(torch.tensor([[1, 2, 3]])).sum().backward()
optimizer.step()
print("step 1 done", flush=True)
time.sleep(2.5)
"""
STATUS = re.compile(rb"\r\x1b\[Ktpaudit: running: (\d+) process(?:es)?, (\d+) audits?, (\d+) findings? so far "
                    rb"\((\d+) errors?\)\r")


def run_args(tmp_path):
    script = tmp_path / "host.py"
    script.write_text(HOST)
    return [TPAUDIT, "run", "-o", str(tmp_path / "out"), "--", sys.executable, str(script)]


def env():
    return dict(os.environ, TPAUDIT_AUDIT="1")


def test_status_line_on_a_terminal(tmp_path):
    master, slave = pty.openpty()
    proc = subprocess.Popen(run_args(tmp_path), stdin=slave, stdout=slave, stderr=slave, env=env(),
                            start_new_session=True)
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: every holder of the pty's other end is gone
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    assert proc.wait(timeout=120) == 0, seen
    lines = STATUS.findall(seen)
    assert lines, seen
    # the counts only grow, and the last one saw the audit and its two errors
    assert [int(x) for x in lines[-1]] == [1, 1, 2, 2], lines
    assert all(int(a[0]) <= 1 for a in lines)
    # one line redrawn in place: no newline in a status line, and it is
    # cleared before the verdict
    verdict = seen.index(b"tpaudit: verdict:")
    assert seen[:verdict].endswith(b"\r\x1b[K"), seen[verdict - 80:verdict]
    assert b"step 1 done" in seen


def test_nothing_when_stderr_is_not_a_terminal(tmp_path):
    r = subprocess.run(run_args(tmp_path), capture_output=True, env=env(), timeout=120)
    assert r.returncode == 0, r.stderr
    assert b"running:" not in r.stderr and b"\x1b" not in r.stderr and b"\r" not in r.stderr
    lines = [l for l in r.stderr.decode().splitlines() if l.startswith("tpaudit:")]
    assert lines[-2].startswith("tpaudit: verdict: STALE TENSORS") and lines[-1].startswith("tpaudit: next:"), lines
