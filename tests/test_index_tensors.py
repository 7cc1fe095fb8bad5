"""Index tensors PyTorch reads in a way of their own, torch the oracle: a 0-d integer tensor is
an int (a view, SelectBackward0), a uint8 tensor is a mask (with torch's deprecation warning),
in t[...] and t[...] = v; and an unbatched max_pool2d without a graph is a tensor of its own.
"""
import warnings

import pytest
import torch

import nbgrad

CASES = {
    "uint8_mask": lambda T, y: y[T.tensor([1, 0, 1], dtype=T.uint8)],
    "uint8_mask_in_tuple": lambda T, y: y[T.tensor([1, 0, 1], dtype=T.uint8), 1],
    "uint8_0d": lambda T, y: y[T.tensor(1, dtype=T.uint8)],
    "int64_0d": lambda T, y: y[T.tensor(2)],
    "int32_0d_pair": lambda T, y: y[T.tensor(2, dtype=T.int32), T.tensor(1)],
    "int64_0d_with_list": lambda T, y: y[T.tensor(2), [0, 1, 1]],
    "int64_0d_negative": lambda T, y: y[T.tensor(-1), :],
}


def _run(lib, case):
    x = lib.arange(6.).reshape(3, 2).requires_grad_()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        r = CASES[case](lib, x * 1)
        r.sum().backward()
    return (r.tolist(), r.grad_fn.name(), r._base is not None, x.grad.tolist(),
            bool(w) and "uint8 is now deprecated" in str(w[0].message))


@pytest.mark.parametrize("case", sorted(CASES))
def test_index_tensor_kinds_as_torch(case):
    assert _run(nbgrad, case) == _run(torch, case)


@pytest.mark.parametrize("case", ["int64_0d", "uint8_mask"])
def test_setitem_with_index_tensor_kinds_as_torch(case):
    def run(lib):
        z = lib.zeros(3, 2)
        idx = lib.tensor(1) if case == "int64_0d" else lib.tensor([1, 0, 1], dtype=lib.uint8)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            z[idx] = lib.ones(2) * 5
        return z.tolist(), z._version
    assert run(nbgrad) == run(torch)


@pytest.mark.parametrize("mode", ["no_grad", "inference_mode"])
def test_unbatched_max_pool2d_without_graph_is_not_a_view(mode):
    def run(lib):
        with getattr(lib, mode)():
            y = lib.nn.functional.max_pool2d(lib.arange(32.).reshape(2, 4, 4), 2)
        return y.tolist(), y._base is None, y.is_contiguous(), y.storage_offset()
    assert run(nbgrad) == run(torch)
