# host_sigint.py - issue item 3: Ctrl-C must still raise KeyboardInterrupt,
# so the script can save its checkpoint and exit 5.  With the shim loaded it
# also records an event first (through ctypes), as the probe would.
import ctypes
import os
import signal
import sys
import time



class Event(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("kind", ctypes.c_int), ("name", ctypes.c_char_p),
                ("holder_class", ctypes.c_char_p), ("holder_id", ctypes.c_uint64),
                ("old_key", ctypes.c_uint64), ("new_key", ctypes.c_uint64), ("detail", ctypes.c_char_p),
                ("py_stack", ctypes.c_char_p), ("capture_native", ctypes.c_int)]


lib = os.environ.get("TPAUDIT_LIBRARY")
if lib:
    shim = ctypes.CDLL(lib)
    shim.tpaudit_v1_record_event(ctypes.byref(Event(ctypes.sizeof(Event), 2, b"w", None, 0, 0, 1)))
    shim.tpaudit_v1_flush()
try:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(5)
    print("no KeyboardInterrupt")
    sys.exit(1)
except KeyboardInterrupt:
    print("saved checkpoint")
    sys.exit(5)
