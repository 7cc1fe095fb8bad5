"""The op table: every differentiable primitive, its forward and its derivative side by side.

Read in this order: registry.py (the Row schema: how a row is written and what it saves), then
the table by kind of op — elementwise.py, reductions.py, linalg.py, views.py, indexing.py, nn.py,
activations.py, losses.py, volumes.py (the 3-D layers, with their N-d kernels), attention.py,
resampling.py (upsampling beyond 2-D bilinear, max-unpooling), ctc.py (the CTC loss),
norms.py (group_norm, and layer_norm's and batch_norm's backward ops) — with
formulas.py (the formula namespace `xp`), derivatives.py (formulas longer than a line),
kernels.py (conv/pool array kernels) and lapack.py (LAPACK's steps in numpy where numpy's and
torch's LAPACK answer differently: non-finite, singular and refused matrices). Applying a row to tensors is nbgrad/autograd/apply.py; the
torch.* functions that pick
a row and parse PyTorch's arguments are nbgrad/functions/.
"""
from __future__ import annotations

from . import elementwise, indexing, linalg, nn, random, reductions, views  # noqa: F401  (fill ROWS)
from . import activations, losses  # noqa: F401,E402  (nn's pointwise activations and losses)
from . import volumes  # noqa: F401,E402  (3-D layers)
from . import attention  # noqa: F401,E402  (after nn: its rows follow nn's)
from . import resampling  # noqa: F401,E402  (3-D/bicubic upsampling, max-unpooling)
from . import ctc  # noqa: F401,E402  (the CTC loss)
from . import norms  # noqa: F401,E402  (the normalizations' backward ops)
from .registry import ROWS, Ctx, Row, op
from ..autograd import apply as _apply

_apply.use_rows(as_strided=ROWS["as_strided"], clone=ROWS["clone"])  # the two apply uses itself

__all__ = ["ROWS", "Row", "op", "Ctx"]
