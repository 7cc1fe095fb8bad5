"""torch.distributions.normal: Normal (defined in nbgrad.distributions)."""
from . import Normal  # noqa: F401

__all__ = ["Normal"]
