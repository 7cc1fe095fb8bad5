"""torch.distributions.bernoulli: Bernoulli (defined in nbgrad.distributions)."""
from . import Bernoulli  # noqa: F401

__all__ = ["Bernoulli"]
