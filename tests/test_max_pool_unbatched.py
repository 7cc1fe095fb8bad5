"""Unbatched max_pool2d, (C, H, W) in and out, as torch's kernel pools it (torch the oracle): one
MaxPool2DWithIndicesBackward0 node on the output (not a pool of an unsqueezed input squeezed
back), a tensor of its own, the same values, indices, gradients and second-order gradients.
"""
import numpy as np
import pytest
import torch

import nbgrad


def _run(lib, return_indices, create_graph):
    x = lib.tensor(np.random.default_rng(0).normal(size=(3, 5, 6)), requires_grad=True)
    out = lib.nn.functional.max_pool2d(x, 2, stride=1, padding=1,
                                       return_indices=return_indices)
    y = out[0] if return_indices else out
    w = lib.tensor(np.linspace(1, 2, y.numel()).reshape(tuple(y.shape)))
    g, = lib.autograd.grad((y * w).sum(), x, create_graph=create_graph)
    facts = [tuple(y.shape), y.grad_fn.name(), y._base is None,
             [type(n).__name__ for n, _ in y.grad_fn.next_functions]]
    arrays = [y.detach().numpy(), g.detach().numpy()]
    if return_indices:
        facts.append(tuple(out[1].shape))
        arrays.append(out[1].numpy())
    if create_graph:
        gg, = lib.autograd.grad((g * g).sum(), x)
        facts.append(g.grad_fn.name())
        arrays.append(gg.numpy())
    return facts, arrays


@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("return_indices", [False, True])
def test_unbatched_max_pool2d_as_torch(return_indices, create_graph):
    if return_indices and create_graph:
        pytest.skip("max_pool2d_with_indices has no double backward in nbgrad (issue 23)")
    facts, arrays = _run(nbgrad, return_indices, create_graph)
    tfacts, tarrays = _run(torch, return_indices, create_graph)
    assert facts == tfacts
    for a, b in zip(arrays, tarrays):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_unbatched_max_pool2d_gradcheck():
    x = nbgrad.tensor(np.random.default_rng(1).normal(size=(2, 4, 5)), requires_grad=True)
    f = lambda x: nbgrad.nn.functional.max_pool2d(x, (2, 3), stride=(1, 2), padding=1)  # noqa: E731
    assert nbgrad.autograd.gradcheck(f, (x,))
    assert nbgrad.autograd.gradgradcheck(f, (x,))
