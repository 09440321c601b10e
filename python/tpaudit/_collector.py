"""Python's cyclic garbage collector held off while the probe works inside
the program (an audit, a growth sample, the out-of-memory observer, the
module-call listener).  The probe makes and drops many objects; a
collection they set off would free the program's unreachable cycles, run
their __del__ and free their tensors at another moment than without the
probe (tests/hostile/hostile_probe.py `collections`).  Held off, none
starts inside the probe's work; the objects the probe keeps (its records,
a module it imports) still count toward the program's next collection, as
any library's would.  A program that turned the collector off keeps it off."""
import gc


class held:
    """with held(): the body runs with no automatic collection, and the
    collector's state is restored as the very last step: no object is made
    after it in the probe's frames, so a collection the program's next
    allocation sets off starts in the program's code, not the probe's."""
    __slots__ = ("was_enabled",)

    def __enter__(self):
        self.was_enabled = gc.isenabled()
        gc.disable()

    def __exit__(self, *_exc):
        if self.was_enabled:
            gc.enable()
