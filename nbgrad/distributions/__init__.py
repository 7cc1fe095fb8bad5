"""``nbgrad.distributions`` (torch.distributions): the probability distributions small models use,
composed from nbgrad's differentiable ops so ``log_prob`` and ``rsample`` carry gradients.

Normal, MultivariateNormal, Uniform, Bernoulli, Categorical, Independent,
TransformedDistribution with ExpTransform / SigmoidTransform / AffineTransform (and their
``.inv``), and ``kl_divergence`` for two Normals. Shapes follow PyTorch: ``sample(sample_shape)``
has shape ``sample_shape + batch_shape + event_shape``; ``log_prob`` drops the event dims.
Samples come from nbgrad's generator (``manual_seed``), torch's CPU stream, drawn as torch's
sample / rsample draw them, so the same numbers (Normal, Uniform, Bernoulli, Categorical tested
in tests/test_random_streams.py). Not done:
the other distributions and constraints; argument validation (on by default, PyTorch's
ValueError texts) covers Normal, Uniform, Bernoulli and Categorical parameters and the values
given to their log_prob. The classes
live here; the submodules (``normal``, ``uniform``, ``kl``, ``transforms``, ...) name them at
PyTorch's import paths (``from torch.distributions.normal import Normal``).
"""
from __future__ import annotations

import math

import numpy as np

from .. import creation, dtypes, functions as F, linalg, random
from ..autograd.grad_mode import no_grad
from ..nn import functional as NF
from ..tensor import Size, Tensor

__all__ = ["Distribution", "Normal", "MultivariateNormal", "Uniform", "Bernoulli", "Categorical",
           "Independent", "TransformedDistribution", "Transform", "ExpTransform",
           "SigmoidTransform", "AffineTransform", "kl_divergence"]


def _as_tensor(x, like=None):
    if isinstance(x, Tensor):
        return x
    dt = like.dtype if isinstance(like, Tensor) else dtypes.get_default_dtype()
    return creation.tensor(float(x), dtype=dt)


def broadcast_all(*values):
    """Tensors of one broadcast shape from tensors and numbers (numbers take the tensors' dtype,
    or the default dtype) (torch.distributions.utils.broadcast_all)."""
    like = next((v for v in values if isinstance(v, Tensor)), None)
    ts = [_as_tensor(v, like) for v in values]
    return tuple(F.broadcast_tensors(*ts))


def _size(shape):
    return Size(tuple(shape))


def _refuse_unless(ok, text, value):
    """PyTorch's ValueError for a parameter or value outside its constraint, with the values."""
    if not bool(ok.all()):
        raise ValueError(f"{text}, but found invalid values:\n{value}")


def _real(x):
    return x == x  # NaN is not real


class Distribution:
    """Base class (torch.distributions.Distribution): batch_shape, event_shape, sample() under
    no_grad from rsample() where the distribution has one."""

    has_rsample = False
    _validate_default = True  # PyTorch validates by default (outside python -O)

    def __init__(self, batch_shape=Size(), event_shape=Size(), validate_args=None):
        self._batch_shape = _size(batch_shape)
        self._event_shape = _size(event_shape)
        self._validate_args = (Distribution._validate_default if validate_args is None
                               else bool(validate_args))
        if self._validate_args:
            for name, constraint, ok in self._arg_checks():
                _refuse_unless(ok, f"Expected parameter {name} (Tensor of shape "
                               f"{tuple(getattr(self, name).shape)}) of distribution {self!r} to "
                               f"satisfy the constraint {constraint}", getattr(self, name))

    @staticmethod
    def set_default_validate_args(value):
        """Whether distributions check their arguments (and log_prob its value) by default
        (torch.distributions.Distribution.set_default_validate_args)."""
        if value not in (True, False):
            raise ValueError
        Distribution._validate_default = value

    def _arg_checks(self):
        """(parameter name, PyTorch's constraint text, bool tensor: where it holds)."""
        return ()

    def _validate_sample(self, value, support, ok):
        if self._validate_args:
            _refuse_unless(ok, f"Expected value argument (Tensor of shape {tuple(value.shape)}) "
                           f"to be within the support ({support}) of the distribution {self!r}",
                           value)

    @property
    def batch_shape(self):
        return self._batch_shape

    @property
    def event_shape(self):
        return self._event_shape

    def _extended_shape(self, sample_shape=Size()):
        return _size(tuple(sample_shape) + tuple(self._batch_shape) + tuple(self._event_shape))

    def sample(self, sample_shape=Size()):
        """A sample of shape sample_shape + batch_shape + event_shape, without gradient."""
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=Size()):
        raise NotImplementedError(f"{type(self).__name__} has no rsample (not reparameterizable)")

    def sample_n(self, n):
        return self.sample(Size((n,)))

    @property
    def stddev(self):
        return self.variance.sqrt()

    def __repr__(self):
        names = [n for n in getattr(self, "_repr_names", ()) if n in self.__dict__]
        parts = []
        for n in names:
            v = self.__dict__[n]
            parts.append(f"{n}: {v.item() if v.numel() == 1 else v.size()}")
        return f"{type(self).__name__}({', '.join(parts)})"


class Normal(Distribution):
    """Normal(loc, scale) (torch.distributions.Normal): batch shape the broadcast of loc and
    scale; rsample loc + scale * eps."""

    has_rsample = True
    _repr_names = ("loc", "scale")

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(self.loc.size(), validate_args=validate_args)

    def _arg_checks(self):
        return (("loc", "Real()", _real(self.loc)),
                ("scale", "GreaterThan(lower_bound=0.0)", self.scale > 0))

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def stddev(self):
        return self.scale

    @property
    def variance(self):
        return self.scale.pow(2)

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        eps = random.randn(tuple(shape), dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + eps * self.scale

    def log_prob(self, value):
        self._validate_sample(value, "Real()", _real(value))
        var = self.scale ** 2
        log_scale = self.scale.log()
        return -((value - self.loc) ** 2) / (2 * var) - log_scale - math.log(math.sqrt(2 * math.pi))

    def cdf(self, value):
        return 0.5 * (1 + F.erf((value - self.loc) * self.scale.reciprocal() / math.sqrt(2)))

    def icdf(self, value):
        return self.loc + self.scale * F.erfinv(2 * value - 1) * math.sqrt(2)

    def entropy(self):
        return 0.5 + 0.5 * math.log(2 * math.pi) + self.scale.log()


class Uniform(Distribution):
    """Uniform(low, high) on [low, high) (torch.distributions.Uniform)."""

    has_rsample = True
    _repr_names = ("low", "high")

    def __init__(self, low, high, validate_args=None):
        self.low, self.high = broadcast_all(low, high)
        super().__init__(self.low.size(), validate_args=validate_args)

    def _arg_checks(self):
        h = self.high.item() if self.high.numel() == 1 else self.high
        return (("low", f"LessThan(upper_bound={h})", self.low < self.high),)

    @property
    def mean(self):
        return (self.high + self.low) / 2

    @property
    def variance(self):
        return (self.high - self.low).pow(2) / 12

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        u = random.rand(tuple(shape), dtype=self.low.dtype, device=self.low.device)
        return self.low + u * (self.high - self.low)

    def log_prob(self, value):
        lb = self.low.le(value).type_as(self.low)
        ub = self.high.gt(value).type_as(self.low)
        return (lb * ub).log() - (self.high - self.low).log()

    def cdf(self, value):
        return ((value - self.low) / (self.high - self.low)).clamp(min=0, max=1)

    def entropy(self):
        return (self.high - self.low).log()


class MultivariateNormal(Distribution):
    """MultivariateNormal(loc, covariance_matrix | precision_matrix | scale_tril)
    (torch.distributions.MultivariateNormal): event shape (k,), rsample loc + L @ eps with L the
    Cholesky factor of the covariance.

    Raises:
        ValueError: not exactly one of the three matrices (PyTorch's text).
    """

    has_rsample = True
    _repr_names = ("loc", "covariance_matrix")

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None,
                 validate_args=None):
        if (covariance_matrix is not None) + (scale_tril is not None) + \
                (precision_matrix is not None) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril "
                             "may be specified.")
        if scale_tril is not None:
            m = scale_tril
        elif covariance_matrix is not None:
            m = covariance_matrix
        else:
            m = linalg.inv(precision_matrix)
        batch = np.broadcast_shapes(tuple(m.shape[:-2]), tuple(loc.shape[:-1]))
        k = loc.shape[-1]
        self.loc = loc.expand(*batch, k)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
            self.scale_tril = scale_tril.expand(*batch, k, k)
        else:
            self.covariance_matrix = m.expand(*batch, k, k)
            self._unbroadcasted_scale_tril = linalg.cholesky(m)
        super().__init__(batch, (k,))

    @property
    def mean(self):
        return self.loc

    @property
    def variance(self):
        L = self._unbroadcasted_scale_tril
        return L.pow(2).sum(-1).expand(*self.batch_shape, *self.event_shape)

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        eps = random.randn(tuple(shape), dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + F.matmul(self._unbroadcasted_scale_tril, eps.unsqueeze(-1)).squeeze(-1)

    def log_prob(self, value):
        diff = value - self.loc
        L = self._unbroadcasted_scale_tril
        shape = np.broadcast_shapes(tuple(L.shape[:-2]), tuple(diff.shape[:-1]))
        k = self.event_shape[0]
        sol = linalg.solve(L.expand(*shape, k, k), diff.expand(*shape, k).unsqueeze(-1))
        m = sol.squeeze(-1).pow(2).sum(-1)
        half_log_det = F.diagonal(L, dim1=-2, dim2=-1).log().sum(-1)
        return -0.5 * (k * math.log(2 * math.pi) + m) - half_log_det

    def entropy(self):
        k = self.event_shape[0]
        half_log_det = F.diagonal(self._unbroadcasted_scale_tril, dim1=-2, dim2=-1).log().sum(-1)
        h = 0.5 * k * (1.0 + math.log(2 * math.pi)) + half_log_det
        return h.expand(*self.batch_shape) if len(self.batch_shape) else h


def _probs_logits(probs, logits, binary):
    if (probs is None) == (logits is None):
        raise ValueError("Either `probs` or `logits` must be specified, but not both.")
    if probs is not None:
        probs = _as_tensor(probs)
        if binary:
            eps = float(np.finfo(dtypes.to_np(probs.dtype)).eps)
            p = probs.clamp(min=eps, max=1 - eps)
            return probs, p.log() - (-p).log1p()
        probs = probs / probs.sum(-1, keepdim=True)
        eps = float(np.finfo(dtypes.to_np(probs.dtype)).eps)
        return probs, probs.clamp(min=eps, max=1 - eps).log()
    logits = _as_tensor(logits)
    if binary:
        return F.sigmoid(logits), logits
    logits = logits - logits.logsumexp(-1, keepdim=True)
    return F.softmax(logits, -1), logits


class Bernoulli(Distribution):
    """Bernoulli(probs=None, logits=None) (torch.distributions.Bernoulli)."""

    _repr_names = ("probs", "logits")

    def __init__(self, probs=None, logits=None, validate_args=None):
        self.probs, self.logits = _probs_logits(probs, logits, True)
        self._given = "probs" if probs is not None else "logits"
        super().__init__(self.probs.size(), validate_args=validate_args)

    def _arg_checks(self):
        if self._given == "probs":
            return (("probs", "Interval(lower_bound=0.0, upper_bound=1.0)",
                     (self.probs >= 0) & (self.probs <= 1)),)
        return (("logits", "Real()", _real(self.logits)),)

    def __repr__(self):
        v = getattr(self, self._given)
        return f"Bernoulli({self._given}: {v.item() if v.numel() == 1 else v.size()})"

    @property
    def mean(self):
        return self.probs

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        with no_grad():
            return F.bernoulli(self.probs.expand(*shape))

    def log_prob(self, value):
        self._validate_sample(value, "Boolean()", (value == 0) | (value == 1))
        logits, value = broadcast_all(self.logits, value)
        return -NF.binary_cross_entropy_with_logits(logits, value, reduction="none")

    def entropy(self):
        return NF.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")


class Categorical(Distribution):
    """Categorical(probs=None, logits=None) over the last dim (torch.distributions.Categorical):
    samples are int64 class indices of shape sample_shape + batch_shape."""

    _repr_names = ("probs", "logits")

    def __init__(self, probs=None, logits=None, validate_args=None):
        self.probs, self.logits = _probs_logits(probs, logits, False)
        self._given = "probs" if probs is not None else "logits"
        self._num_events = self.probs.shape[-1]
        super().__init__(self.probs.size()[:-1], validate_args=validate_args)

    def _arg_checks(self):
        if self._given == "probs":
            p = self.probs
            return (("probs", "Simplex()",
                     (p >= 0).all(-1) & ((p.sum(-1) - 1).abs() < 1e-6)),)
        return (("logits", "IndependentConstraint(Real(), 1)", _real(self.logits).all(-1)),)

    def __repr__(self):
        v = getattr(self, self._given)
        return f"Categorical({self._given}: {v.size()})"

    @property
    def param_shape(self):
        return self.probs.size()

    @property
    def mean(self):
        return creation.full(tuple(self._extended_shape()), float("nan"), dtype=self.probs.dtype)

    @property
    def mode(self):
        return self.probs.argmax(-1)

    def sample(self, sample_shape=Size()):
        sample_shape = _size(sample_shape)
        n = int(np.prod(tuple(sample_shape), dtype=np.int64))
        with no_grad():
            probs_2d = self.probs.reshape(-1, self._num_events)
            samples_2d = random.multinomial(probs_2d, n, True).T
            return samples_2d.reshape(tuple(self._extended_shape(sample_shape)))

    def log_prob(self, value):
        self._validate_sample(value, f"IntegerInterval(lower_bound=0, upper_bound="
                              f"{self._num_events - 1})",
                              (value == value.floor()) & (value >= 0) &
                              (value <= self._num_events - 1))
        value = value.long().unsqueeze(-1)
        value, log_pmf = F.broadcast_tensors(value, self.logits)
        value = value[..., :1]
        return log_pmf.gather(-1, value).squeeze(-1)

    def entropy(self):
        eps = float(np.finfo(dtypes.to_np(self.logits.dtype)).min)
        logits = self.logits.clamp(min=eps)
        return -(logits * self.probs).sum(-1)


class Independent(Distribution):
    """Independent(base, n) (torch.distributions.Independent): the last n batch dims of base
    become event dims (log_prob summed over them)."""

    def __init__(self, base_distribution, reinterpreted_batch_ndims, validate_args=None):
        n = reinterpreted_batch_ndims
        shape = tuple(base_distribution.batch_shape) + tuple(base_distribution.event_shape)
        event_dim = n + len(base_distribution.event_shape)
        self.base_dist = base_distribution
        self.reinterpreted_batch_ndims = n
        self.has_rsample = base_distribution.has_rsample
        super().__init__(shape[:len(shape) - event_dim], shape[len(shape) - event_dim:])

    def __repr__(self):
        return f"Independent({self.base_dist}, {self.reinterpreted_batch_ndims})"

    @property
    def mean(self):
        return self.base_dist.mean

    @property
    def variance(self):
        return self.base_dist.variance

    def sample(self, sample_shape=Size()):
        return self.base_dist.sample(sample_shape)

    def rsample(self, sample_shape=Size()):
        return self.base_dist.rsample(sample_shape)

    def log_prob(self, value):
        return _sum_rightmost(self.base_dist.log_prob(value), self.reinterpreted_batch_ndims)

    def entropy(self):
        return _sum_rightmost(self.base_dist.entropy(), self.reinterpreted_batch_ndims)


def _sum_rightmost(x, n):
    return x.reshape(*x.shape[:x.dim() - n], -1).sum(-1) if n > 0 else x


# ---- transforms ------------------------------------------------------------------------------
class Transform:
    """An invertible map y = f(x) with log|det df/dx| (torch.distributions.transforms.Transform);
    ``t.inv`` is the inverse map."""

    event_dim = 0

    @property
    def inv(self):
        return _InverseTransform(self)

    def __call__(self, x):
        return self._call(x)

    def _inv_call(self, y):
        return self._inverse(y)

    def log_abs_det_jacobian(self, x, y):
        raise NotImplementedError

    def __repr__(self):
        return type(self).__name__ + "()"


class _InverseTransform(Transform):
    def __init__(self, transform):
        self._inv = transform

    @property
    def inv(self):
        return self._inv

    def __call__(self, x):
        return self._inv._inverse(x)

    def _inverse(self, y):
        return self._inv(y)

    def log_abs_det_jacobian(self, x, y):
        return -self._inv.log_abs_det_jacobian(y, x)

    def __repr__(self):
        return f"_InverseTransform({self._inv})"


class ExpTransform(Transform):
    """y = exp(x)."""

    def _call(self, x):
        return x.exp()

    def _inverse(self, y):
        return y.log()

    def log_abs_det_jacobian(self, x, y):
        return x


class SigmoidTransform(Transform):
    """y = sigmoid(x); its inverse is the logit, clamped to the dtype's open interval."""

    def _call(self, x):
        eps = float(np.finfo(dtypes.to_np(x.dtype)).eps)
        return F.sigmoid(x).clamp(min=float(np.finfo(dtypes.to_np(x.dtype)).tiny), max=1 - eps)

    def _inverse(self, y):
        eps = float(np.finfo(dtypes.to_np(y.dtype)).eps)
        y = y.clamp(min=float(np.finfo(dtypes.to_np(y.dtype)).tiny), max=1 - eps)
        return y.log() - (-y).log1p()

    def log_abs_det_jacobian(self, x, y):
        return -NF.softplus(-x) - NF.softplus(x)


class AffineTransform(Transform):
    """y = loc + scale * x."""

    def __init__(self, loc, scale, event_dim=0):
        self.loc, self.scale, self.event_dim = loc, scale, event_dim

    def _call(self, x):
        return self.loc + self.scale * x

    def _inverse(self, y):
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x, y):
        scale = self.scale
        if isinstance(scale, Tensor):
            r = scale.abs().log()
        else:
            r = creation.full(tuple(x.shape), math.log(abs(scale)), dtype=x.dtype)
        r = r.expand(*x.shape) if tuple(r.shape) != tuple(x.shape) else r
        return _sum_rightmost(r, self.event_dim)


class TransformedDistribution(Distribution):
    """base_distribution pushed through transforms (torch.distributions.TransformedDistribution):
    samples are transforms applied in order, log_prob inverts them and subtracts each
    log|det J|."""

    def __init__(self, base_distribution, transforms, validate_args=None):
        self.base_dist = base_distribution
        self.transforms = [transforms] if isinstance(transforms, Transform) else list(transforms)
        self.has_rsample = base_distribution.has_rsample
        super().__init__(base_distribution.batch_shape, base_distribution.event_shape)

    def __repr__(self):
        return "TransformedDistribution()"

    def sample(self, sample_shape=Size()):
        with no_grad():
            x = self.base_dist.sample(sample_shape)
            for t in self.transforms:
                x = t(x)
            return x

    def rsample(self, sample_shape=Size()):
        x = self.base_dist.rsample(sample_shape)
        for t in self.transforms:
            x = t(x)
        return x

    def log_prob(self, value):
        event_dim = len(self.event_shape)
        lp = 0.0
        y = value
        for t in reversed(self.transforms):
            x = t.inv(y)
            lp = lp - _sum_rightmost(t.log_abs_det_jacobian(x, y), event_dim - t.event_dim)
            y = x
        return lp + _sum_rightmost(self.base_dist.log_prob(y),
                                   event_dim - len(self.base_dist.event_shape))


def kl_divergence(p, q):
    """KL(p || q) (torch.distributions.kl_divergence), for two Normals.

    Raises:
        NotImplementedError: another pair of types (PyTorch's text).
    """
    if isinstance(p, Normal) and isinstance(q, Normal):
        var_ratio = (p.scale / q.scale).pow(2)
        t1 = ((p.loc - q.loc) / q.scale).pow(2)
        return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())
    raise NotImplementedError(f"No KL(p || q) is implemented for p type {type(p).__name__} and "
                              f"q type {type(q).__name__}")


# PyTorch's submodule paths (torch.distributions.normal.Normal, ...)
from . import (bernoulli, categorical, distribution, independent, kl,  # noqa: E402,F401
               multivariate_normal, normal, transformed_distribution, transforms, uniform, utils)
