"""The torch.* functions (torch.add, torch.sum, ...) over the op table, and their Tensor methods.

Each function checks its arguments (PyTorch's texts), picks a row of the table (nbgrad/ops/) and
applies it through nbgrad/autograd/apply.py. One module per kind of op, as in nbgrad/ops/, each
importing only the ones before it in this list:

- ``registry``: the ``@method`` declaration a function makes to become a Tensor method;
- ``args``: helpers every function shares (numbers as tensors, out=, PyTorch's error texts);
- ``views``, ``comparison``, ``elementwise``, ``inplace``, ``indexing``, ``reductions``,
  ``linalg``, ``matrices`` (triangles, the addmm family's checks, determinants), ``nn`` (conv,
  pool): the functions over the rows of the same kind;
- ``composite`` (einsum, tensordot, kron, ...), ``counting`` (unique, histograms): composed of
  the above;
- ``tensor_methods``: Tensor behaviour no torch.* function has (``.to``, ``.new``, ``resize_``);
- ``bind``: the one place that puts the methods and operators onto Tensor.
"""
from __future__ import annotations

from . import (args, comparison, composite, counting, elementwise, indexing, inplace, linalg,
               matrices, nn, reductions, tensor_methods, views)
from .bind import bind as _bind
from .elementwise import _ALPHA_FIRST_WARNED  # noqa: F401  (a test resets the one-time warning)
from .linalg import _weight_norm  # noqa: F401  (nn.utils.weight_norm)
from .matrices import _square  # noqa: F401  (nbgrad.linalg)
from .reductions import _safe_softmax  # noqa: F401  (torch._safe_softmax)
from ..random import multinomial  # noqa: F401
from ..sampling import (bernoulli, bernoulli_, cauchy_, exponential_, geometric_,  # noqa: F401
                        log_normal_, normal_, random_, uniform_)

__all__ = []
for _m in (views, comparison, elementwise, inplace, indexing, reductions, linalg, matrices, nn,
           composite, counting, tensor_methods, args):
    # a module's public functions: those it defines (not the ones it imports)
    for _n, _v in vars(_m).items():
        if not _n.startswith("_") and callable(_v) and getattr(_v, "__module__", None) == \
                _m.__name__:
            globals()[_n] = _v
            __all__.append(_n)
del _m, _n, _v
_bind()
