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
    """True while anomaly detection is on (torch.is_anomaly_enabled)."""
    return STATE.enabled


def is_anomaly_check_nan_enabled() -> bool:
    """True when anomaly detection also checks gradients for NaN
    (torch.is_anomaly_check_nan_enabled; True by default, even while detection is off)."""
    return STATE.check_nan


def set_anomaly_enabled(enabled: bool, check_nan: bool = True) -> None:
    """Turn anomaly detection on or off, and its NaN check (torch.set_anomaly_enabled)."""
    STATE.enabled, STATE.check_nan = bool(enabled), bool(check_nan)


class set_detect_anomaly:
    """Turn anomaly detection on or off now (torch.autograd.set_detect_anomaly(mode, check_nan));
    used as a context manager, the previous state is back on exit.

    Args:
        mode: anomaly detection on (True) or off (False).
        check_nan: while on, raise when a node's backward returns NaN (default True).
    """

    def __init__(self, mode: bool, check_nan: bool = True):
        self.prev = (STATE.enabled, STATE.check_nan)
        set_anomaly_enabled(mode, check_nan)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        set_anomaly_enabled(*self.prev)
        return False


class detect_anomaly:
    """Anomaly detection inside the block (torch.autograd.detect_anomaly): every node keeps the
    traceback of its forward call, shown as a warning when its backward fails; with `check_nan`
    (default True), a backward returning NaN raises. Warns that it is on when made, as PyTorch."""

    def __init__(self, check_nan: bool = True):
        self.check_nan = check_nan
        self.prev = (STATE.enabled, STATE.check_nan)
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the runtime "
                      "and should only be enabled for debugging.", UserWarning, stacklevel=2)

    def __enter__(self):
        self.prev = (STATE.enabled, STATE.check_nan)
        set_anomaly_enabled(True, self.check_nan)
        return self

    def __exit__(self, *exc):
        set_anomaly_enabled(*self.prev)
        return False


_RUNNING = [None]  # the node whose backward is running (nodes it makes under create_graph)
_PARENTS = weakref.WeakKeyDictionary()  # node made in a backward -> the node that ran it


def record(node):
    """Called for each new node while anomaly mode is on: keep the user's part of the stack,
    and, for a node made by a backward under create_graph, the node whose backward made it."""
    from ..provenance import _PKG
    frames = [f for f in traceback.extract_stack() if not f.filename.startswith(_PKG)]
    _TRACES[node] = "".join(traceback.format_list(frames))
    if _RUNNING[0] is not None:
        _PARENTS[node] = _RUNNING[0]


def run_node(node, gs, create_graph, check_nan):
    """Run one node's backward; on failure, show where its forward ran (and check for NaN),
    then, as PyTorch, where the forward of each node whose backward made it ran."""
    prev = _RUNNING[0]
    _RUNNING[0] = node
    try:
        out = node._backward(gs, create_graph)
        if check_nan:
            _check_nan(node, out)
    except Exception:
        tb = _TRACES.get(node)
        if tb is not None:
            warnings.warn(f"Error detected in {node.name()}. Traceback of forward call that caused "
                          f"the error:\n{tb}", UserWarning, stacklevel=2)
            parent = _PARENTS.get(node)
            while parent is not None:
                tb = _TRACES.get(parent)
                if tb is not None:
                    warnings.warn(f"\n\nPrevious calculation was induced by {parent.name()}. "
                                  "Traceback of forward call that induced the previous "
                                  f"calculation:\n{tb}", UserWarning, stacklevel=2)
                parent = _PARENTS.get(parent)
        raise
    finally:
        _RUNNING[0] = prev
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
