"""Every row-level case and every nn layer of the test suite as one kind of program, runnable in
either library and in float32 or float64: the differential checks that work on *any* op
(in-place writes into its outputs, dtypes kept end to end, special points) draw from here.

A program is `(name, run)`; `run(T, dtype, special=None)` builds the inputs (and, for a layer,
the layer with torch's initial weights copied through numpy) in library `T` and returns
`(leaves, outputs)`: the tensors that require grad (inputs first, then parameters) and the op's
outputs. `special(array) -> array`, when given, remakes each floating input that requires grad
(a zero put in, ties, an inf: tests/test_special_points.py). The sources
are the suite's own lists (test_ops.py's CASES, test_ops_ext.py's, test_real_programs.py's, the
nn rows of test_nn_rows.py, the activations and composite losses of test_nn_functional_more.py,
the layers of test_nn_layers.py, test_nn_layers_more.py and test_nn_modules_more.py), so a case
added there is checked here too.
"""
from __future__ import annotations

import zlib

import numpy as np
import torch

import nbgrad
import test_nn_functional_more
import test_nn_layers
import test_nn_layers_more
import test_nn_modules_more
import test_nn_rows
import test_ops
import test_ops_ext
import test_real_programs

# random in their forward (values differ between the libraries by design)
RANDOM = ("dropout", "Dropout", "rrelu", "RReLU")


def _cast(a, dtype):
    return a.astype(dtype) if dtype is not None and a.dtype.kind == "f" else a


# how torch's floating inputs are laid out in memory: "contiguous" (as T.tensor makes them), or
# "strided" (every other element of a buffer twice as wide: torch's kernels then take their
# scalar loop, where they vectorise a contiguous input; test_special_points.py measures it)
LAYOUT = ["contiguous"]


def _strided(a):
    if a.ndim == 0 or a.size == 0:
        return torch.tensor(a.copy())
    big = torch.zeros(*a.shape[:-1], 2 * a.shape[-1], dtype=torch.from_numpy(a[:0]).dtype)
    t = big[..., ::2]
    t.copy_(torch.from_numpy(a.copy()))
    return t


def _tensor(T, a, rg, dtype, special=None):
    a = _cast(np.array(a), dtype)
    if special is not None and rg and a.dtype.kind == "f":
        a = special(a.copy())
    if T is torch and LAYOUT[0] == "strided" and a.dtype.kind == "f":
        t = _strided(a)
    else:
        t = T.tensor(a.copy())
    if rg and a.dtype.kind == "f":
        t.requires_grad_(True)
    return t


def _case(case):
    def run(T, dtype=None, special=None):
        rng = np.random.default_rng(zlib.crc32(case.name.encode()))
        xs, leaves = [], []
        for spec in case.specs:
            a, rg = test_ops._array(spec, rng)
            if rg is None:
                xs.append(a)
                continue
            t = _tensor(T, a, rg, dtype, special)
            xs.append(t)
            if t.requires_grad:
                leaves.append(t)
        f = case.f if T is nbgrad else case.tf
        return leaves, test_ops._outs(f(T, *xs))
    return run


def _functional(fn, arrays, grad, with_lib=True):
    def run(T, dtype=None, special=None):
        xs = [_tensor(T, a, g, dtype, special) for a, g in zip(arrays, grad)]
        F = T.nn.functional
        y = fn(T, F, *xs) if with_lib else fn(F, *xs)
        return [x for x in xs if x.requires_grad], test_ops._outs(y)
    return run


def _module(make, x):
    def run(T, dtype=None, special=None):
        torch.manual_seed(0)  # the same initial weights on every run
        mt = make(torch.nn).double()
        m = mt if T is torch else make(nbgrad.nn).double()
        if T is not torch:
            m.load_state_dict({k: nbgrad.tensor(v.detach().numpy().copy())
                               for k, v in mt.state_dict().items()})
        if dtype == np.float32:
            m = m.float()
        xt = _tensor(T, x, True, dtype, special)
        leaves = ([xt] if xt.requires_grad else []) + [p for p in m.parameters()]
        return leaves, test_ops._outs(m(xt))
    return run


def programs():
    """Every program, in a fixed order (see the module doc)."""
    out = []
    for case in test_ops.CASES + test_ops_ext.CASES + test_real_programs.CASES:
        if case.grad:
            out.append(("op:" + case.name, _case(case)))
    for name, fn, arrays, grad, *_ in test_nn_rows.CASES:
        out.append(("nn_row:" + name, _functional(fn, arrays, grad)))
    x = test_nn_functional_more.rnd(3, 4, scale=3.0)
    for name, fn in test_nn_functional_more.ACTIVATIONS:
        out.append(("activation:" + name, _functional(fn, [x], (1,), with_lib=False)))
    xs = [test_nn_functional_more.rnd(4, 5, seed=s) for s in range(3)]
    xs[2] = abs(xs[2]) + 0.1  # gaussian_nll's variance
    for name, fn, grad in test_nn_functional_more.COMPOSITE:
        out.append(("loss:" + name, _functional(fn, xs, grad, with_lib=False)))
    for name, make, shape in test_nn_layers.LAYER_CASES:
        out.append(("layer:" + name, _module(make, test_nn_layers.rnd(*shape) * 2 + 0.5)))
    for expr, shape in test_nn_layers_more.MODULES:
        if not isinstance(shape, np.ndarray):
            make = lambda nn, expr=expr: eval("nn." + expr, {"nn": nn})  # noqa: E731
            out.append(("layer:" + expr, _module(make, test_nn_layers.rnd(*shape) * 2 + 0.5)))
    for expr in test_nn_modules_more.ACT_MODULES:
        expr = expr.replace("True", "False")  # in-place on the input leaf: torch refuses it
        make = lambda nn, expr=expr: eval("nn." + expr, {"nn": nn})  # noqa: E731
        out.append(("layer:" + expr, _module(make, test_nn_layers.rnd(2, 3, 4, 4) * 3)))
    for name, make, x in test_nn_rows.MODULES:
        if x.dtype.kind == "f":
            out.append(("layer:" + name, _module(make, x)))
    seen = set()
    uniq = []
    for name, run in out:
        if name not in seen and not any(r in name for r in RANDOM):
            seen.add(name)
            uniq.append((name, run))
    return uniq


def floating(t):
    return isinstance(t, (torch.Tensor, nbgrad.Tensor)) and t.dtype in (
        torch.float32, torch.float64, nbgrad.float32, nbgrad.float64)
