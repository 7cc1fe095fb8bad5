"""Index and mask tensors a node saves (gather's index, masked_fill's mask, nll_loss's target,
advanced indexing's indices, ...) are saved as PyTorch saves them: the tensor and its version,
so that an in-place write into one after the op and before backward raises PyTorch's "modified
by an inplace operation" error where torch raises it (nbgrad used to keep a copy, and computed
on); where torch's op keeps a copy of its own (take_along_dim with a dim), nothing is raised in
either. Each case against torch 2.13: the error's type and text, or the gradient."""
import numpy as np
import pytest

import nbgrad

torch = pytest.importorskip("torch")

_I = [2, 0, 1, 2]
_I2 = [[2, 0, 1], [1, 3, 0], [0, 0, 2], [3, 1, 1]]
_M = [[True, False, True]] * 2 + [[False, True, False]] * 2

CASES = {  # name -> (index data, f(T, x, index))
    "index_select": (_I, lambda T, x, i: T.index_select(x, 0, i)),
    "index_select_method": (_I, lambda T, x, i: x.index_select(0, i)),
    "gather": (_I2, lambda T, x, i: T.gather(x, 0, i)),
    "gather_expanded": (_I, lambda T, x, i: T.gather(x, 0, i[:, None].expand(-1, 3))),
    "take_along_dim": (_I2, lambda T, x, i: T.take_along_dim(x, i, 0)),
    "take_along_dim_flat": (_I, lambda T, x, i: T.take_along_dim(x, i)),
    "advanced": (_I, lambda T, x, i: x[i]),
    "advanced_pair": (_I, lambda T, x, i: x[i, i % 3]),
    "advanced_two": (_I, lambda T, x, i: x[i, T.tensor([0, 1, 2, 0])]),
    "scatter": (_I2, lambda T, x, i: T.zeros(4, 3).scatter(0, i, x)),
    "scatter_add": (_I2, lambda T, x, i: T.zeros(4, 3).scatter_add(0, i, x)),
    "scatter_reduce": (_I2, lambda T, x, i: T.zeros(4, 3).scatter_reduce(0, i, x, "amax")),
    "scatter_": (_I2, lambda T, x, i: (x * 1).scatter_(0, i, 0.5)),
    "index_add": ([2, 0, 1, 3], lambda T, x, i: T.zeros(4, 3).index_add(0, i, x)),
    "index_copy": ([2, 0, 1, 3], lambda T, x, i: T.zeros(4, 3).index_copy(0, i, x)),
    "index_fill": (_I, lambda T, x, i: x.index_fill(0, i, 0.5)),
    "index_put": ([2, 0, 1, 3], lambda T, x, i: T.zeros(4, 3).index_put((i,), x)),
    "index_put_accumulate": (_I, lambda T, x, i: T.zeros(4, 3).index_put((i,), x,
                                                                        accumulate=True)),
    "setitem": ([2, 0], lambda T, x, i: _setitem(x * 1, i)),
    "embedding": ([2, 0, 1, 3], lambda T, x, i: T.nn.functional.embedding(i, x)),
    "nll_loss": (_I, lambda T, x, i: T.nn.functional.nll_loss(x, i)),
    "nll_loss_none": (_I, lambda T, x, i: T.nn.functional.nll_loss(x, i, reduction="none")),
    "nll_loss_weight": (_I, lambda T, x, i: T.nn.functional.nll_loss(x, i, weight=T.ones(3))),
    "cross_entropy": (_I, lambda T, x, i: T.nn.functional.cross_entropy(x, i)),
    "cross_entropy_sum": (_I, lambda T, x, i: T.nn.functional.cross_entropy(x, i,
                                                                          reduction="sum")),
    "cross_entropy_3d": ([[2, 0], [1, 2]], lambda T, x, i: T.nn.functional.cross_entropy(
        x.reshape(2, 3, 2), i)),
    "multi_margin_loss": (_I, lambda T, x, i: T.nn.functional.multi_margin_loss(x, i)),
    "masked_fill": (_M, lambda T, x, m: x.masked_fill(m, 0.5)),
    "masked_fill_tensor": (_M, lambda T, x, m: x.masked_fill(m, T.tensor(0.5))),
    "masked_fill_": (_M, lambda T, x, m: (x * 1).masked_fill_(m, 0.5)),
    "masked_select": (_M, lambda T, x, m: x.masked_select(m)),
    "masked_scatter": (_M, lambda T, x, m: T.zeros(4, 3).masked_scatter(m, x)),
    "where": (_M, lambda T, x, m: T.where(m, x, 0.0)),
    "bool_index": (_M, lambda T, x, m: x[m]),
}


def _setitem(y, i):
    y[i] = 0.5
    return y


def _run(T, name, modify):
    data, f = CASES[name]
    x = T.tensor(np.arange(12.).reshape(4, 3) / 7, dtype=T.float32, requires_grad=True)
    i = T.tensor(data)
    try:
        y = f(T, x, i)
        if modify:
            if i.dtype == T.bool:
                i.fill_(True)
            else:
                i.fill_(1)
        (y * T.arange(1., y.numel() + 1).reshape(y.shape)).sum().backward()
        return "ok", x.grad.numpy().round(6).tolist()
    except Exception as e:  # noqa: BLE001 - the outcome is compared
        return type(e).__name__, str(e).split(" Hint:")[0].replace("nbgrad.", "torch.")


@pytest.mark.parametrize("modify", [True, False], ids=["written", "untouched"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_saved_index_version_as_torch(name, modify):
    assert _run(nbgrad, name, modify) == _run(torch, name, modify)


@pytest.mark.parametrize("name", ["gather", "index_select", "advanced", "masked_fill",
                                  "embedding"])
def test_saved_index_is_the_tensor_not_a_copy(name):
    """The node keeps the index tensor itself (torch's `_saved_index` is that tensor): no copy
    of its memory is made, and the saved value reads back as the tensor."""
    data, f = CASES[name]
    x = nbgrad.ones(4, 3, requires_grad=True)
    i = nbgrad.tensor(data)
    y = f(nbgrad, x, i)
    saved = [s for s in y.grad_fn._saved if type(s).__name__ in ("SavedIndex", "SavedIndices")]
    assert saved, y.grad_fn._saved
    s = saved[0]
    held = s._tensor if type(s).__name__ == "SavedIndex" else s.items[0]._tensor
    assert held is i and held._data is i._data


def test_index_modified_then_restored_still_fails_as_torch():
    """The version counts writes, not values: writing the same values back still fails."""
    outs = []
    for T in (torch, nbgrad):
        x = T.ones(4, 3, requires_grad=True)
        i = T.tensor([2, 0])
        y = x.index_select(0, i)
        i.copy_(T.tensor([2, 0]))
        with pytest.raises(RuntimeError) as e:
            y.sum().backward()
        outs.append(str(e.value).split(" Hint:")[0].replace("nbgrad.", "torch."))
    assert outs[0] == outs[1]
