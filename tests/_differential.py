"""Run one program in torch and in nbgrad and describe everything observable, for comparison.

A program is a function `prog(T, env)` where `T` is the library (torch or nbgrad) and `env` a dict
it may fill with tensors to observe. `observe(T, prog)` returns a description: for every tensor
in `env` its values, `.grad`, grad_fn name, requires_grad, is_leaf, `_version`, the node names
of its graph three levels down and, for a view, its base's shape and strides and its own strides;
or the error's type and text when the program raised. `assert_same(prog)` runs both and compares.
"""
from __future__ import annotations

import warnings

import numpy as np
import torch

import nbgrad


def _arr(t):
    if t is None:
        return None
    return np.asarray(t.detach().numpy() if hasattr(t, "detach") else t, dtype=np.float64)


def _describe(t):
    if not hasattr(t, "requires_grad"):
        return ("value", t)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = t.grad
    try:
        fn = t.grad_fn
        name = None if fn is None else fn.name().split("::")[-1]
        leaf = t.is_leaf
        graph = _graph(fn, 3)
    except RuntimeError as e:  # a view whose grad_fn PyTorch refuses to regenerate
        name = leaf = graph = ("RuntimeError", str(e).split("\n")[0])
    base = t._base
    view = None if base is None else (tuple(base.shape), _strides(base), _strides(t))
    return ("tensor", _arr(t), _arr(g), name, t.requires_grad, leaf, t._version, graph, view)


def _strides(t):
    """A tensor's strides, those of its size-1 dims left out (their stride means nothing: a
    product's result may carry any there)."""
    return tuple(st if n != 1 else None for n, st in zip(t.shape, t.stride()))


def _graph(fn, depth):
    """The node names of the graph below `fn`, `depth` levels of next_functions deep."""
    if fn is None:
        return None
    name = fn.name().split("::")[-1]
    if depth == 0:
        return name
    return (name,) + tuple((_graph(f, depth - 1), nr) for f, nr in fn.next_functions)


def observe(T, prog):
    env = {}
    err = None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            prog(T, env)
    except Exception as e:  # noqa: BLE001 - the error is what we compare
        # nbgrad names its types nbgrad.DoubleTensor, nbgrad::autograd::CopySlices where torch
        # says torch.DoubleTensor, torch::autograd::CopySlices
        err = (type(e).__name__, str(e).split("\n")[0].replace("torch.", "nbgrad.")
               .replace("torch::", "nbgrad::"))
    return {k: _describe(v) for k, v in env.items()}, err


def _same(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if a is None or b is None or a.shape != b.shape:
            return False
        return np.allclose(a, b, equal_nan=True, rtol=1e-6, atol=1e-9)
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def differences(prog):
    """What differs between torch and nbgrad running `prog` (an empty list when nothing)."""
    (te, terr), (ne, nerr) = observe(torch, prog), observe(nbgrad, prog)
    out = []
    if terr != nerr:
        out.append(("error", terr, nerr))
    for k in te.keys() | ne.keys():
        if k not in te or k not in ne:
            out.append((k, "missing", te.get(k), ne.get(k)))
            continue
        fields = ("kind", "value", "grad", "grad_fn", "requires_grad", "is_leaf", "version",
                  "graph", "view")
        for f, a, b in zip(fields, te[k], ne[k]):
            if not _same(a, b):
                out.append((k, f, a, b))
    return out


def assert_same(prog):
    d = differences(prog)
    assert not d, d
