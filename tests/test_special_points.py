"""Derivatives at special points against torch: zeros, ties, the origin, singular matrices,
+-inf and NaN, where a formula written for the generic point divides by zero or picks a side.

The generator runs every op case of the suite (tests/_programs.py) on inputs made special in each
of a few ways, first and second order, and compares values, gradients and errors with torch; the
regression tests below pin the points the issue named.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import nbgrad


def _grads(T, f, xs, orders=2):
    """The value, first gradients (create_graph) and the gradient of their weighted sum."""
    x = [T.tensor(a, dtype=T.float64, requires_grad=True) for a in xs]
    y = f(T, *x)
    g = T.autograd.grad(y.sum(), x, create_graph=orders > 1, allow_unused=True)
    out = [y.detach().numpy().copy()] + [None if t is None else t.detach().numpy().copy()
                                         for t in g]
    if orders > 1:
        s = sum((t * T.arange(1.0, t.numel() + 1, dtype=T.float64).reshape(t.shape)).sum()
                for t in g if t is not None and t.requires_grad)
        if not isinstance(s, int):
            h = T.autograd.grad(s, x, allow_unused=True)
            out += [None if t is None else t.numpy().copy() for t in h]
    return out


def _same(f, xs, orders=2):
    want, got = _grads(torch, f, xs, orders), _grads(nbgrad, f, xs, orders)
    assert len(want) == len(got)
    for a, b in zip(want, got):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12, equal_nan=True)
            assert np.array_equal(np.signbit(b), np.signbit(a)), (a, b)


@pytest.mark.parametrize("xs", [
    [[1., 0., 3., 2.]], [[1., 0., 3., 0.]], [[0., 2.], [3., 0.]], [[0.]], [[2., 5.]]])
def test_prod_at_zeros_every_order(xs):
    """torch's prod_backward: the product of the others (not prod / x, NaN at a zero), at first,
    second and third order."""
    xs = np.array(xs)
    _same(lambda T, x: x.prod(), [xs], orders=1 if xs.size == 1 else 2)
    if xs.size > 1:
        f = lambda T, x: x.prod()  # noqa: E731
        for T in (torch, nbgrad):  # third order
            x = T.tensor(xs, dtype=T.float64, requires_grad=True)
            g, = T.autograd.grad(f(T, x), x, create_graph=True)
            h, = T.autograd.grad((g * g).sum(), x, create_graph=True)
            k, = T.autograd.grad((h * h).sum(), x)
            if T is torch:
                want = k.numpy().copy()
        np.testing.assert_allclose(k.numpy(), want, rtol=1e-12)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_prod_dim_at_zeros_every_order(dim):
    xs = np.array([[1., 0., 3.], [2., 0., 0.], [1., 2., 3.]])
    _same(lambda T, x: x.prod(dim), [xs])
    _same(lambda T, x: x.prod(dim, keepdim=True), [xs])


def test_atan2_at_the_origin():
    """torch's atan2_backward masks 1 / (x^2 + y^2) to 0 at the origin: (0, -0), not NaN; the
    second derivative there is NaN in both."""
    a, b = np.array([0., 0., 1., 0.]), np.array([0., -0., 0., 2.])
    _same(lambda T, x, y: T.atan2(x, y), [a, b])
    _same(lambda T, x, y: T.atan2(x, y), [a, b], orders=1)
