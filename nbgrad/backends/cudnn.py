"""``nbgrad.backends.cudnn`` (torch.backends.cudnn): nbgrad does not use cuDNN.

``is_available()`` is False and ``version()`` None, as for a PyTorch built without cuDNN; the
flags ``enabled``, ``benchmark``, ``deterministic`` and ``allow_tf32`` keep PyTorch's defaults and
whatever a script assigns, and have no effect.
"""

enabled = True
benchmark = False
deterministic = False
allow_tf32 = True


def is_available() -> bool:
    """False: nbgrad's convolutions are its own (torch.backends.cudnn.is_available)."""
    return False


def version():
    """None: no cuDNN library (torch.backends.cudnn.version)."""
    return None
