"""A float32 graph keeps float32 end to end, as torch's: for every program of tests/_programs.py
(every op case of the suite and every nn layer) run in float32, the dtype of each output, of
each first gradient (inputs and parameters, built under create_graph) and of each second
gradient (of a weighted sum of the first) is torch's. A formula that mixes in a float64 constant
or an int64 `where` (numpy promotes them) would turn a float32 gradient into float64.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import nbgrad
from _programs import floating, programs

PROGRAMS = programs()


def _names(ts):
    return [None if t is None else str(t.dtype).split(".")[-1] for t in ts]


def _dtypes(T, run):
    """dtype names: outputs, first gradients on arrays, first gradients built under
    create_graph, second gradients (of a weighted sum of the first); None where a step raised
    (torch has no double backward for some ops, nbgrad for a few more: a separate item)."""
    res = [None, None, None, None]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            leaves, outs = run(T, np.float32)
        except RuntimeError:  # a case mixing in float64 constants: torch refuses float32
            return res
        res[0] = _names([o for o in outs if floating(o)])
        roots = [o for o in outs if floating(o) and o.requires_grad]
        if not roots or not leaves:
            return res
        gs = [T.tensor(np.cos(np.arange(o.numel())).reshape(tuple(o.shape)), dtype=o.dtype)
              for o in roots]
        try:
            res[1] = _names(T.autograd.grad(roots, leaves, gs, retain_graph=True,
                                            allow_unused=True))
            first = T.autograd.grad(roots, leaves, gs, create_graph=True, allow_unused=True)
        except Exception:  # noqa: BLE001
            return res
        res[2] = _names(first)
        diff = [g for g in first if g is not None and g.requires_grad]
        try:
            s = sum((g * g).sum() for g in diff)
            res[3] = _names(T.autograd.grad(s, leaves, allow_unused=True))
        except Exception:  # noqa: BLE001
            pass
        return res


def _agree(a, b):
    """Equal dtype names, position by position, where both sides have one."""
    if a is None or b is None:
        return True
    return len(a) == len(b) and all(x is None or y is None or x == y for x, y in zip(a, b))


@pytest.mark.parametrize("name,run", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_float32_stays_float32(name, run):
    want = _dtypes(torch, run)
    if want[0] is None:
        pytest.skip("torch refuses the float32 version of this case")
    got = _dtypes(nbgrad, run)
    for what, a, b in zip(("outputs", "first-order gradients", "first order, create_graph",
                           "second-order gradients"), want, got):
        assert _agree(a, b), f"{what}: torch {a}, nbgrad {b}"
    assert got[1] is not None or want[1] is None, "first-order gradients"


def test_log_sigmoid_gradient_is_float32():
    for T in (torch, nbgrad):
        x = T.tensor([-1.0, 2.0], requires_grad=True)
        T.nn.LogSigmoid()(x).sum().backward()
        assert x.grad.dtype == T.float32
