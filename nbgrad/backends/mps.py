"""``nbgrad.backends.mps`` (torch.backends.mps): nbgrad has no Apple Metal backend."""


def is_available() -> bool:
    """False: no MPS device in nbgrad (torch.backends.mps.is_available)."""
    return False


def is_built() -> bool:
    """False: nbgrad is not built with MPS (torch.backends.mps.is_built)."""
    return False
