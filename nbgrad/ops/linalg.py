"""Rows: matrix products (mm, bmm, dot, mv, addmm). torch.matmul is composed of these in
nbgrad/functions.py, as PyTorch composes it, so the graph shows the same nodes.

Schema and how to add a row: nbgrad/ops/registry.py. Formulas longer than a line: formulas.py.
"""
from __future__ import annotations

from .. import backend
from .formulas import _mT
from .registry import op

op("mm", lambda self, mat2: self @ _contiguous(mat2),
   self=lambda g, mat2, xp: g @ xp.contiguous(_mT(mat2)),
   mat2=lambda g, self: _mT(self) @ g)
op("bmm", lambda self, mat2: self @ mat2,
   self=lambda g, mat2, xp: g @ xp.contiguous(_mT(mat2)),
   mat2=lambda g, self: _mT(self) @ g)
op("dot", lambda self, other: self @ other,
   self=lambda g, other: g * other,
   other=lambda g, self: g * self)
op("mv", lambda self, vec: self @ vec,
   self=lambda g, vec: g[:, None] * vec,
   vec=lambda g, self: _mT(self) @ g)
op("addmm", lambda self, mat1, mat2, beta, alpha: _addmm(self, mat1, mat2, beta, alpha),
   broadcast=True,
   self=lambda g, beta: g if beta == 1 else g * beta,
   mat1=lambda g, mat2, alpha, xp: (g @ xp.contiguous(_mT(mat2))) * alpha,
   mat2=lambda g, mat1, alpha: (_mT(mat1) @ g) * alpha)


def _contiguous(b):
    # numpy's matmul is several times slower on a transposed (F-ordered) right operand
    return b if b.flags.c_contiguous else backend.get_array_module(b).ascontiguousarray(b)


def _addmm(c, a, b, beta, alpha):
    out = a @ _contiguous(b)  # a fresh array: scaled and added into in place
    if alpha != 1:
        out *= alpha
    out += c if beta == 1 else beta * c
    return out
