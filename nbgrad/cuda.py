"""nbgrad.cuda: device queries and cupy's caching memory pool, named as torch.cuda.

All calls go through backend.py; without cupy or a GPU, `is_available()` is False and the memory
functions raise RuntimeError naming the cause.
"""
from __future__ import annotations

from . import amp, backend  # noqa: F401  (amp: torch.cuda.amp.GradScaler)


def is_available() -> bool:
    """True when cupy imports and a CUDA device is present (torch.cuda.is_available)."""
    return backend.cuda_available()


def is_bf16_supported(including_emulation=True) -> bool:
    """False: nbgrad's arrays (numpy, cupy) have no bfloat16 (torch.cuda.is_bf16_supported)."""
    return False


def device_count() -> int:
    return backend.cupy_module().cuda.runtime.getDeviceCount() if is_available() else 0


def _pool():
    return backend.cupy_module().get_default_memory_pool()


def memory_allocated(device=None) -> int:
    """Bytes of GPU memory held by live arrays (cupy pool `used_bytes`)."""
    return _pool().used_bytes()


def memory_reserved(device=None) -> int:
    """Bytes held by the caching pool, used or cached (cupy pool `total_bytes`)."""
    return _pool().total_bytes()


_PEAK = [0]


def max_memory_allocated(device=None) -> int:
    """Highest memory_allocated seen by nbgrad's calls since the last reset (bytes)."""
    _PEAK[0] = max(_PEAK[0], memory_allocated())
    return _PEAK[0]


def reset_peak_memory_stats(device=None) -> None:
    _PEAK[0] = memory_allocated()


def empty_cache() -> None:
    """Free the pool's cached blocks (torch.cuda.empty_cache)."""
    backend.cupy_module()
    backend.empty_cache()


def memory_stats(device=None) -> dict:
    """The pool's counters: used/total/free bytes, free blocks, limit (bytes)."""
    return backend.memory_stats("cuda")


def synchronize(device=None) -> None:
    backend.cupy_module().cuda.Device().synchronize()


def manual_seed(seed) -> None:
    if is_available():
        backend.cupy_module().random.seed(seed)


manual_seed_all = manual_seed
