"""What a node shows of itself and a copy's version counter, against torch."""
from __future__ import annotations

import pytest
import torch

import nbgrad

NODES = {  # expressions whose node torch lists with the same saved attributes
    "sum": lambda x: x.sum(),
    "sum_dim": lambda x: x.sum(1),
    "expand": lambda x: x[:1].expand(3, 4),
    "squeeze": lambda x: x[:1].squeeze(0),
    "repeat": lambda x: x.repeat(2, 1),
    "exp": lambda x: x.exp(),
    "mul": lambda x: x * x,
    "pow": lambda x: x.pow(2),
}


@pytest.mark.parametrize("name", sorted(NODES))
def test_saved_attributes_listed_as_torch(name):
    """dir(grad_fn) lists torch's `_saved_*` names (SumBackward0: `_saved_self_sym_sizes`
    only; nbgrad's slot `_saved` and `_saved_tensors` answer but are not listed)."""
    seen = []
    for T in (torch, nbgrad):
        y = NODES[name](T.ones(3, 4, requires_grad=True))
        seen.append(sorted(n for n in dir(y.grad_fn) if n.startswith("_saved")))
    assert seen[1] == seen[0]


def test_sum_saved_sizes_readable_under_torch_name():
    for T in (torch, nbgrad):
        y = T.ones(3, 4, requires_grad=True).sum()
        assert tuple(y.grad_fn._saved_self_sym_sizes) == (3, 4)


COPIES = {  # ops torch runs as empty_like then copy_ (the copy_ counts on the new tensor)
    "clone": lambda T, a: a.clone(),
    "clone_fn": lambda T, a: T.clone(a),
    "contiguous": lambda T, a: a.t().contiguous(),
    "to": lambda T, a: a.to(T.float64),
}


@pytest.mark.parametrize("name", sorted(COPIES))
def test_copy_of_an_inference_tensor_outside_it_is_at_version_1(name):
    """torch's clone of an inference tensor, used outside inference_mode: a normal tensor whose
    copy_ counted once (version 1); a copy of a normal tensor stays at 0."""
    seen = []
    for T in (torch, nbgrad):
        with T.inference_mode():
            a = T.arange(6.0).reshape(2, 3)
        b = COPIES[name](T, a)
        seen.append((b._version, b.is_inference(), COPIES[name](T, T.ones(2, 3))._version))
    assert seen[1] == seen[0]
