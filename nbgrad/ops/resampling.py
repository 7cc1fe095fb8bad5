"""Rows: resampling that torch records as one node — the 3-D nearest, bicubic and trilinear
upsamplings (maps linear in their input, built as nn.py's ``_linear_map`` rows: ``ctx`` holds the
forward and its adjoint) and max-unpooling (MaxUnpool2DBackward0, MaxUnpool3DBackward0: the input
written at the indices a max-pool returned, zeros elsewhere).

Under create_graph an upsampling's gradient records PyTorch's backward op
(UpsampleBicubic2DBackwardBackward0, ...); max-unpooling's gradient is torch's
max_pool_double_backward, written with ordinary ops (view, gather, view), so the same formula runs
on arrays and, recorded, on Tensors.
"""
from __future__ import annotations

import numpy as np

from ..backend import get_array_module as _xp
from .nn import _linear_map
from .registry import op
from .volumes import max_pool_double

for _name, _node in (("upsample_nearest3d", "UpsampleNearest3DBackward0"),
                     ("_upsample_nearest_exact3d", "UpsampleNearestExact3DBackward0"),
                     ("upsample_bicubic2d", "UpsampleBicubic2DBackward0"),
                     ("upsample_trilinear3d", "UpsampleTrilinear3DBackward0")):
    _linear_map(_name, _node, _node[:-1] + "Backward0")


def max_unpool_forward(x, indices, output_size):
    """(N, C, *in) values written at their flat spatial ``indices`` into zeros (N, C, *out);
    indices outside the output raise torch's error."""
    xp = _xp(x)
    nd = len(output_size)
    lead = x.shape[:-nd]
    size = int(np.prod(output_size))
    flat_idx = indices.reshape(-1, int(np.prod(indices.shape[-nd:])) if indices.size else 0)
    if flat_idx.size:
        bad = (flat_idx < 0) | (flat_idx >= size)
        if bad.any():
            # (torch's kernel keeps the last invalid index it met)
            raise RuntimeError(f"Found an invalid max index: {int(flat_idx[bad][-1])} (output "
                               f"volumes are of size {'x'.join(str(n) for n in output_size)})")
    out = xp.zeros((flat_idx.shape[0], size), x.dtype)
    rows = xp.arange(flat_idx.shape[0]).reshape(-1, 1)
    out[rows, flat_idx] = x.reshape(flat_idx.shape)
    return out.reshape(lead + tuple(output_size))


op("max_unpool2d", lambda self, indices, output_size: max_unpool_forward(self, indices,
                                                                         output_size),
   node="MaxUnpool2DBackward0",
   self=lambda g, indices, xp: max_pool_double(g, indices, 2, xp))
op("max_unpool3d", lambda self, indices, output_size: max_unpool_forward(self, indices,
                                                                         output_size),
   node="MaxUnpool3DBackward0",
   self=lambda g, indices, xp: max_pool_double(g, indices, 3, xp))
