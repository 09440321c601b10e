"""torch.profiler under tpaudit: the CUDA kernel events torch.profiler
(kineto) records for a small workload, without tpaudit and under
`tpaudit run` with default settings (TPAUDIT_CUPTI=auto). Two orders:
CUDA initialized before the profiler starts (tpaudit holds CUPTI and must
hand it over), and the profiler started before CUDA (tpaudit must never
take it). Prints both counts per order, the run's cupti field and the
allocation rows tpaudit kept; exits 1 when a count differs, 77 without a GPU.

  python tests/gpu/profiler_kernels.py TPAUDIT [OUT_DIR]
"""
import glob
import json
import os
import sqlite3
import subprocess
import sys
import tempfile

ORDERS = ("cuda-first", "profiler-first")


def workload(order):
    import torch
    from torch.profiler import ProfilerActivity, profile

    if not torch.cuda.is_available():
        print("skip: no CUDA device")
        sys.exit(77)

    def steps(x):
        for _ in range(5):
            x = torch.relu(x @ x) / 1024
        torch.cuda.synchronize()
        return x

    if order == "cuda-first":
        x = torch.randn(1024, 1024, device="cuda")
        steps(x)  # warm: cuBLAS handle and its workspace exist before profiling
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
            steps(x)
    else:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
            steps(torch.randn(1024, 1024, device="cuda"))
    kernels = sorted(e.name for e in p.events() if e.device_type == torch.autograd.DeviceType.CUDA)
    print(json.dumps({"kernels": len(kernels), "names": kernels}))


def child_result(cmd, env):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    if r.returncode == 77:
        print(r.stdout.strip())
        sys.exit(77)
    if r.returncode != 0:
        print(r.stdout, r.stderr)
        raise SystemExit(f"{cmd}: exit {r.returncode}")
    line = [l for l in r.stdout.splitlines() if l.startswith("{")][-1]
    return json.loads(line), r.stderr


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        workload(sys.argv[2])
        return 0
    tpaudit = sys.argv[1]
    out_root = sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TPAUDIT_") and k != "CUDA_INJECTION64_PATH"}
    results, failed = {}, False
    for order in ORDERS:
        me = [sys.executable, os.path.abspath(__file__), "--child", order]
        plain, _ = child_result(me, env)
        out = os.path.join(out_root, f"profiler-{order}")
        audited, stderr = child_result([tpaudit, "run", "--force", "-o", out, "--", *me], env)
        rows = []
        for db in glob.glob(out + "/*.db"):
            c = sqlite3.connect(db)
            (cupti,) = c.execute("select cupti from run").fetchone()
            allocs = c.execute("select count(*) from alloc where source='cupti'").fetchone()[0]
            rows.append({"db": os.path.basename(db), "cupti": cupti, "alloc_rows": allocs})
        notes = [l for l in stderr.splitlines() if l.startswith("tpaudit:") and "CUPTI" in l]
        same = plain["kernels"] == audited["kernels"] and plain["names"] == audited["names"]
        failed |= not same
        results[order] = {"without_tpaudit": plain["kernels"], "under_tpaudit": audited["kernels"],
                          "same_kernels": same, "runs": rows, "tpaudit_lines": notes}
        print(f"{order}: torch.profiler CUDA kernel events: without tpaudit {plain['kernels']}, "
              f"under tpaudit run {audited['kernels']} ({'same kernels' if same else 'DIFFERENT'})")
        for row in rows:
            print(f"  run.cupti = {row['cupti']!r}, {row['alloc_rows']} allocation rows kept")
        for line in notes:
            print(f"  {line}")
    with open(os.path.join(out_root, "profiler_kernels.json"), "w") as f:
        json.dump(results, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
