"""ctypes binding of the shim's tpaudit_v1_* C API (include/tpaudit.h).

NativeRecorder turns plain Python facts into the header's structs, whose
ctypes definitions (_structs.py) the build generates from the header: a
tensor's facts are a dict keyed by the struct's field names, so a field added
to tpaudit_tensor_t needs no change here.  Tests use any object with the same
methods (begin, end, tensor, ref, event, set_rank, set_run_info) instead.
"""
import ctypes
import os

from ._structs import EventStruct, LedgerStruct, OomStruct, PeakPartStruct, RefStruct, SampleStruct, TensorStruct, VerdictStruct

HOLDER_MODULE, HOLDER_OPTIMIZER, HOLDER_WRAPPER = 1, 2, 3
ROLE_PARAM, ROLE_GROUP_PARAM, ROLE_STATE, ROLE_MAP_ENTRY = 1, 2, 3, 4
EVENT_OPTIMIZER_CREATED, EVENT_PARAM_CREATED = 1, 2
EVENT_PARAM_REPLACED, EVENT_MODULE_REPLACED = 3, 4
# The fields of one line of a verdict's findings (include/tpaudit.h, tpaudit_verdict_t).
VERDICT_FIELDS = ("kind", "severity", "name", "bytes", "replaced_at", "message")
_VERDICT_TEXT = 1 << 16

_str = ctypes.c_char_p
# Fields the recorder fills itself rather than copying from the facts.
_TENSOR_OWN = ("struct_size", "name", "ndim", "shape", "local_ndim", "local_shape")


def _tensor_fields():
    """The tensor struct's fields a fact fills as it is: (numbers, repeated
    strings), by the header's field names (_structs.py is made from it)."""
    numbers, words = [], []
    for field, kind in TensorStruct._fields_:
        if field not in _TENSOR_OWN:
            (words if kind is _str else numbers).append(field)
    return tuple(numbers), tuple(words)


def _b(text):
    return None if text is None else str(text).encode("utf-8", "replace")


def _dims(shape):
    return (ctypes.c_int64 * max(len(shape), 1))(*shape)


def _native_path(package_rel, prefix_rel):
    """A native part of this install: in the Python package (tpaudit/_lib,
    tpaudit/_bin) when it is there, else in the prefix around the probe
    (<prefix>/share/tpaudit/python/tpaudit -> <prefix>/lib, <prefix>/bin)."""
    here = os.path.dirname(os.path.abspath(__file__))
    inside = os.path.join(here, package_rel)
    if os.path.exists(inside):
        return inside
    return os.path.normpath(os.path.join(here, "..", "..", "..", "..", prefix_rel))


def library_path():
    """TPAUDIT_LIBRARY, else libtpaudit.so of this install."""
    return os.environ.get("TPAUDIT_LIBRARY") or _native_path("_lib/libtpaudit.so", "lib/libtpaudit.so")


def cli_path():
    """The tpaudit program of this install."""
    return _native_path("_bin/tpaudit", "bin/tpaudit")


class NativeRecorder:
    """Sends facts to libtpaudit.so; every method returns the C status."""

    def __init__(self, lib):
        self.lib = lib
        lib.tpaudit_v1_audit_begin.restype = ctypes.c_int64
        lib.tpaudit_v1_audit_begin.argtypes = [_str, ctypes.c_int64]
        lib.tpaudit_v1_audit_end.argtypes = [ctypes.c_int64]
        lib.tpaudit_v1_record_tensor.argtypes = [ctypes.POINTER(TensorStruct)]
        lib.tpaudit_v1_record_ref.argtypes = [ctypes.POINTER(RefStruct)]
        lib.tpaudit_v1_record_event.argtypes = [ctypes.POINTER(EventStruct)]
        lib.tpaudit_v1_set_rank.argtypes = [ctypes.c_int, ctypes.c_int]
        lib.tpaudit_v1_set_run_info.argtypes = [_str, _str]
        self._record_tensor = lib.tpaudit_v1_record_tensor
        self._record_ref = lib.tpaudit_v1_record_ref
        self._record_sample = getattr(lib, "tpaudit_v1_record_sample", None)  # None: an older shim
        if self._record_sample is not None:
            self._record_sample.argtypes = [ctypes.POINTER(SampleStruct)]
        self._tensor = TensorStruct()
        self._tensor.struct_size = ctypes.sizeof(TensorStruct)
        self._tensor_ref = ctypes.byref(self._tensor)
        self._ref = RefStruct()
        self._ref.struct_size = ctypes.sizeof(RefStruct)
        self._ref_ref = ctypes.byref(self._ref)
        self._shape_buf = (ctypes.c_int64 * 8)()
        self._local_buf = (ctypes.c_int64 * 8)()
        self._tensor.shape, self._tensor.local_shape = self._shape_buf, self._local_buf
        self._shapes_moved = False
        self._encoded = {}
        self._tensor_numbers, self._tensor_words = _tensor_fields()

    def begin(self, label, step):
        return self.lib.tpaudit_v1_audit_begin(_b(label), int(step))

    def end(self, audit_id):
        return self.lib.tpaudit_v1_audit_end(audit_id)

    def tensor(self, facts):
        """Records one tensor: facts maps the struct's fields to values (a
        field left out is 0 or NULL, as for an older caller in C)."""
        # One reused struct and shape buffers: the C side copies them during the call.
        s, words = self._tensor, self._words
        shape, local_shape = facts["shape"], facts["local_shape"]
        s.name = _b(facts.get("name"))
        s.ndim, s.local_ndim = len(shape), len(local_shape)
        if len(shape) <= 8 and len(local_shape) <= 8:
            self._shape_buf[:len(shape)] = shape
            self._local_buf[:len(local_shape)] = local_shape
            if self._shapes_moved:
                s.shape, s.local_shape, self._shapes_moved = self._shape_buf, self._local_buf, False
        else:
            s.shape, s.local_shape, self._shapes_moved = _dims(shape), _dims(local_shape), True
        get = facts.get
        for field in self._tensor_words:
            setattr(s, field, words(get(field)))
        for field in self._tensor_numbers:
            setattr(s, field, get(field, 0))
        return self._record_tensor(self._tensor_ref)

    def ref(self, holder_kind, holder_class, holder_id, path, role, tensor_key, peer_key=0):
        s = self._ref
        s.holder_kind, s.holder_class, s.holder_id = holder_kind, self._words(holder_class), holder_id
        s.path, s.role, s.tensor_key, s.peer_key = _b(path), role, tensor_key, peer_key
        return self._record_ref(self._ref_ref)

    def _words(self, text):
        """Encoded form of a string that repeats (dtype, device, class names)."""
        cached = self._encoded.get(text)
        if cached is None:
            if len(self._encoded) > 4096:
                self._encoded.clear()
            cached = self._encoded[text] = _b(text)
        return cached

    def event(self, kind, name=None, holder_class=None, holder_id=0, old_key=0,
              new_key=0, detail=None, py_stack=None):
        s = EventStruct(ctypes.sizeof(EventStruct), kind, _b(name), _b(holder_class),
                        holder_id, old_key, new_key, _b(detail), _b(py_stack), 0)
        return self.lib.tpaudit_v1_record_event(ctypes.byref(s))

    def ledger(self, row):
        """Records one ledger row of the open audit: row maps the fields of
        tpaudit_ledger_t to values (one left out is 0 or NULL)."""
        s = LedgerStruct()
        s.struct_size = ctypes.sizeof(LedgerStruct)
        for field, kind in LedgerStruct._fields_[1:]:
            value = row.get(field)
            setattr(s, field, _b(value) if kind is _str else int(value or 0))
        fn = getattr(self.lib, "tpaudit_v1_record_ledger", None)
        if fn is None:
            return -1
        fn.argtypes = [ctypes.POINTER(LedgerStruct)]
        return fn(ctypes.byref(s))

    def sample(self, step, device, live_bytes, reserved_bytes=-1, py_blocks=-1):
        """Records the live memory before optimizer step `step`."""
        if self._record_sample is None:
            return -1
        s = SampleStruct(ctypes.sizeof(SampleStruct), int(step), self._words(device), int(live_bytes),
                         int(reserved_bytes), int(py_blocks))
        return self._record_sample(ctypes.byref(s))

    def phase_mark(self, step, phase, owner, device, live_bytes, reserved_bytes=-1, peak_bytes=-1):
        """Records the live memory where `phase` of step `step` starts (_phases.py)."""
        if self._record_sample is None:
            return -1
        s = SampleStruct(ctypes.sizeof(SampleStruct), int(step), self._words(device), int(live_bytes),
                         int(reserved_bytes), -1, self._words(phase), self._words(owner) if owner else None,
                         int(peak_bytes))
        return self._record_sample(ctypes.byref(s))

    def peak_part(self, step, device, owner_kind, owner, nbytes, blocks):
        """Records one part of the memory at step `step`'s peak (_peak_moment.py)."""
        fn = getattr(self.lib, "tpaudit_v1_record_peak_part", None)
        if fn is None:  # an older shim
            return -1
        s = PeakPartStruct(ctypes.sizeof(PeakPartStruct), int(step), self._words(device), _b(owner_kind),
                           _b(owner), int(nbytes), int(blocks))
        fn.argtypes = [ctypes.POINTER(PeakPartStruct)]
        return fn(ctypes.byref(s))

    def oom(self, row):
        """Records an allocation that failed for want of device memory: row
        maps the fields of tpaudit_oom_t to values (one left out is -1 for
        a number, NULL for a string; audit_id 0).  The process's count of
        them so far, or a negative status."""
        fn = getattr(self.lib, "tpaudit_v1_record_oom", None)
        if fn is None:  # an older shim
            return -1
        s = OomStruct()
        s.struct_size = ctypes.sizeof(OomStruct)
        for field, kind in OomStruct._fields_[1:]:
            value = row.get(field)
            if kind is _str:
                setattr(s, field, _b(value))
            else:
                setattr(s, field, int(value) if value is not None else (0 if field in ("audit_id", "requested", "capture_native") else -1))
        fn.argtypes = [ctypes.POINTER(OomStruct)]
        fn.restype = ctypes.c_int64
        return fn(ctypes.byref(s))

    def verdict(self, audit_id, timeout_ms=0):
        """The analyzer's verdict on ended audit audit_id, judged in the shim
        (tpaudit_v1_audit_verdict): a dict with n_findings, n_errors,
        retained_bytes, stop, exit_status, findings (one dict each, keyed
        by VERDICT_FIELDS, bytes an int) and blind (the audit saw an optimizer
        but no model parameter: it judged nothing); None when there is none."""
        fn = getattr(self.lib, "tpaudit_v1_audit_verdict", None)
        if fn is None:
            return None
        buf = ctypes.create_string_buffer(_VERDICT_TEXT)
        v = VerdictStruct()
        v.struct_size, v.audit_id, v.timeout_ms = ctypes.sizeof(VerdictStruct), int(audit_id), int(timeout_ms)
        v.findings, v.findings_cap = ctypes.cast(buf, ctypes.POINTER(ctypes.c_char)), _VERDICT_TEXT
        fn.argtypes = [ctypes.POINTER(VerdictStruct)]
        if fn(ctypes.byref(v)) != 0:
            return None
        findings = []
        for line in buf.value.decode("utf-8", "replace").splitlines():
            f = dict(zip(VERDICT_FIELDS, line.split("\t")))
            f["bytes"] = int(f.get("bytes") or 0)
            findings.append(f)
        return {"n_findings": v.n_findings, "n_errors": v.n_errors, "retained_bytes": v.retained_bytes,
                "stop": bool(v.stop), "exit_status": v.exit_status, "findings": findings, "blind": bool(v.blind)}

    def set_rank(self, rank, world_size):
        return self.lib.tpaudit_v1_set_rank(rank, world_size)

    def set_run_info(self, field, value):
        return self.lib.tpaudit_v1_set_run_info(_b(field), _b(value))


def load_recorder():
    """A NativeRecorder, or None when the shim cannot be loaded."""
    path = library_path()
    if not os.path.exists(path):
        return None
    try:
        lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        if lib.tpaudit_v1_abi_version() < 1:
            return None
        return NativeRecorder(lib)
    except (OSError, AttributeError):
        return None
