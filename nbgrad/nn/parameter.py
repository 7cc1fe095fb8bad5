"""``nn.Parameter`` and ``nn.Buffer``: tensors a Module registers (mirrors torch.nn.parameter)."""

from nbgrad import creation
from nbgrad.naming import expose
from nbgrad.tensor import Tensor

__all__ = ["Parameter", "Buffer"]


class Parameter(Tensor):
    """A leaf tensor that a :class:`Module` registers as a parameter when assigned as an attribute.

    Mirrors ``torch.nn.Parameter``: shares ``data``'s storage (no copy), ``requires_grad=True`` by
    default, and ops on it return plain tensors.

    Args:
        data (Tensor, optional): the values; an empty float32 tensor when omitted.
        requires_grad (bool): default True.
    """

    __slots__ = ()

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = creation.empty(0)
        return Tensor._make_subclass(cls, data.detach(), requires_grad)

    def __init__(self, data=None, requires_grad=True):  # state set in __new__
        pass

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    def __reduce_ex__(self, proto):
        return (Parameter, (self.detach(), self.requires_grad))

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        result = Parameter(self.detach().clone(), self.requires_grad)
        memo[id(self)] = result
        return result


class Buffer:
    """Marks a tensor to be registered as a buffer when assigned to a Module attribute.

    Mirrors ``torch.nn.Buffer``: ``m.x = Buffer(t)`` is ``m.register_buffer("x", t)``.
    """

    def __init__(self, data, *, persistent=True):
        self.data = data
        self.persistent = persistent


expose(Parameter, "torch.nn.parameter")
