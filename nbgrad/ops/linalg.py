"""Rows: matrix products (mm, bmm, dot, mv, addmm). torch.matmul is composed of these in
nbgrad/functions.py, as PyTorch composes it, so the graph shows the same nodes.

Schema and how to add a row: nbgrad/ops/registry.py. Formulas longer than a line: formulas.py.
"""
from __future__ import annotations

from .formulas import _c, _mT
from .registry import op

op("mm", lambda self, mat2: self @ mat2,
   self=lambda g, mat2, xp: g @ _c(_mT(mat2), xp),
   mat2=lambda g, self: _mT(self) @ g)
op("bmm", lambda self, mat2: self @ mat2,
   self=lambda g, mat2, xp: g @ _c(_mT(mat2), xp),
   mat2=lambda g, self: _mT(self) @ g)
op("dot", lambda self, other: self @ other,
   self=lambda g, other: g * other,
   other=lambda g, self: g * self)
op("mv", lambda self, vec: self @ vec,
   self=lambda g, vec: g[:, None] * vec,
   vec=lambda g, self: _mT(self) @ g)
op("addmm", lambda self, mat1, mat2, beta, alpha: (self if beta == 1 else beta * self) + (
    mat1 @ mat2 if alpha == 1 else alpha * (mat1 @ mat2)), broadcast=True,
   self=lambda g, beta: g if beta == 1 else g * beta,
   mat1=lambda g, mat2, alpha, xp: (g @ _c(_mT(mat2), xp)) * alpha,
   mat2=lambda g, mat1, alpha: (_mT(mat1) @ g) * alpha)
