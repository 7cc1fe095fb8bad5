"""The table's random rows. The samples are drawn before a row runs (from a Generator, in
nbgrad/random.py) and reach the forward as the argument `values`; PyTorch's derivative of each is
zero (derivatives.yaml: zeros_like), so these rows exist for the graph a student sees: `y.normal_()`
on a non-leaf records NormalBackward0, `bernoulli(p)` records BernoulliBackward0, with PyTorch's
overload numbers.
"""
from __future__ import annotations

from .registry import op


def _zero(g, xp):
    return xp.new_zeros(g, g.shape)  # not g * 0: a NaN in g gives 0, as zeros_like


# ---- in-place fills: Tensor.uniform_, normal_, ... (the overload decides the number) ----------
op("uniform_", lambda self, values: values, node="UniformBackward0", self=_zero)
op("normal_", lambda self, values: values, node="NormalBackward0", self=_zero)
op("bernoulli_p", lambda self, values: values, node="BernoulliBackward2", self=_zero)
op("bernoulli_tensor_p", lambda self, p, values: values, node="BernoulliBackward1", broadcast=True,
   self=_zero, p=_zero)
op("random_from_to", lambda self, values: values, node="RandomBackward0", self=_zero)
op("random_to", lambda self, values: values, node="RandomBackward1", self=_zero)
op("random_", lambda self, values: values, node="RandomBackward2", self=_zero)
op("exponential_", lambda self, values: values, node="ExponentialBackward0", self=_zero)
op("geometric_", lambda self, values: values, node="GeometricBackward0", self=_zero)
op("cauchy_", lambda self, values: values, node="CauchyBackward0", self=_zero)
op("log_normal_", lambda self, values: values, node="LogNormalBackward0", self=_zero)

# ---- sampling functions whose parameters may require grad -------------------------------------
op("bernoulli", lambda self, values: values, node="BernoulliBackward0", self=_zero)
op("normal_tensor_float", lambda mean, values: values, node="NormalBackward1", mean=_zero)
op("normal_float_tensor", lambda std, values: values, node="NormalBackward2", std=_zero)
op("normal_tensor_tensor", lambda mean, std, values: values, node="NormalBackward3",
   broadcast=True, mean=_zero, std=_zero)
