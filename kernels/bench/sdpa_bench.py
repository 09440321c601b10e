"""sdpa_bench.py - the shapes of kernels/bench/attention_bench.c through PyTorch.

torch.nn.functional.scaled_dot_product_attention(is_causal=True) on GPT-2
124M's attention (T=1024, 12 heads of 64, bf16) at batch 8 and 128, with
each backend that torch.nn.attention.sdpa_kernel can pin (flash attention,
cuDNN, memory-efficient): the forward alone and forward + backward, median
of 50 timed runs (CUDA events) after 5 warm-ups, in ms and TFLOP/s of the
causal products (forward 4*B*NH*T*T*hs/2 FLOPs, backward 2.5 times that).
A backend that refuses the shape prints "skip: <reason>".  Without CUDA it
prints "sdpa_bench: skip: no CUDA" and exits 0.  Prints figures only.
Usage: python sdpa_bench.py [B ...]   (default 8 128)
"""

import sys

WARMUP, RUNS = 5, 50
T, NH, HS = 1024, 12, 64


def median_ms(torch, fn):
    """median milliseconds of RUNS calls of fn, each between two CUDA events"""
    times = []
    for i in range(WARMUP + RUNS):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        if i >= WARMUP:
            times.append(start.elapsed_time(end))
    times.sort()
    return 0.5 * (times[RUNS // 2 - 1] + times[RUNS // 2])


def bench_backend(torch, name, backend, batch):
    """forward and forward+backward of one backend at one batch size, printed"""
    from torch.nn.attention import sdpa_kernel

    sdpa = torch.nn.functional.scaled_dot_product_attention
    gen = torch.Generator(device="cuda").manual_seed(1)
    shape = (batch, NH, T, HS)
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, generator=gen).requires_grad_()
               for _ in range(3))
    dout = torch.randn(shape, device="cuda", dtype=torch.bfloat16, generator=gen)
    fwd_flops = 4.0 * batch * NH * T * T * HS / 2
    total_flops = 3.5 * fwd_flops

    def forward():
        with torch.no_grad():
            sdpa(q, k, v, is_causal=True)

    def forward_backward():
        q.grad = k.grad = v.grad = None
        sdpa(q, k, v, is_causal=True).backward(dout)

    label = f"B={batch:<4d} {name:<10s}"
    try:
        with sdpa_kernel(backend):
            fwd = median_ms(torch, forward)
            both = median_ms(torch, forward_backward)
    except (RuntimeError, NotImplementedError, ValueError) as err:  # refused shape, backend not built in
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        print(f"{label} skip: {reason[:160]}")
        return
    finally:
        del q, k, v, dout
        torch.cuda.empty_cache()
    print(f"{label} fwd {fwd:8.3f} ms {fwd_flops / fwd * 1e-9:6.1f} TFLOP/s | "
          f"fwd+bwd {both:8.3f} ms {total_flops / both * 1e-9:6.1f} TFLOP/s | "
          f"bwd (difference) {both - fwd:8.3f} ms")


def main(argv):
    try:
        import torch
    except ImportError:
        print("sdpa_bench: skip: no torch")
        return 0
    if not torch.cuda.is_available():
        print("sdpa_bench: skip: no CUDA")
        return 0
    try:
        from torch.nn.attention import SDPBackend
    except ImportError:
        print("sdpa_bench: skip: torch.nn.attention.sdpa_kernel not in this torch")
        return 0
    batches = [int(a) for a in argv] if argv else [8, 128]
    backends = [(n, getattr(SDPBackend, n, None))
                for n in ("FLASH_ATTENTION", "CUDNN_ATTENTION", "EFFICIENT_ATTENTION")]
    print(f"sdpa causal attention, T={T}, {NH} heads of {HS}, bf16, torch {torch.__version__} on "
          f"{torch.cuda.get_device_name()}; median of {RUNS} runs after {WARMUP} warm-ups")
    for batch in batches:
        for name, backend in backends:
            short = name.split("_")[0].lower()
            if backend is None:
                print(f"B={batch:<4d} {short:<10s} skip: SDPBackend.{name} not in this torch")
                continue
            bench_backend(torch, short, backend, batch)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
