"""Shared by the tprt GPU checks: parsing tprt's per-step losses and
comparing a GPU loss curve with the CPU's (table, max relative difference,
the 2e-2 bf16 bound, and that the loss goes down)."""
import re


def losses(text):
    return [float(m.group(1)) for m in re.finditer(r"^step \d+ loss (\S+)", text, re.M)]


def compare_curves(cpu_text, gpu_text, label, check, steps=20):
    """Checks the GPU curve against the CPU's through check(ok, what)."""
    lc, lg = losses(cpu_text), losses(gpu_text)
    check(len(lc) == steps and len(lg) == steps, f"{steps} losses each ({len(lc)}, {len(lg)})")
    if len(lc) != steps or len(lg) != steps:
        return
    rel = [abs(a - b) / abs(a) for a, b in zip(lc, lg)]
    print(f"step  cpu {label:6s} cuda {label:6s} rel diff")
    for i, (a, b, d) in enumerate(zip(lc, lg, rel), 1):
        print(f"{i:4d}  {a:9.5f}  {b:9.5f}  {d:.2e}")
    print(f"max rel diff over {steps} steps: {max(rel):.3e} (step {rel.index(max(rel)) + 1}); first step {rel[0]:.3e}")
    check(max(rel) < 2e-2, f"GPU {label} loss curve within 2e-2 relative of the CPU's (bf16 weights and activations)")
    check(lg[-1] < lg[0] - 0.3, f"GPU {label} loss goes down ({lg[0]:.4f} -> {lg[-1]:.4f})")
