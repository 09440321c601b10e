"""Summarises an Nsight Compute CSV (ncu --csv, one row per kernel and metric)
of about one tprt training step: per kernel family, how many launches, their
total time, its share, and the time-weighted mean of compute (SM) and memory
(DRAM) throughput as a percentage of the GPU's peak, so the table says what
bounds each part of the step.  Families are the kernel names cut at the
first '<' or '(' (templates and arguments; a leading "void " and anonymous
namespaces dropped) and cuBLAS's kernels grouped as
"cublas/cutlass gemm".
usage: ncu_summary.py NCU.csv
"""
import csv
import sys
from collections import defaultdict

TIME = "gpu__time_duration.sum"
SM = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
DRAM = "dram__throughput.avg.pct_of_peak_sustained_elapsed"


def family(name):
    low = name.lower()
    if "gemm" in low or "cutlass" in low or "sm90_xmma" in low or "nvjet" in low:
        return "cublas/cutlass gemm"
    name = name.replace("<unnamed>::", "")
    if name.startswith("void "):
        name = name[len("void "):]
    for cut in "<(":
        name = name.split(cut)[0]
    return name.strip() or "(unnamed)"


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def read(path):
    launches = defaultdict(dict)  # launch id -> metric -> value, plus its name
    with open(path, newline="") as f:
        lines = [line for line in f if line.startswith('"')]  # ncu's own log lines are not CSV
    for row in csv.DictReader(lines):
        value = number(row.get("Metric Value", ""))
        if value is None:
            continue
        unit = row.get("Metric Unit", "")
        if row.get("Metric Name") == TIME:
            value *= {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6}.get(unit, 1e-3)
        entry = launches[row["ID"]]
        entry["name"] = row["Kernel Name"]
        entry[row["Metric Name"]] = value
    return launches.values()


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: ncu_summary.py NCU.csv")
    fams = defaultdict(lambda: {"n": 0, "us": 0.0, "sm": 0.0, "dram": 0.0})
    for k in read(sys.argv[1]):
        us = k.get(TIME)
        if us is None:
            continue
        f = fams[family(k["name"])]
        f["n"] += 1
        f["us"] += us
        f["sm"] += us * k.get(SM, 0.0)
        f["dram"] += us * k.get(DRAM, 0.0)
    total = sum(f["us"] for f in fams.values()) or 1.0
    print(f"kernels profiled: {sum(f['n'] for f in fams.values())}, {total / 1e3:.2f} ms of kernel time")
    print("| kernel family | launches | ms | share | SM % of peak | DRAM % of peak |")
    print("|---|---|---|---|---|---|")
    for name, f in sorted(fams.items(), key=lambda kv: -kv[1]["us"]):
        us = f["us"] or 1.0
        print(f"| {name[:60]} | {f['n']} | {f['us'] / 1e3:.3f} | {100 * f['us'] / total:.1f}% "
              f"| {f['sm'] / us:.0f} | {f['dram'] / us:.0f} |")


if __name__ == "__main__":
    main()
