"""The sizes the probe names PyTorch's cuBLAS and cuBLASLt workspaces by
(python/tpaudit/_workspaces.py), from the environment torch reads them
from, and that a process that never initialized CUDA names none (the GPU
side, the workspaces of a real training step named in its ledger, is
scripts/gpu_leaks.sh's >= 99% check)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = str(Path(os.environ["TPAUDIT_TEST_LIB"]).parents[1] / "share" / "tpaudit" / "python")
sys.path.insert(0, PROBE)
from tpaudit import _workspaces  # noqa: E402

MIB, KIB = 1 << 20, 1 << 10


@pytest.mark.parametrize("config, major, sizes", [
    (None, 9, {32 * MIB}),                                  # Hopper: :4096:8
    (None, 8, {8 * MIB + 128 * KIB, 4 * MIB}),              # :4096:2:16:8, 4 MiB before torch 2.3
    (":4096:8", 8, {32 * MIB, 4 * MIB}),                    # SIZE x COUNT, or SIZE alone (torch before 2.3)
    (":4096:2:16:8", 9, {8 * MIB + 128 * KIB, 4 * MIB + 16 * KIB}),
    (":16:8", 9, {128 * KIB, 16 * KIB}),                    # deterministic mode's small workspace
])
def test_cublas_workspace_sizes_follow_cublas_workspace_config(monkeypatch, config, major, sizes):
    if config is None:
        monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    else:
        monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", config)
    assert _workspaces.cublas_sizes(major) == sizes


def test_cublaslt_workspace_size_follows_cublaslt_workspace_size(monkeypatch):
    monkeypatch.delenv("CUBLASLT_WORKSPACE_SIZE", raising=False)
    assert _workspaces.cublaslt_size() == MIB
    monkeypatch.setenv("CUBLASLT_WORKSPACE_SIZE", "4096")
    assert _workspaces.cublaslt_size() == 4 * MIB
    monkeypatch.setenv("CUBLASLT_WORKSPACE_SIZE", "lots")
    assert _workspaces.cublaslt_size() == MIB


def test_a_process_without_cuda_names_no_workspace():
    code = ("import sys; sys.path.insert(0, %r); import torch; from tpaudit import _workspaces; "
            "t = torch.ones(4); print(_workspaces.named(torch, {('cpu', t.data_ptr()): 16}), "
            "torch.cuda.is_initialized())" % PROBE)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, CUDA_VISIBLE_DEVICES=""))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["{}", "False"]


def test_the_snapshot_names_workspaces_and_the_rounding_of_claimed_blocks(monkeypatch):
    """An allocator snapshot (torch's memory_snapshot() layout): a claimed
    tensor's block larger than it asked counts its slack as the allocator's
    rounding, an unclaimed block of the cuBLAS workspace's size is the
    workspace, another unclaimed block and the free ones are no one's."""
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    monkeypatch.delenv("CUBLASLT_WORKSPACE_SIZE", raising=False)
    base = 1 << 40
    blocks = [
        {"address": base, "size": 2 * MIB, "requested_size": 2 * MIB - 700 * KIB, "state": "active_allocated"},
        {"address": base + 2 * MIB, "size": 32 * MIB, "requested_size": 32 * MIB, "state": "active_allocated"},
        {"address": base + 34 * MIB, "size": 3 * MIB, "requested_size": 3 * MIB, "state": "active_allocated"},
        {"address": base + 37 * MIB, "size": 512, "requested_size": 100, "state": "active_allocated"},
        {"address": base + 38 * MIB, "size": 4 * MIB, "requested_size": 4 * MIB, "state": "inactive"},
    ]
    segments = [{"device": 0, "address": base, "blocks": blocks}]
    claimed = {("cuda:0", base): 2 * MIB - 700 * KIB, ("cuda:0", base + 37 * MIB): 100}
    named = _workspaces.from_snapshot(segments, claimed, lambda index: 9)
    assert named == {"cuda:0": {_workspaces.ROUNDING: 700 * KIB + 412, _workspaces.CUBLAS: 32 * MIB}}
    assert _workspaces.from_snapshot(segments, claimed | {("cuda:0", base + 2 * MIB): 32 * MIB},
                                     lambda index: 9) == {"cuda:0": {_workspaces.ROUNDING: 700 * KIB + 412}}
