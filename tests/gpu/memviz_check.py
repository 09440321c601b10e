"""Checks one memory-viz export of a GPU run (scripts/gpu_memviz.sh):
the checks every export passes (tests/analyzer/memviz_checks.py: protocol,
opcodes, tiling, "unknown", blocks inside live segments, and
torch.cuda._memory_viz's segments, memory, trace_plot, segsum, trace), then
what the case must show: `leak` a held band that grows step over step,
`seed` the stale embedding as its own category.  Prints one table row.

    python3 memviz_check.py leak|seed FILE.pickle SECONDS
"""
import collections
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analyzer"))
from memviz_checks import load_checked  # noqa: E402


def main():
    case, path, seconds = sys.argv[1], Path(sys.argv[2]), float(sys.argv[3])
    snap = load_checked(path)
    entries = [e for t in snap["device_traces"] for e in t]
    cats = collections.Counter(e.get("category") for e in entries if e["action"] == "alloc")
    audits = sum(1 for e in entries if e["action"] == "snapshot" and "tpaudit audit" in e.get("user_metadata", ""))
    checks = []
    if case == "leak":
        held = [e for e in entries if e["action"] == "alloc" and e.get("category") == "held"]
        checks.append(("held band grows (a held block at 10 or more audits)", len(held) >= 10))
        checks.append(("holder path in user_metadata", any("kept" in e.get("user_metadata", "") for e in held)))
    else:
        stale = [e for e in entries if e["action"] == "alloc" and e.get("category") == "stale"]
        checks.append(("stale embedding is its own category", bool(stale)))
        checks.append(("its finding in user_metadata",
                       any("stale_param" in e.get("user_metadata", "") for e in stale)))
    checks.append(("parameters and optimizer state attributed", cats["parameter"] > 0 and cats["optimizer_state"] > 0))
    for what, ok in checks:
        print(f"check: {case}: {what}: {'ok' if ok else 'FAIL'}")
    print(f"| {case} | {path.name} | {path.stat().st_size / (1 << 20):.2f} MiB | {seconds:.2f} s | {len(entries):,} | "
          f"{audits} | {len(snap['segments'])} | "
          + ", ".join(f"{k} {v}" for k, v in sorted(cats.items(), key=lambda kv: -kv[1])) + " |")
    return 0 if all(ok for _, ok in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
