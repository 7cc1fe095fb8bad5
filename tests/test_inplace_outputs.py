"""In-place writes into the output of every row and every nn layer, against torch.

For every program of tests/_programs.py (each op case of the suite and each layer), each floating
output is written in place by each of `mul_`, `add_`, `relu_`, `sigmoid_` and an item
assignment, then the whole program is differentiated. nbgrad must give what torch gives: the same
gradients of every input and parameter, or the same error (torch's "modified by an inplace
operation ... output 0 of X" names the saved tensor that went stale; the refusals of views).
What an op saves decides which write breaks its backward; a row whose output shares memory with
what its backward reads, without a version check, computes a silently wrong gradient instead.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import nbgrad
from _programs import floating, programs

PROGRAMS = programs()


def _write(name, y):
    if name == "mul_":
        y.mul_(2.0)
    elif name == "add_":
        y.add_(1.0)
    elif name == "relu_":
        y.relu_()
    elif name == "sigmoid_":
        y.sigmoid_()
    elif y.ndim and y.shape[0]:
        y[0] = 0.5
    else:
        y[...] = 0.5


WRITES = ("mul_", "add_", "relu_", "sigmoid_", "setitem")


# torch's C++ compositions record overloads Python code cannot reach (at::norm's NormBackward1
# where nbgrad records linalg_vector_norm's node, as test_nn_functional_more.py's _CPP_ONLY)
_CPP_ONLY = {"of Norm1,": "of LinalgVectorNorm,"}


def _message(e):
    text = str(e).splitlines()[0].replace("torch.", "nbgrad.")
    for a, b in _CPP_ONLY.items():
        text = text.replace(a, b)
    return f"{type(e).__name__}: {text}"


def _attempt(T, run, k, write):
    """Run the program, write output k in place, backward from every output: the gradients of
    the leaves, or the error and at which step it came."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        leaves, outs = run(T, None)
        y = outs[k]
        try:
            _write(write, y)
        except RuntimeError as e:
            return "write", _message(e)
        roots, grads = [], []
        for j, o in enumerate(outs):
            if floating(o) and o.requires_grad:
                roots.append(o)
                g = np.cos(np.arange(o.numel()) + j).reshape(tuple(o.shape))
                grads.append(T.tensor(g, dtype=o.dtype))
        if not roots:
            return "nothing", None
        try:
            got = T.autograd.grad(roots, leaves, grads, allow_unused=True)
        except RuntimeError as e:
            return "backward", _message(e)
        return "grads", [None if g is None else g.detach().numpy().copy() for g in got]


def check_program(run):
    """(configurations drawn, disagreements as text) for one program."""
    _, outs = run(torch, None)
    f32 = any(floating(o) and o.dtype == torch.float32 for o in outs)
    drawn, bad = 0, []
    for k, o in enumerate(outs):
        if not floating(o):
            continue
        for write in WRITES:
            drawn += 1
            want = _attempt(torch, run, k, write)
            got = _attempt(nbgrad, run, k, write)
            if want[0] != got[0] or (want[0] != "grads" and want[1] != got[1]):
                bad.append(f"output {k}, {write}: torch {want}, nbgrad {got}")
                continue
            if want[0] == "grads":
                for i, (a, b) in enumerate(zip(want[1], got[1])):
                    tol = 2e-5 if f32 or (a is not None and a.dtype == np.float32) else 1e-7
                    if (a is None) != (b is None) or (a is not None and not np.allclose(
                            b, a, rtol=tol, atol=tol, equal_nan=True)):
                        bad.append(f"output {k}, {write}: grad of leaf {i}: torch {a}, "
                                   f"nbgrad {b}")
    return drawn, bad


@pytest.mark.parametrize("name,run", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_inplace_write_into_output(name, run):
    _, bad = check_program(run)
    assert not bad, "\n".join(bad)


def test_norms_without_affine_do_not_hand_out_what_they_saved():
    """The issue's repro: InstanceNorm1d then ReLU(inplace=True) (CycleGAN's block)."""
    res = []
    for T in (torch, nbgrad):
        x = T.tensor([[[0.3, -1.2, 2.0, 0.1]]], requires_grad=True)
        y = T.nn.InstanceNorm1d(1)(x * 1)
        T.relu_(y)
        (y * T.tensor([1., 2., 3., 4.])).sum().backward()
        res.append(x.grad.numpy())
    np.testing.assert_allclose(res[1], res[0], rtol=1e-5, atol=1e-6)


def _arrays(v, depth=0):
    if isinstance(v, np.ndarray):
        yield v
    elif isinstance(v, (tuple, list)) and depth < 3:
        for x in v:
            yield from _arrays(x, depth + 1)


@pytest.mark.parametrize("name,run", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_outputs_share_no_memory_with_unchecked_saves(name, run):
    """The audit behind the test above, on memory: an output's array is never an array its node
    keeps without a version check (a kernel's ctx, a saved index array), nor, for a row that is
    not a view, an input's memory under another storage."""
    from nbgrad.autograd.graph import Ctx
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        leaves, outs = run(nbgrad, None)
    for k, o in enumerate(outs):
        fn = getattr(o, "grad_fn", None)
        if fn is None:
            continue
        for s in getattr(fn, "_saved", None) or ():
            kept = s.value if type(s) is Ctx else s if isinstance(s, np.ndarray) else None
            for a in _arrays(kept):
                assert not np.shares_memory(a, o._data), f"output {k} is kept by {fn}"
        row = getattr(type(fn), "_row", None)
        if row is not None and not row.view and o._base is None:
            for x in leaves:
                assert not np.shares_memory(x._data, o._data), f"output {k} is an input's memory"


def test_pixel_unshuffle_of_one_pixel_is_a_copy():
    res = []
    for T in (torch, nbgrad):
        x = T.arange(4.0).reshape(1, 1, 2, 2).requires_grad_()
        y = T.nn.functional.pixel_unshuffle(x * 1, 2)
        z = T.nn.functional.pixel_unshuffle(x.detach(), 2)
        z.add_(1)
        y.mul_(3)
        y.sum().backward()
        res.append((x.detach().numpy().copy(), x.grad.numpy().copy()))
    np.testing.assert_array_equal(res[1][0], res[0][0])
    np.testing.assert_array_equal(res[1][1], res[0][1])


INDEXED = {  # ops that keep an index or mask tensor for their backward
    "gather": lambda T, x, i: x.gather(1, i),
    "index": lambda T, x, i: x[i[:, 0]],
    "index_select": lambda T, x, i: x.index_select(0, i[:, 0]),
    "take_along_dim": lambda T, x, i: T.take_along_dim(x, i, 1),
    "scatter": lambda T, x, i: T.zeros(3, 4, dtype=x.dtype).scatter(1, i, x[:, :2]),
    "embedding": lambda T, x, i: T.nn.functional.embedding(i, x),
    "nll_loss": lambda T, x, i: T.nn.functional.nll_loss(x, i[:, 0]),
    "cross_entropy": lambda T, x, i: T.nn.functional.cross_entropy(x, i[:, 0]),
    "masked_fill": lambda T, x, i: x.masked_fill(i[:, :1] > 0, 0.0),
}


@pytest.mark.parametrize("name", sorted(INDEXED))
def test_index_written_after_the_op_as_torch(name):
    """The index a node keeps is saved as torch saves it, the tensor and its version: a write
    into that tensor after the op makes backward raise torch's "modified by an inplace
    operation" error where torch's does (take_along_dim with a dim gathers with its own copy,
    and a mask made from the index is another tensor: there the gradient is torch's).
    tests/test_index_versions.py has the other index-saving ops."""
    seen = []
    for T in (torch, nbgrad):
        x = T.arange(12.0, dtype=T.float64).reshape(3, 4).requires_grad_()
        i = T.tensor([[0, 1], [1, 2], [2, 0]])
        y = INDEXED[name](T, x, i)
        i.fill_(1)
        try:
            (y * T.arange(float(y.numel()), dtype=T.float64).reshape(y.shape)).sum().backward()
            seen.append(x.grad.numpy().tolist())
        except RuntimeError as e:
            seen.append(str(e).split(" Hint:")[0].replace("nbgrad.", "torch."))
    assert seen[1] == seen[0]
