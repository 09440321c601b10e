"""Device memory PyTorch's caching allocator gives out that is no tensor: the
cuBLAS and cuBLASLt workspaces, the rounding of the tensors' blocks, and at
an OOM in backward the autograd engine's buffers in flight, named in the
ledger instead of left unattributed.

PyTorch allocates one cuBLAS workspace per (cuBLAS handle, stream) from its
caching allocator, and handles are per thread, so a training step whose
backward runs on the autograd engine's device thread holds at least two;
cuBLASLt takes its own per (handle, stream), or shares the cuBLAS one when
torch unifies them.  No Python object refers to them, so the holder walk
cannot find them.  Their sizes are fixed by the environment and the
device: CUBLAS_WORKSPACE_CONFIG (":SIZE_KiB:COUNT" pairs; torch before 2.3
counted each pair's SIZE once, later ones SIZE x COUNT), else 32 MiB
(":4096:8") on compute capability 9 and above (Hopper, Blackwell) and
8 MiB + 128 KiB (":4096:2:16:8") below it (4 MiB before torch 2.3);
CUBLASLT_WORKSPACE_SIZE (KiB) for cuBLASLt, else 1 MiB.  An allocator block
that no live tensor's storage starts at and whose requested size is one of
these is counted as a workspace (memory_snapshot: host memory only, no
device memory allocated).  A tensor of exactly such a size that only C++
keeps would be counted with them; docs/PROBE.md says so.

The blocks of the tensors the ledger names are often larger than the
tensors: the allocator rounds each request to 512 bytes and hands out a
cached block whole when splitting it would leave less than 1 MiB.
memory_allocated() counts whole blocks, so that slack (tens of MiB in a
GPT-2 step) is named as the allocator's rounding.

While a backward runs (an OOM audit taken in one: _oom.py sets
backward_in_flight), the gradients the engine passes from node to node
and accumulates are allocator blocks no Python object reaches either: the
other active blocks that start no live storage are counted as theirs.
"""
import os
import re

MIB = 1 << 20
KIB = 1 << 10
CUBLAS = ("library", "cuBLAS workspace (PyTorch)")
CUBLASLT = ("library", "cuBLASLt workspace (PyTorch)")
IN_BACKWARD = ("autograd", "gradients in flight in backward (autograd engine)")
ROUNDING = ("library", "block rounding of the tensors above (PyTorch)")
backward_in_flight = False  # an audit taken while a backward runs (the OOM audit of one)


def cublas_sizes(major):
    """The cuBLAS workspace sizes torch may have chosen on a device of compute capability `major`."""
    config = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
    pairs = [(int(size), int(count)) for size, count in re.findall(r":(\d+):(\d+)", config or "")]
    if pairs:
        return {sum(s * c for s, c in pairs) * KIB, sum(s for s, _ in pairs) * KIB}
    return {32 * MIB} if major >= 9 else {8 * MIB + 128 * KIB, 4 * MIB}


def cublaslt_size():
    try:
        return int(os.environ.get("CUBLASLT_WORKSPACE_SIZE", "1024")) * KIB
    except ValueError:
        return MIB


def sizes_of(major):
    """{requested size: (owner kind, owner)} of the workspaces on a device of compute capability `major`."""
    sizes = {size: CUBLAS for size in cublas_sizes(major)}
    sizes.setdefault(cublaslt_size(), CUBLASLT)
    return sizes


def named(torch, claimed):
    """{device: {(owner kind, owner): bytes}} of the allocations that are no
    tensor on each initialized CUDA device: the active allocator blocks
    that start no storage in `claimed` ((device, data_ptr) keys of the
    ledger) of a workspace's size, and while a backward is in flight the
    rest of them."""
    cuda = getattr(torch, "cuda", None)
    if cuda is None or not cuda.is_initialized():
        return {}
    majors = {}

    def major(index):
        if index not in majors:
            majors[index] = cuda.get_device_capability(index)[0]
        return majors[index]
    return from_snapshot(cuda.memory_snapshot(), claimed, major)


def from_snapshot(segments, claimed, major):
    """named() of the allocator's snapshot `segments` (torch's
    memory_snapshot()); major(device index) -> its compute capability's
    major.  The blocks of claimed storages count their rounding: the
    allocator gives a request a block of whole 512-byte units and leaves a
    cached block unsplit when less than 1 MiB would remain, and
    memory_allocated() counts the whole block."""
    starts = {ptr for _device, ptr in claimed}
    out = {}
    workspaces = {}  # device index -> {workspace size: its owner}
    for segment in segments:
        index = segment.get("device", 0)
        sizes = workspaces.get(index)
        if sizes is None:
            sizes = workspaces[index] = sizes_of(major(index))
        address = segment.get("address", 0)
        for block in segment.get("blocks", ()):
            start, size = block.get("address", address), int(block.get("size", 0))
            address += size
            if block.get("state") != "active_allocated":
                continue
            requested = int(block.get("requested_size", size))
            if start in starts:
                owner, size = ROUNDING, size - requested
            else:
                owner = sizes.get(requested, IN_BACKWARD if backward_in_flight else None)
            if owner is not None and size > 0:
                mine = out.setdefault("cuda:%d" % index, {})
                mine[owner] = mine.get(owner, 0) + size
    return out
