"""torch.distributions.uniform: Uniform (defined in nbgrad.distributions)."""
from . import Uniform  # noqa: F401

__all__ = ["Uniform"]
