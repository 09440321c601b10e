"""The torch releases the probe supports, and the one line it says outside them.

Every torch API the probe uses exists from MINIMUM to MAXIMUM or has a
fallback there (docs/PROBE.md, "Torch versions", lists each).  On a torch
outside the range the probe says so in one "tpaudit:" line and runs as
best it can: a part that then fails turns off alone (_parts.py).
"""
MINIMUM = (2, 1)
MAXIMUM = (2, 11)


def release(version):
    """(major, minor) of a torch version string ("2.2.1+cu121" -> (2, 2)), or None."""
    try:
        major, minor = str(version).split(".")[:2]
        return int(major), int("".join(c for c in minor if c.isdigit()) or "x")
    except ValueError:
        return None


def supported_range():
    return "%d.%d to %d.%d" % (MINIMUM + MAXIMUM)


def check(torch, say):
    """Says one line when torch's release is outside the supported range;
    True when it is inside."""
    version = getattr(torch, "__version__", "?")
    found = release(version)
    if found is not None and MINIMUM <= found <= MAXIMUM:
        return True
    say("tpaudit: torch %s is outside the probe's supported range (torch %s); the probe runs as best it can, "
        "and a part that fails turns off alone with a line of its own" % (version, supported_range()))
    return False
