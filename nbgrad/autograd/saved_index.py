"""Index and mask tensors a node keeps (gather's index, masked_fill's mask, advanced indexing's
indices, nll_loss's target), saved as PyTorch saves them: the tensor and its version, so that an
in-place write into one before backward raises PyTorch's "modified by an inplace operation"
error instead of changing the gradient. `record.index_arg` is how a public function passes
one; `record._kept` saves it as a SavedIndex.
"""
from __future__ import annotations

from .graph import RELEASABLE, UNPACKED, SavedTensor, backward_twice_error


class SavedIndex(SavedTensor):
    """An index or mask tensor a node keeps (gather's index, masked_fill's mask, nll_loss's
    target): saved as PyTorch saves it, the tensor and its version, so that an in-place write
    into it before backward raises PyTorch's "modified by an inplace operation" error instead
    of changing the gradient. The formulas get its array (also under create_graph)."""

    __slots__ = ()

    def unpack(self, node=None, as_tensor=False):
        """The array after the version check; called with no node (introspection), the
        Tensor."""
        __tracebackhide__ = True
        if node is None:
            return SavedTensor.unpack(self)
        return SavedTensor.unpack(self, node, False)


class SavedIndices:
    """A tuple of indices (advanced indexing's) holding some SavedIndex: unpacked item by
    item."""

    __slots__ = ("items",)

    def __init__(self, items):
        self.items = items

    def unpack(self, node=None, as_tensor=False):
        __tracebackhide__ = True
        items = self.items
        if items is None:
            raise backward_twice_error()
        return tuple([i.unpack(node) if type(i) is SavedIndex else i for i in items])

    def release(self):
        self.items = None


RELEASABLE.update((SavedIndex, SavedIndices))
UNPACKED.update((SavedIndex, SavedIndices))
