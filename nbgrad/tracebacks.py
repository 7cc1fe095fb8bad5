"""Errors raised by nbgrad point at the user's line, as PyTorch's (whose internals are C++).

In plain Python, an uncaught exception raised inside nbgrad is printed without nbgrad's own
frames: `install()` (called on import) wraps `sys.excepthook`, and the user's frames are kept in
their order. In IPython and pytest, nbgrad's frames on the error paths carry
`__tracebackhide__ = True`, which both honour. Set the environment variable
NBGRAD_FULL_TRACEBACK=1 to see every frame (when debugging nbgrad itself).
"""
from __future__ import annotations

import os
import sys
import types

from .provenance import LIB_FILES


def user_traceback(tb):
    """`tb` without the frames of nbgrad's files, or None if nothing else is left."""
    kept = []
    while tb is not None:
        if tb.tb_frame.f_code.co_filename not in LIB_FILES:
            kept.append(tb)
        tb = tb.tb_next
    out = None
    for t in reversed(kept):
        out = types.TracebackType(out, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return out


def _raised_in_nbgrad(tb):
    while tb.tb_next is not None:
        tb = tb.tb_next
    return tb.tb_frame.f_code.co_filename in LIB_FILES


def _excepthook(etype, value, tb):
    if tb is not None and value is not None and _raised_in_nbgrad(tb) and \
            not os.environ.get("NBGRAD_FULL_TRACEBACK"):
        tb = user_traceback(tb) or tb
        value = value.with_traceback(tb)
    _PREVIOUS[0](etype, value, tb)


_PREVIOUS = [sys.excepthook]


def install():
    """Make uncaught nbgrad errors show the user's frames only (idempotent)."""
    if sys.excepthook is not _excepthook:
        _PREVIOUS[0] = sys.excepthook
        sys.excepthook = _excepthook
