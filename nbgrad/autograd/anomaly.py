"""Anomaly detection (torch.autograd.set_detect_anomaly / detect_anomaly): keep the forward
traceback of every node, print it when its backward fails, and optionally check for NaN."""
from __future__ import annotations

import traceback
import warnings
import weakref


class _State:
    __slots__ = ("enabled", "check_nan")

    def __init__(self):
        self.enabled = False
        self.check_nan = True


STATE = _State()
_TRACES = weakref.WeakKeyDictionary()  # node -> formatted forward stack


def is_anomaly_enabled() -> bool:
    return STATE.enabled


def is_anomaly_check_nan_enabled() -> bool:
    return STATE.check_nan


class set_detect_anomaly:
    """Turn anomaly detection on or off; also a context manager restoring the previous state."""

    def __init__(self, mode: bool, check_nan: bool = True):
        self.prev = (STATE.enabled, STATE.check_nan)
        STATE.enabled, STATE.check_nan = bool(mode), bool(check_nan)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        STATE.enabled, STATE.check_nan = self.prev
        return False


class detect_anomaly:
    """Enable anomaly detection inside the block (torch.autograd.detect_anomaly)."""

    def __init__(self, check_nan: bool = True):
        self.check_nan = check_nan

    def __enter__(self):
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the runtime "
                      "and should only be enabled for debugging.", UserWarning, stacklevel=2)
        self.prev = (STATE.enabled, STATE.check_nan)
        STATE.enabled, STATE.check_nan = True, self.check_nan
        return self

    def __exit__(self, *exc):
        STATE.enabled, STATE.check_nan = self.prev
        return False


def record(node):
    """Called for each new node while anomaly mode is on: keep the user's part of the stack."""
    from ..provenance import _PKG
    frames = [f for f in traceback.extract_stack() if not f.filename.startswith(_PKG)]
    _TRACES[node] = "".join(traceback.format_list(frames))


def run_node(node, gs, create_graph, check_nan):
    """Run one node's backward; on failure, show where its forward ran (and check for NaN)."""
    try:
        out = node._backward(gs, create_graph)
        if check_nan:
            _check_nan(node, out)
    except Exception:
        tb = _TRACES.get(node)
        if tb is not None:
            warnings.warn(f"Error detected in {node.name()}. Traceback of forward call that caused "
                          f"the error:\n{tb}", UserWarning, stacklevel=2)
        raise
    return out


def _check_nan(node, out):
    from ..backend import get_array_module
    for i, g in enumerate(out):
        if g is None:
            continue
        arr = getattr(g, "_data", g)
        xp = get_array_module(arr)
        if arr.dtype.kind == "f" and bool(xp.isnan(arr).any()):
            raise RuntimeError(f"Function '{node.name()}' returned nan values in its {i}th "
                               "output.")
