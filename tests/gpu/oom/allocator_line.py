"""The caching allocator's state as an OOM case ends, one stdout line
(`allocator_at_exit ...`), printed with and without tpaudit alike, for
scripts/gpu_oom.sh to compare: what the OOM message's "reserved but
unallocated" and the process's memory "in use" are made of."""
import atexit

import torch

MIB = 1 << 20


def print_at_exit():
    """Prints the line as the program ends (after an uncaught OOM too)."""
    atexit.register(_line)


def _line():
    stats = torch.cuda.memory_stats()
    segments = sorted((seg["total_size"] for seg in torch.cuda.memory_snapshot()), reverse=True)
    free, total = torch.cuda.mem_get_info()
    print("allocator_at_exit reserved %d allocated %d device_used %d segments %d retries %d ooms %d sizes_mib %s" % (
        stats.get("reserved_bytes.all.current", 0), stats.get("allocated_bytes.all.current", 0), total - free,
        len(segments), stats.get("num_alloc_retries", 0), stats.get("num_ooms", 0),
        ",".join("%g" % (size / MIB) for size in segments[:40])), flush=True)
