"""torch.distributions.independent: Independent (defined in nbgrad.distributions)."""
from . import Independent  # noqa: F401

__all__ = ["Independent"]
