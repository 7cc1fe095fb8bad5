"""``nbgrad.distributed`` (torch.distributed): nbgrad runs in one process, with no process group.

``is_available()`` is False and ``is_initialized()`` False, as for a PyTorch built without
distributed support, so scripts that import ``init_process_group`` at the top and use it only
under ``torchrun`` run unchanged; calling a collective or asking for the rank raises
with PyTorch's ValueError for an uninitialised default group.
"""
from __future__ import annotations

__all__ = ["is_available", "is_initialized", "init_process_group", "destroy_process_group",
           "get_rank", "get_world_size", "barrier", "all_reduce", "broadcast"]

_NO_GROUP = ("Default process group has not been initialized, please make sure to call "
             "init_process_group. (nbgrad runs in a single process: torch.distributed is not "
             "available)")


def is_available() -> bool:
    """False: no distributed backend in nbgrad (torch.distributed.is_available)."""
    return False


def is_initialized() -> bool:
    """False: no process group can exist (torch.distributed.is_initialized)."""
    return False


def init_process_group(*args, **kwargs):
    """Raises RuntimeError: nbgrad cannot join a process group."""
    raise RuntimeError("nbgrad runs in a single process: torch.distributed.init_process_group is "
                       "not available (torch.distributed.is_available() is False)")


def _uninitialised(*args, **kwargs):
    raise ValueError(_NO_GROUP)


destroy_process_group = get_rank = get_world_size = barrier = all_reduce = broadcast = \
    _uninitialised
