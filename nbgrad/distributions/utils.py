"""torch.distributions.utils: broadcast_all (defined in nbgrad.distributions)."""
from . import broadcast_all  # noqa: F401

__all__ = ["broadcast_all"]
