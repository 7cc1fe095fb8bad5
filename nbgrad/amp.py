"""``nbgrad.amp`` (torch.amp, also reached as torch.cuda.amp): mixed precision's gradient scaler.

nbgrad computes in the dtype it is given and has no autocast, so :class:`GradScaler` always runs
as PyTorch's does when it is disabled, or enabled without a CUDA device (PyTorch then warns and
disables it): ``scale(loss)`` returns ``loss``, ``step(optimizer)`` calls ``optimizer.step()``,
``unscale_`` and ``update`` do nothing. Training scripts that create one unconditionally (nanoGPT's
``GradScaler(enabled=(dtype == 'float16'))``) run unchanged.
"""
from __future__ import annotations

import warnings

__all__ = ["GradScaler"]


class GradScaler:
    """torch.amp.GradScaler / torch.cuda.amp.GradScaler, always disabled (see the module text).

    ``enabled=True`` warns as PyTorch does without CUDA ("... is enabled, but CUDA is not
    available.  Disabling.") and behaves as ``enabled=False``.
    """

    def __init__(self, device="cuda", init_scale=2.0 ** 16, growth_factor=2.0,
                 backoff_factor=0.5, growth_interval=2000, enabled=True):
        if isinstance(device, bool):  # torch.cuda.amp.GradScaler's first argument is init_scale
            device, enabled = "cuda", device
        if enabled:
            warnings.warn("torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  "
                          "Disabling.", UserWarning, stacklevel=2)
        self._enabled = False
        self._init_scale = init_scale
        self._growth_factor = growth_factor
        self._backoff_factor = backoff_factor
        self._growth_interval = growth_interval

    def is_enabled(self):
        """False: nbgrad's scaler never scales."""
        return self._enabled

    def scale(self, outputs):
        """``outputs`` unchanged (a tensor or a nested list/tuple of them), as a disabled scaler."""
        return outputs

    def unscale_(self, optimizer):
        """Nothing to undo: the gradients were never scaled."""

    def step(self, optimizer, *args, **kwargs):
        """``optimizer.step(*args, **kwargs)``, returning what it returns."""
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale=None):
        """Nothing to update (disabled)."""

    def get_scale(self):
        """1.0, as a disabled PyTorch scaler reports."""
        return 1.0

    def get_growth_factor(self):
        return self._growth_factor

    def get_backoff_factor(self):
        return self._backoff_factor

    def get_growth_interval(self):
        return self._growth_interval

    def state_dict(self):
        """{} for a disabled scaler, as PyTorch's."""
        return {}

    def load_state_dict(self, state_dict):
        """Accepts what ``state_dict`` gave (nothing to restore)."""
