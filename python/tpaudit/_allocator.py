"""What the program's memory allocators hold, read for the probe: the CUDA
caching allocator's counters (the step sample, the ledger's measured row,
the free cache and largest free block at an OOM) and, in a process that
never used CUDA, the bytes malloc has in use.

Nothing here initializes CUDA or allocates device memory:
- every CUDA read first asks torch.cuda.is_initialized() (cuda() below); a
  process that never used CUDA gets the CPU answer or nothing, because
  torch.cuda.current_device(), memory_allocated() of no index and a
  device's properties would initialize it;
- the reads are the allocator's host-side statistics only:
  torch._C._cuda_memoryStats (one nested dict from C++; memory_allocated()
  and memory_reserved() each build and flatten the whole dict in Python,
  and are the fallback where it is missing) and memory_snapshot() (its
  segments and blocks, for the largest free block);
- torch is never imported here: torch.cuda is read from sys.modules.
On the CPU the live bytes are glibc's mallinfo2 (2.33+, 0.3 us: its arenas'
used chunks and its mmapped ones, where CPU tensors' storages are), else
the process's RSS (another malloc, or a glibc without it).
"""
import ctypes
import os
import sys

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def cuda():
    """torch.cuda when the program initialized CUDA, else None."""
    module = sys.modules.get("torch.cuda")
    return module if module is not None and module.is_initialized() else None


def counters(cuda_module, index):
    """(allocated bytes, reserved bytes, peak allocated bytes) of the caching
    allocator on device `index` (the peak: torch.cuda.max_memory_allocated,
    since the process began or the program last reset it)."""
    try:
        stats = sys.modules["torch"]._C._cuda_memoryStats(index)
        allocated = stats["allocated_bytes"]["all"]
        return allocated["current"], stats["reserved_bytes"]["all"]["current"], allocated["peak"]
    except (AttributeError, KeyError, TypeError):
        return (cuda_module.memory_allocated(index), cuda_module.memory_reserved(index),
                cuda_module.max_memory_allocated(index))


def current_devices():
    """{"cuda:N"} of the current CUDA device when CUDA is initialized, else empty."""
    module = cuda()
    return {"cuda:%d" % module.current_device()} if module is not None else set()


def live_bytes():
    """(live bytes, reserved bytes or -1, device text) of this moment: the
    current CUDA device's allocated and reserved bytes, else the CPU's."""
    live, reserved, _, device = live_and_peak()
    return live, reserved, device


def live_and_peak():
    """live_bytes() with the peak allocated bytes between them (-1 on the CPU)."""
    module = cuda()
    if module is not None:
        index = module.current_device()
        allocated, reserved, peak = counters(module, index)
        return allocated, reserved, peak, "cuda:%d" % index
    return (_malloc_in_use() if _malloc_in_use is not None else _rss()), -1, -1, "cpu"


def measured(devices):
    """device -> (how, reserved bytes, allocator cache bytes) for the CUDA
    devices among `devices` ("cuda" alone: the current one)."""
    out = {}
    module = cuda()
    for device in devices:
        if not device.startswith("cuda") or module is None:
            continue
        index = int(device.split(":")[1]) if ":" in device else module.current_device()
        allocated, reserved, _ = counters(module, index)
        out[device] = ("torch.cuda.memory_reserved", reserved, max(0, reserved - allocated))
    return out


def free_state(device):
    """(reserved-but-free bytes, largest free block) of the caching allocator
    on device index `device`, each None when unknown (CUDA not initialized)."""
    module = cuda()
    if module is None:
        return None, None
    allocated, reserved, _ = counters(module, device)
    largest = 0
    for segment in module.memory_snapshot():
        if segment.get("device", device) != device:
            continue
        for block in segment.get("blocks", ()):
            if block.get("state") == "inactive":
                largest = max(largest, int(block.get("size", 0)))
    return reserved - allocated, largest


def _rss():
    with open("/proc/self/statm", "rb") as f:
        return int(f.read().split()[1]) * _PAGE


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]


def _malloc_reader():
    """glibc's mallinfo2 as a function giving the bytes malloc has in use,
    or None when there is none or it reads 0 (another malloc)."""
    try:
        fn = ctypes.CDLL(None).mallinfo2
    except (OSError, AttributeError):
        return None
    fn.restype, fn.argtypes = _MallInfo2, []

    def in_use():
        m = fn()
        return m.uordblks + m.hblkhd
    return in_use if in_use() > 0 else None


_malloc_in_use = _malloc_reader()
