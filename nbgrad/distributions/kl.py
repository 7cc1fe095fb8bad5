"""torch.distributions.kl: kl_divergence (defined in nbgrad.distributions)."""
from . import kl_divergence  # noqa: F401

__all__ = ["kl_divergence"]
