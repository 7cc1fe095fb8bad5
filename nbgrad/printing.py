"""repr of tensors exactly as PyTorch prints them: tensor([1., 2.], requires_grad=True).

The rules are torch's (``torch/_tensor_str.py``), restated: one formatter per tensor decides from
the elements shown (the summarised ones when the tensor has more than ``threshold`` elements)
whether floats print as integers (``1.``), fixed (``1.2500``) or scientific (``1.2500e+08``), and
the common width, so columns align sign included; rows wrap at ``linewidth``; the suffixes
(``dtype=``, ``grad_fn=``, ...) move to their own line when the last line would get too long.
"""
from __future__ import annotations

import contextlib
import math

import numpy as np

from . import backend, dtypes

__all__ = ["set_printoptions", "get_printoptions", "printoptions", "tensor_repr"]

_PROFILES = {
    "default": {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80},
    "short": {"precision": 2, "threshold": 1000, "edgeitems": 2, "linewidth": 80},
    "full": {"precision": 4, "threshold": math.inf, "edgeitems": 3, "linewidth": 80},
}
_OPTS = dict(_PROFILES["default"], sci_mode=None)


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None,
                     profile=None, sci_mode=None):
    """Set how tensors print (torch.set_printoptions).

    Args:
        precision (int): digits after the decimal point (default 4).
        threshold (int | float): more elements than this are summarised with "..." (1000).
        edgeitems (int): items shown at each end of a summarised dimension (3).
        linewidth (int): characters per line before wrapping (80).
        profile (str): "default", "short" (precision 2, edgeitems 2) or "full" (no summary);
            applied first, then the other arguments. An unknown name is ignored, as in torch.
        sci_mode (bool | None): force scientific notation on (True) or off (False); None (the
            default, and what every call without it sets) lets the formatter decide.
    """
    if profile in _PROFILES:
        _OPTS.update(_PROFILES[profile])
    for key, value in (("precision", precision), ("threshold", threshold),
                       ("edgeitems", edgeitems), ("linewidth", linewidth)):
        if value is not None:
            _OPTS[key] = value
    _OPTS["sci_mode"] = sci_mode


def get_printoptions():
    """The current print options as a dict (torch._tensor_str.get_printoptions)."""
    return dict(_OPTS)


@contextlib.contextmanager
def printoptions(**kwargs):
    """Context manager: ``with printoptions(precision=2): print(t)`` (torch._tensor_str's)."""
    old = get_printoptions()
    set_printoptions(**kwargs)
    try:
        yield
    finally:
        set_printoptions(**old)


class _Formatter:
    """One number format for all elements of a tensor, decided from ``shown`` (a 1-d array)."""

    def __init__(self, shown):
        self.floating = shown.dtype.kind == "f"
        self.int_mode, self.sci_mode, self.width = True, False, 1
        p = _OPTS["precision"]
        if not self.floating:
            self.width = max([len(str(v)) for v in shown.tolist()], default=1)
            return
        vals = shown.astype(np.float64)
        nonzero = vals[np.isfinite(vals) & (vals != 0)]
        if nonzero.size == 0:
            return  # all zero / nan / inf: integer style, and sci_mode is not consulted
        mags = np.abs(nonzero)
        lo, hi = float(mags.min()), float(mags.max())
        self.int_mode = bool(np.all(nonzero == np.ceil(nonzero)))
        self.sci_mode = (hi / lo > 1000.0 or hi > 1.0e8 or lo < 1.0e-4
                         if _OPTS["sci_mode"] is None else _OPTS["sci_mode"])
        if self.sci_mode:
            self.width = max(len(f"{v:.{p}e}") for v in nonzero.tolist())
        elif self.int_mode:
            self.width = max(len(f"{v:.0f}") + 1 for v in nonzero.tolist())
        else:
            self.width = max(len(f"{v:.{p}f}") for v in nonzero.tolist())

    def format(self, v):
        if not self.floating:
            s = str(v)
        elif self.sci_mode:
            s = f"{v:{self.width}.{_OPTS['precision']}e}"
        elif self.int_mode:
            s = f"{v:.0f}" + ("" if math.isinf(v) or math.isnan(v) else ".")
        else:
            s = f"{v:.{_OPTS['precision']}f}"
        return s.rjust(self.width)


def _summarized(a):
    """The elements a summarised print shows: edgeitems from each end of every dimension."""
    e = _OPTS["edgeitems"]
    if a.ndim == 0:
        return a
    n = a.shape[0]
    if a.ndim == 1:
        return np.concatenate((a[:e], a[-e:])) if n > 2 * e else a
    if not e:
        return np.empty([0] * a.ndim, a.dtype)
    rows = [*range(e), *range(n - e, n)] if n > 2 * e else range(n)
    return np.stack([_summarized(a[i]) for i in rows])


def _vector(a, indent, summarize, fmt):
    e = _OPTS["edgeitems"]
    per_line = max(1, int((_OPTS["linewidth"] - indent) // (fmt.width + 2)))
    if summarize and not e:
        items = ["..."]
    elif summarize and a.shape[0] > 2 * e:
        items = ([fmt.format(v) for v in a[:e].tolist()] + [" ..."] +
                 [fmt.format(v) for v in a[-e:].tolist()])
    else:
        items = [fmt.format(v) for v in a.tolist()]
    lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
    return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"


def _body(a, indent, summarize, fmt):
    if a.ndim == 0:
        return fmt.format(a.item())
    if a.ndim == 1:
        return _vector(a, indent, summarize, fmt)
    e, n = _OPTS["edgeitems"], a.shape[0]
    if summarize and n > 2 * e:
        rows = ([_body(a[i], indent + 1, summarize, fmt) for i in range(e)] + ["..."] +
                [_body(a[i], indent + 1, summarize, fmt) for i in range(n - e, n)])
    else:
        rows = [_body(a[i], indent + 1, summarize, fmt) for i in range(n)]
    return "[" + ("," + "\n" * (a.ndim - 1) + " " * (indent + 1)).join(rows) + "]"


def format_array(a, indent=0):
    """The bracketed body torch prints for an array (no "tensor(" prefix, no suffixes)."""
    a = backend.to_device(a, backend.CPU)
    if a.size == 0:
        return "[]"
    summarize = a.size > _OPTS["threshold"]
    fmt = _Formatter(_summarized(a).reshape(-1) if summarize else a.reshape(-1))
    return _body(a, indent, summarize, fmt)


def _add_suffixes(text, suffixes, indent):
    parts = [text]
    last = len(text) - text.rfind("\n") + 1
    for s in suffixes:
        if last + len(s) + 2 > _OPTS["linewidth"]:
            parts.append(",\n" + " " * indent + s)
            last = indent + len(s)
        else:
            parts.append(", " + s)
            last += len(s) + 2
    return "".join(parts) + ")"


def tensor_repr(t):
    """``repr(t)`` as torch writes it (dtypes named ``nbgrad.float64`` where torch says torch.)."""
    a = t._data
    prefix = "tensor(" if type(t).__name__ in ("Tensor", "Parameter") else \
        f"{type(t).__name__}("
    indent = len(prefix)
    suffixes = []
    if t.device.type != backend.get_default_device().type:
        suffixes.append(f"device='{t.device}'")
    d = dtypes.from_np(a.dtype)
    default = dtypes.get_default_dtype()
    if a.size == 0:
        if a.ndim != 1:
            suffixes.append(f"size={tuple(a.shape)}")
        if d is not default:
            suffixes.append(f"dtype={d}")
        body = "[]"
    else:
        if not _OPTS["edgeitems"]:
            suffixes.append(f"size={tuple(a.shape)}")
        if d not in (default, dtypes.int64, dtypes.bool_):
            suffixes.append(f"dtype={d}")
        body = format_array(a, indent)
    fn = t._grad_fn
    if fn is not None:
        suffixes.append(f"grad_fn=<{type(fn).__name__}>")  # (torch: CopySlices, not its name())
    elif t._requires_grad:
        suffixes.append("requires_grad=True")
    return _add_suffixes(prefix + body, suffixes, indent)
