"""repr of tensors in PyTorch's style: tensor([1., 2.], requires_grad=True)."""
from __future__ import annotations

import numpy as np

from . import backend, dtypes

_OPTS = {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80}


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, **_):
    """torch.set_printoptions (precision, threshold, edgeitems, linewidth)."""
    for k, v in (("precision", precision), ("threshold", threshold), ("edgeitems", edgeitems),
                 ("linewidth", linewidth)):
        if v is not None:
            _OPTS[k] = v


def _fmt_array(a):
    a = backend.to_device(a, backend.CPU)
    if a.dtype.kind == "f":
        # PyTorch's _Formatter: integral values print as "1."; scientific notation when the
        # nonzero magnitudes span more than 1000x, exceed 1e8, or (non-integral) go below 1e-4
        finite = a[np.isfinite(a)]
        nz = np.abs(finite[finite != 0]).astype(np.float64)
        integral = finite.size == 0 or bool(np.all(finite == np.round(finite)))
        big = bool(nz.size) and (nz.max() / nz.min() > 1000.0 or nz.max() > 1e8 or
                                 (not integral and nz.min() < 1e-4))
        if integral and not big:
            fm = {"float_kind": lambda x: f"{x:.0f}." if np.isfinite(x) else str(x)}
            return np.array2string(a, separator=", ", formatter=fm, prefix="tensor(",
                                   threshold=_OPTS["threshold"], edgeitems=_OPTS["edgeitems"],
                                   max_line_width=_OPTS["linewidth"])
        p = _OPTS["precision"]
        fm = {"float_kind": (lambda x: f"{x:.{p}e}") if big else (lambda x: f"{x:.{p}f}")}
        return np.array2string(a, separator=", ", formatter=fm, prefix="tensor(",
                               threshold=_OPTS["threshold"], edgeitems=_OPTS["edgeitems"],
                               max_line_width=_OPTS["linewidth"])
    if a.dtype.kind == "b":
        return np.array2string(a, separator=", ", prefix="tensor(",
                               threshold=_OPTS["threshold"])
    return np.array2string(a, separator=", ", prefix="tensor(", threshold=_OPTS["threshold"],
                           edgeitems=_OPTS["edgeitems"], max_line_width=_OPTS["linewidth"])


def tensor_repr(t):
    a = t._data
    body = _fmt_array(a)
    extras = []
    if a.size == 0 and a.ndim != 1:
        extras.append(f"size={tuple(a.shape)}")
    d = dtypes.from_np(a.dtype)
    if d not in (dtypes.get_default_dtype(), dtypes.int64, dtypes.bool_) or (
            a.size == 0 and d is not dtypes.get_default_dtype()):
        extras.append(f"dtype={d}")
    if t.device.type != "cpu":
        extras.insert(0, f"device='{t.device}'")
    fn = t._grad_fn
    if fn is not None:
        extras.append(f"grad_fn=<{fn.name()}>")
    elif t._requires_grad:
        extras.append("requires_grad=True")
    return "tensor(" + body + "".join(", " + e for e in extras) + ")"
