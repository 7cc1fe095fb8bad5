"""``nbgrad.accelerator``: the device-generic accelerator API of torch 2.x (torch.accelerator).

nbgrad's only accelerator is CUDA through cupy: without a usable GPU, ``is_available()`` is
False, ``current_accelerator()`` is None and the index functions raise torch's RuntimeError.
"""
from __future__ import annotations

from . import backend

__all__ = ["is_available", "current_accelerator", "device_count", "current_device_index",
           "current_device_idx", "set_device_index", "set_device_idx", "synchronize"]

_NONE = "Cannot access accelerator device when none is available."


def is_available() -> bool:
    """True when a CUDA GPU is usable (torch.accelerator.is_available)."""
    return backend.cuda_available()


def current_accelerator(check_available: bool = False):
    """``device(type='cuda')`` when nbgrad was built with an accelerator (cupy importable) and,
    with ``check_available``, one is usable; else None (torch.accelerator.current_accelerator).
    """
    if check_available and not is_available():
        return None
    return backend.device("cuda") if is_available() else None


def device_count() -> int:
    """Number of accelerator devices; 0 without one (torch.accelerator.device_count)."""
    return backend.cupy_module().cuda.runtime.getDeviceCount() if is_available() else 0


def _require():
    if not is_available():
        raise RuntimeError(_NONE)
    return backend.cupy_module()


def current_device_index() -> int:
    """Index of the current accelerator device (torch.accelerator.current_device_index).

    Raises:
        RuntimeError: no accelerator ("Cannot access accelerator device when none is available.").
    """
    return int(_require().cuda.runtime.getDevice())


def set_device_index(device, /) -> None:
    """Make ``device`` (an int, or a cuda device) current (torch.accelerator.set_device_index).

    Raises:
        RuntimeError: no accelerator.
    """
    cp = _require()
    index = device.index if isinstance(device, backend.device) else device
    cp.cuda.runtime.setDevice(int(index or 0))


def synchronize(device=None, /) -> None:
    """Wait for all work queued on the accelerator (torch.accelerator.synchronize).

    Raises:
        RuntimeError: no accelerator.
    """
    _require().cuda.runtime.deviceSynchronize()


current_device_idx = current_device_index  # torch's older names
set_device_idx = set_device_index
