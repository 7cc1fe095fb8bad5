"""The errors a student meets first, in PyTorch's words: each text pinned against torch's."""
import numpy as np
import pytest

import nbgrad

torch = pytest.importorskip("torch")


def _setitem(t, idx, v):
    t[idx] = v


CASES = {
    # construction from nested lists
    "ragged": lambda T: T.tensor([[1, 2], [3]]),
    "ragged_float_3d": lambda T: T.tensor([[[1.0, 2.0]], [[3.0]]]),
    "ragged_empty_row": lambda T: T.tensor([[1.0, 2.0], []]),
    "ragged_longer": lambda T: T.tensor([[1], [2, 3]]),
    "scalar_for_row": lambda T: T.tensor([[1.0, 2.0], 3.0]),
    "row_for_scalar_int": lambda T: T.tensor([1, [2, 3]]),
    "row_for_scalar_float": lambda T: T.tensor([1.0, [2.0]]),
    "row_for_scalar_bool": lambda T: T.tensor([True, [1]]),
    "str_inside": lambda T: T.tensor([1.0, "a"]),
    "none_inside": lambda T: T.tensor([1.0, None]),
    "ragged_tuples": lambda T: T.tensor(((1, 2), (3, 4), (5,))),
    "multi_element_tensors": lambda T: T.tensor([T.tensor([1.0, 2.0]), T.tensor([1.0])]),
    # indexing a 0-dim tensor
    "index_0d": lambda T: T.tensor(1.5)[0],
    "index_0d_np_int": lambda T: T.tensor(1.5)[np.int64(0)],
    "index_0d_other_int": lambda T: T.tensor(1.5)[1],
    "index_0d_negative": lambda T: T.tensor(1.5)[-1],
    "index_0d_slice": lambda T: T.tensor(1.5)[:1],
    "index_0d_tuple": lambda T: T.tensor(1.5)[0, None],
    "index_0d_list": lambda T: T.tensor(1.5)[[0]],
    "setitem_0d": lambda T: _setitem(T.tensor(1.5), 0, 2.0),
    "setitem_0d_slice": lambda T: _setitem(T.tensor(1.5), slice(None), 2.0),
    # index tensors that do not broadcast
    "index_broadcast": lambda T: T.zeros(3, 4)[T.tensor([0, 1]), T.tensor([0, 1, 2])],
    "index_broadcast_lists": lambda T: T.zeros(3, 4)[[0, 1], [0, 1, 2]],
    "index_broadcast_2d": lambda T: T.zeros(3, 4, 5)[T.tensor([0, 1]), T.tensor([[0], [1]]),
                                                     T.tensor([0, 1, 2])],
    "index_broadcast_slice_between": lambda T: T.zeros(3, 4, 5)[T.tensor([0, 1]), :,
                                                                T.tensor([0, 1, 2])],
    "index_broadcast_with_int": lambda T: T.zeros(3, 4, 5)[T.tensor([0, 1]), 1,
                                                           T.tensor([0, 1, 2])],
    "index_broadcast_mask": lambda T: T.zeros(3, 4)[T.tensor([[True, False, True, True],
                                                              [True] * 4, [False] * 4]),
                                                    T.tensor([0, 1])],
    "setitem_broadcast": lambda T: _setitem(T.zeros(3, 4), (T.tensor([0, 1]),
                                                           T.tensor([0, 1, 2])), 1.0),
    "index_put_broadcast": lambda T: T.zeros(3, 4).index_put_(
        (T.tensor([0, 1]), T.tensor([0, 1, 2])), T.tensor(1.0)),
    # backward on tensors that do not require grad: that is said first
    "backward_nonscalar_no_grad": lambda T: T.ones(3).backward(),
    "backward_int_no_grad": lambda T: T.ones(3, dtype=T.int64).sum().backward(),
    "autograd_backward_no_grad": lambda T: T.autograd.backward([T.ones(3)]),
    "backward_second_output_nonscalar": lambda T: T.autograd.backward(
        [T.ones(3), T.ones(3, requires_grad=True) * 2]),
    "backward_nonscalar_with_grad": lambda T: (T.ones(3, requires_grad=True) * 2).backward(),
}


def _error(fn, lib):
    with pytest.raises(Exception) as info:
        fn(lib)
    return type(info.value), str(info.value)


@pytest.mark.parametrize("name", sorted(CASES))
def test_error_text_matches_torch(name):
    expect = _error(CASES[name], torch)
    assert _error(CASES[name], nbgrad) == expect


@pytest.mark.parametrize("make", [
    lambda T: T.tensor([[1, 2], [3, 4]]),
    lambda T: T.tensor([[[1.0]], [[2.0]]]),
    lambda T: T.tensor(1.5)[None],
    lambda T: T.tensor(1.5)[...],
    lambda T: T.zeros(3, 4)[T.tensor([0, 1]), T.tensor([[0], [2]])],
])
def test_what_is_allowed_still_works(make):
    t, n = make(torch), make(nbgrad)
    assert tuple(n.shape) == tuple(t.shape)
    np.testing.assert_array_equal(n.numpy(), t.numpy())


def test_ragged_list_with_an_empty_first_row():
    # torch silently makes a (2, 0) tensor and drops the data; nbgrad says what is wrong
    with pytest.raises(ValueError, match=r"expected sequence of length 0 at dim 1 \(got 1\)"):
        nbgrad.tensor([[], [1.0]])
