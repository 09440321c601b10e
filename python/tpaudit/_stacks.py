"""The Python stacks the probe records, as "file:line:function" lines,
innermost first, the probe's own frames (_unmeasured.own_code) left out.

One formatter (text), two kinds of stack:
- an event's (event_stack: where a parameter was made, a module replaced):
  every frame of the caller's, torch's and installed packages' included,
  at most EVENT_LINES;
- a user's (user_stack, or text(..., user_first=True) of frames some other
  source gives, as the CUDA allocator's history does: a held tensor's
  creation line, an OOM's stack): the .py frames outside torch and
  inductor's generated code, the user's
  before those of installed packages, at most USER_LINES, read from the
  4 x USER_LINES innermost frames.
Reading a stack runs no code of the program: frames' file names, lines and
function names only.
"""
import os

from ._unmeasured import own_code

EVENT_LINES = 32
USER_LINES = 24
TORCH_PART = os.sep + "torch" + os.sep        # in the file names of torch's frames
PACKAGES_PART = "-packages" + os.sep          # in those of installed packages (site- or dist-packages)
# inductor's generated code, in its cache directory (by default
# <tmp>/torchinductor_<user>): a compiled model allocates there, and the
# user's line is the one that called the compiled model
GENERATED_PARTS = tuple(p for p in (os.sep + "torchinductor_", os.environ.get("TORCHINDUCTOR_CACHE_DIR")) if p)


def frames_from(frame, most=None):
    """(file, line, function) of frame and of its callers, innermost first,
    at most `most` (None: all)."""
    while frame is not None and most != 0:
        code = frame.f_code
        yield code.co_filename, frame.f_lineno, code.co_name
        frame = frame.f_back
        most = None if most is None else most - 1


def text(frames, limit, user_first):
    """The lines of frames ((file, line, function), innermost first), at most
    limit, the probe's left out; with user_first only .py files outside
    torch, the user's before those of installed packages."""
    user, lib = [], []
    for name, line, function in frames:
        if len(user) + len(lib) >= limit:
            break
        if own_code(name) or user_first and (not name.endswith(".py") or TORCH_PART in name
                                             or any(part in name for part in GENERATED_PARTS)):
            continue
        (lib if user_first and PACKAGES_PART in name else user).append("%s:%d:%s" % (name, line, function))
    return "\n".join(user + lib)


def event_stack(frame):
    """Every frame from frame outwards (an event's stack)."""
    return text(frames_from(frame), EVENT_LINES, False)


def user_stack(frame, limit=USER_LINES):
    """The user's stack from frame outwards ("" when it has no user line)."""
    return text(frames_from(frame, 4 * limit), limit, True)
