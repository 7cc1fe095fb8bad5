"""torch.distributions.distribution: Distribution (defined in nbgrad.distributions)."""
from . import Distribution  # noqa: F401

__all__ = ["Distribution"]
