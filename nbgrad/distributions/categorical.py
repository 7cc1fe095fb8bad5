"""torch.distributions.categorical: Categorical (defined in nbgrad.distributions)."""
from . import Categorical  # noqa: F401

__all__ = ["Categorical"]
