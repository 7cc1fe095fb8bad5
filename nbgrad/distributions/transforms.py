"""torch.distributions.transforms: Transform, ExpTransform, SigmoidTransform, AffineTransform
(defined in nbgrad.distributions).
"""
from . import Transform, ExpTransform, SigmoidTransform, AffineTransform  # noqa: F401

__all__ = ["Transform", "ExpTransform", "SigmoidTransform", "AffineTransform"]
