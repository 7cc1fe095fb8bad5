"""torch.distributions.multivariate_normal: MultivariateNormal
(defined in nbgrad.distributions).
"""
from . import MultivariateNormal  # noqa: F401

__all__ = ["MultivariateNormal"]
