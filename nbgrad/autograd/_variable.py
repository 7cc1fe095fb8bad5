"""``autograd.Variable``: PyTorch's deprecated alias. ``Variable(t, requires_grad=True)`` returns a
Tensor, and every Tensor is an instance of Variable."""
from __future__ import annotations

from .. import tensor as _tm


class _VariableMeta(type):
    def __instancecheck__(cls, other):
        return isinstance(other, _tm.Tensor)

    def __call__(cls, data, requires_grad=False, volatile=False):
        if not isinstance(data, _tm.Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        return data.detach().requires_grad_(requires_grad)


class Variable(metaclass=_VariableMeta):
    """``Variable(data, requires_grad=False)`` (torch.autograd.Variable, deprecated): a new leaf
    Tensor sharing ``data``'s storage, detached, with the given ``requires_grad``.

    Raises:
        TypeError: ``data`` is not a Tensor ("Variable data has to be a tensor, but got list").
        RuntimeError: ``requires_grad=True`` on a non-floating tensor.
    """
