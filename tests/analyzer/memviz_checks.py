"""The checks every memory-viz export must pass, shared by test_memviz.py
and the GPU part (tests/gpu/memviz_check.py): the pickle is protocol 4 and
uses only opcodes MemoryViz.js's unpickler reads, integers fit 8 bytes,
blocks tile each segment in order, "unknown" is among the categories, every
block lies inside a segment live at its entry, and torch.cuda._memory_viz's
segments, memory, trace_plot, segsum and trace all run on it."""
import pickle
import pickletools
from pathlib import Path

# the opcodes MemoryViz.js's unpickler reads
VIEWER_OPCODES = {"PROTO", "FRAME", "MEMOIZE", "BINPUT", "LONG_BINPUT", "BINGET", "LONG_BINGET", "EMPTY_DICT",
                  "EMPTY_LIST", "MARK", "SETITEMS", "SETITEM", "APPENDS", "APPEND", "SHORT_BINUNICODE", "BINUNICODE",
                  "BININT", "BININT1", "BININT2", "LONG1", "NONE", "NEWTRUE", "NEWFALSE", "BINFLOAT", "STOP",
                  "EMPTY_TUPLE", "TUPLE", "TUPLE1", "TUPLE2", "TUPLE3", "DICT", "LIST"}

def load_checked(path):
    """The snapshot at path, after the checks that hold for every export."""
    raw = Path(path).read_bytes()
    assert raw[:2] == b"\x80\x04", "protocol 4"
    for op, arg, _ in pickletools.genops(raw):
        assert op.name in VIEWER_OPCODES, op.name
        if op.name == "LONG1":
            assert -(1 << 63) <= arg < (1 << 63), "integers up to 8 bytes"
    snap = pickle.loads(raw)
    assert isinstance(snap["segments"], list) and isinstance(snap["device_traces"], list)
    for seg in snap["segments"]:  # blocks tile each segment in order
        at = seg["address"]
        for b in seg["blocks"]:
            assert b["address"] == at and b["size"] > 0
            if b["state"] == "active_allocated":
                assert "requested_size" in b and "frames" in b
            at += b["size"]
        assert at == seg["address"] + seg["total_size"]
    categories = {e["category"] for t in snap["device_traces"] for e in t if "category" in e}
    if categories:
        assert "unknown" in categories, "the viewer fails without the category 'unknown'"
    for device, trace in enumerate(snap["device_traces"]):
        replay(snap, device, trace)
    import torch.cuda._memory_viz as mv
    same = lambda lines: lines  # noqa: E731  (no flamegraph.pl: the folded lines themselves)
    mv.segments(snap, format_flamegraph=same)
    mv.memory(snap, format_flamegraph=same)
    assert "Active Memory Timeline" in mv.trace_plot(snap)
    mv.segsum(snap)
    mv.trace(snap)
    return snap


def replay(snap, device, trace):
    """Every block lies inside a segment live at its entry, as the viewer's
    segment view needs: it starts from the segments at the end and undoes
    the trace backwards (a windowed export starts with segments made before)."""
    live = {s["address"]: s["total_size"] for s in snap["segments"] if s["device"] == device}
    for e in reversed(trace):
        a = e["action"]
        if a == "alloc":
            assert "frames" in e
            assert any(s <= e["addr"] and e["addr"] + e["size"] <= s + n for s, n in live.items()), e
        elif a == "segment_alloc":
            assert live.pop(e["addr"]) == e["size"]
        elif a == "segment_free":
            live[e["addr"]] = e["size"]
    blocks = set()
    for e in trace:
        if e["action"] == "alloc":
            blocks.add(e["addr"])
        elif e["action"] == "free_completed":
            blocks.discard(e["addr"])
        elif e["action"] == "segment_free":
            assert not [b for b in blocks if e["addr"] <= b < e["addr"] + e["size"]], "blocks left in a freed segment"
