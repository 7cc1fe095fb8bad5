"""Embedding (mirrors ``torch.nn.modules.sparse``)."""

import nbgrad
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module
from .utils import _factory

__all__ = ["Embedding"]


class Embedding(Module):
    """A lookup table of ``num_embeddings`` vectors (mirrors ``torch.nn.Embedding``).

    Shape: int64 (*) -> (*, embedding_dim). weight ~ N(0, 1), the ``padding_idx`` row zeroed
    and excluded from gradients.

    Raises:
        IndexError: an index outside [0, num_embeddings), naming the layer.
    """

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None,
                 norm_type=2.0, scale_grad_by_freq=False, sparse=False, _weight=None,
                 _freeze=False, device=None, dtype=None):
        super().__init__()
        kw = _factory(device, dtype)
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        if padding_idx is not None:
            if padding_idx > 0:
                assert padding_idx < num_embeddings, "Padding_idx must be within num_embeddings"
            elif padding_idx < 0:
                assert padding_idx >= -num_embeddings, "Padding_idx must be within num_embeddings"
                padding_idx = num_embeddings + padding_idx
        self.padding_idx = padding_idx
        if scale_grad_by_freq or sparse:
            raise NotImplementedError("Embedding: scale_grad_by_freq and sparse are unsupported")
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.sparse = sparse
        if _weight is None:
            self.weight = Parameter(nbgrad.empty((num_embeddings, embedding_dim), **kw),
                                    requires_grad=not _freeze)
            self.reset_parameters()
        else:
            self.weight = Parameter(_weight, requires_grad=not _freeze)

    def reset_parameters(self):
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with nbgrad.no_grad():
                self.weight[self.padding_idx].fill_(0)

    def forward(self, input):
        ids = input._data
        if ids.size and (ids.min() < 0 or ids.max() >= self.num_embeddings):
            bad = ids[(ids < 0) | (ids >= self.num_embeddings)].flat[0]
            raise IndexError(f"{self!r}: index {int(bad)} out of range "
                             f"[0, {self.num_embeddings}) (index out of range in self)")
        return F.embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type)

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None, **kwargs):
        rows, cols = embeddings.shape
        return cls(rows, cols, _weight=embeddings, _freeze=freeze, padding_idx=padding_idx,
                   **kwargs)

    def extra_repr(self):
        s = "{num_embeddings}, {embedding_dim}"
        if self.padding_idx is not None:
            s += ", padding_idx={padding_idx}"
        return s.format(**self.__dict__)
