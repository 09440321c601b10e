"""The table of kernels/bench/bench_tprt.sh: one row per system and batch size
(tprt, tprt-under-tpaudit, torch-eager, torch-compile, llm.c, llm.c-cudnn:
whichever ran) with tokens/s, ms/step, tprt's tokens/s over that row's, and
MFU; per batch, tprt against the fastest other system of that batch (the
run under tpaudit is tprt itself, so not a candidate); then one
machine-readable `bench_tprt_row {json}` line per row, for the docs.

MFU uses llm.c's count (its gpt2_estimate_mfu, after Kaplan et al. 2020,
section 2.1), the same for every system, so the MFU column is the tokens/s
column rescaled:
  FLOP per token = 6 * N + 6 * L * C * T
  N = GPT-2 124M's parameters with the real 50257-token vocabulary, the tied
      token embedding counted once, position embeddings, biases and
      layernorms included (124,439,808); L = 12 layers, C = 768, T = the
      sequence length.  The 6*N term is the weight matmuls forward and
      backward; 6*L*C*T is attention's two T x T products.
Peak: 989.4 TFLOP/s, the H200 SXM's dense bf16 tensor-core figure (an
assumption of this table: NVIDIA's datasheet number, not measured).

usage: bench_table.py ROWS   (tab-separated: system batch seq tokens_per_s step_ms status note)
"""
import json
import sys

VOCAB, CHANNELS, LAYERS, MAX_SEQ = 50257, 768, 12, 1024
PEAK_FLOPS = 989.4e12  # H200 SXM dense bf16 (assumed, from the datasheet)
TPRT = "tprt"
NOT_OTHERS = (TPRT, "tprt-under-tpaudit")


def gpt2_124m_params():
    per_layer = 12 * CHANNELS * CHANNELS + 13 * CHANNELS  # qkv, proj, fc, fc-proj weights and biases; 2 layernorms
    return VOCAB * CHANNELS + MAX_SEQ * CHANNELS + LAYERS * per_layer + 2 * CHANNELS


def flops_per_token(seq):
    return 6 * gpt2_124m_params() + 6 * LAYERS * CHANNELS * seq


def number(text):
    try:
        return float(text)
    except ValueError:
        return 0.0


def read_rows(path):
    rows = []
    with open(path) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 6:
                continue
            system, batch, seq, tps, ms, status = parts[:6]
            note = parts[6] if len(parts) > 6 else ""
            ok = status == "ok" and number(tps) > 0 and number(ms) > 0
            rows.append({"system": system, "batch": int(batch), "seq": int(seq),
                         "tokens_per_s": round(number(tps)) if ok else None,
                         "step_ms": round(number(ms), 2) if ok else None,
                         "status": status if ok or status != "ok" else "no-steps", "note": note})
    return rows


def add_ratios_and_mfu(rows):
    tprt_tps = {r["batch"]: r["tokens_per_s"] for r in rows if r["system"] == TPRT}
    for r in rows:
        mine, ref = r["tokens_per_s"], tprt_tps.get(r["batch"])
        r["tprt_ratio"] = round(ref / mine, 3) if mine and ref else None
        r["mfu"] = round(mine * flops_per_token(r["seq"]) / PEAK_FLOPS, 4) if mine else None


def cell(value, fmt):
    return "-" if value is None else fmt.format(value)


def print_table(rows):
    print(f"FLOP per token = 6*N + 6*L*C*T = {flops_per_token(MAX_SEQ):,} at T={MAX_SEQ} "
          f"(N={gpt2_124m_params():,}, L={LAYERS}, C={CHANNELS}; llm.c's gpt2_estimate_mfu count)")
    print(f"MFU = tokens/s * FLOP per token / {PEAK_FLOPS / 1e12:.1f} TFLOP/s (H200 dense bf16 peak, assumed)")
    print("| system | batch | tokens/s | ms/step | tprt's ratio | MFU | note |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        tps = r["tokens_per_s"] if r["status"] == "ok" else None
        print(f"| {r['system']} | {r['batch']}x{r['seq']} | {cell(tps, '{:,}') if tps else r['status']} "
              f"| {cell(r['step_ms'], '{:.2f}')} | {cell(r['tprt_ratio'], '{:.2f}')} "
              f"| {cell(None if r['mfu'] is None else 100 * r['mfu'], '{:.1f}%')} | {r['note']} |")
    print_fastest_others(rows)
    for r in rows:
        print("bench_tprt_row " + json.dumps(r, sort_keys=True))


def print_fastest_others(rows):
    batches = sorted({(r["batch"], r["seq"]) for r in rows})
    for batch, seq in batches:
        same = [r for r in rows if r["batch"] == batch and r["seq"] == seq]
        others = [r for r in same if r["system"] not in NOT_OTHERS and r["tokens_per_s"]]
        if not others:
            continue
        best = max(others, key=lambda r: r["tokens_per_s"])
        ratio = "no tprt row" if best["tprt_ratio"] is None else f"tprt {best['tprt_ratio']:.2f}x"
        print(f"{batch}x{seq}: fastest other system {best['system']} {best['tokens_per_s']:,} tokens/s; {ratio}")


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    rows = read_rows(argv[1])
    add_ratios_and_mfu(rows)
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
