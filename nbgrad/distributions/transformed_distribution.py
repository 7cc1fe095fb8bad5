"""torch.distributions.transformed_distribution: TransformedDistribution
(defined in nbgrad.distributions).
"""
from . import TransformedDistribution  # noqa: F401

__all__ = ["TransformedDistribution"]
