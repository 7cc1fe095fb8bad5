"""Array backends: numpy (CPU, the default) and cupy (CUDA). The only module that imports cupy.

`get_array_module(arr)` is the one dispatch point, as in Chainer and CuPy: every other module asks
it for `xp` and never imports cupy itself. cupy is imported lazily, on the first request for a
CUDA device, and every failure (no cupy installed, no driver, no GPU) becomes one clear error.
"""
from __future__ import annotations

import functools

import numpy as np

from .naming import expose

_cupy = None          # the cupy module once imported successfully
_cupy_error = None    # why importing / initialising cupy failed


def _load_cupy():
    global _cupy, _cupy_error
    if _cupy is None and _cupy_error is None:
        try:
            import cupy  # noqa: PLC0415  (lazy by design: the only cupy import in nbgrad)

            if not cupy.is_available():
                raise RuntimeError("cupy is installed but no CUDA device is available")
            _cupy = cupy
        except Exception as e:  # ImportError, CUDARuntimeError, ...
            _cupy_error = f"{type(e).__name__}: {e}"
    return _cupy


def cuda_available() -> bool:
    """True when cupy imports and sees a CUDA device (mirrors torch.cuda.is_available)."""
    return _load_cupy() is not None


def cuda_runtime_version():
    """The CUDA runtime cupy runs on as "major.minor" (torch.version.cuda), None without a usable
    GPU."""
    if not cuda_available():
        return None
    v = cupy_module().cuda.runtime.runtimeGetVersion()  # e.g. 12040
    return f"{v // 1000}.{v % 1000 // 10}"


def cupy_module():
    """The cupy module.

    Raises:
        AssertionError: cupy is not installed: as PyTorch built without CUDA ("Torch not
            compiled with CUDA enabled"), with the cause and the extra to install.
        RuntimeError: cupy is installed but no CUDA device works (as PyTorch built with CUDA on
            a machine without a GPU or driver).
    """
    cp = _load_cupy()
    if cp is None:
        hint = ("CUDA is not available to nbgrad (" + (_cupy_error or "unknown reason") + "). "
                "Install the GPU extra with `pip install nbgrad[cuda12]` on a machine with an "
                "NVIDIA GPU and driver, or keep tensors on device='cpu'.")
        if (_cupy_error or "").startswith(("ModuleNotFoundError", "ImportError")):
            raise AssertionError("Torch not compiled with CUDA enabled: " + hint)
        raise RuntimeError(hint)
    return cp


class device:
    """A device, as `torch.device`: `device("cpu")`, `device("cuda")`, `device("cuda:0")`,
    `device(0)` (an index of the accelerator: RuntimeError, torch's text, when none is usable)."""

    __slots__ = ("type", "index")

    def __init__(self, type, index=None):
        if isinstance(type, device):
            type, index = type.type, type.index
        elif isinstance(type, int) and not isinstance(type, bool) and index is None:
            # torch.device(0): an index of the current accelerator (nbgrad's: CUDA through cupy)
            if not cuda_available():
                raise RuntimeError("Cannot access accelerator device when none is available.")
            type, index = "cuda", type
        if not isinstance(type, str):
            raise TypeError(f"device() expects a string such as 'cpu' or 'cuda:0', got {type!r}")
        if ":" in type:
            type, _, idx = type.partition(":")
            index = int(idx)
        if type not in ("cpu", "cuda"):
            raise RuntimeError(
                f"Expected one of cpu, cuda device type at start of device string: {type}")
        self.type = type
        self.index = index

    def __eq__(self, other):
        if isinstance(other, str):
            other = device(other)
        return isinstance(other, device) and self.type == other.type and (
            self.index == other.index or self.index is None or other.index is None)

    def __hash__(self):
        return hash(self.type)

    def __repr__(self):
        return f"device(type='{self.type}'" + ("" if self.index is None else
                                               f", index={self.index}") + ")"

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __enter__(self):
        """``with nbgrad.device("cuda"):`` factory functions default to this device inside."""
        _device_stack.append(get_default_device())
        set_default_device(self)
        return self

    def __exit__(self, *exc):
        set_default_device(_device_stack.pop())
        return False


expose(device, "torch")


_device_stack = []


CPU = device("cpu")
_CUDA = device("cuda", 0)
_default_device = CPU


def set_default_device(dev) -> None:
    """Where factory functions (zeros, tensor, rand, ...) put tensors when given no device
    (torch.set_default_device); None means "cpu". "cuda" is checked when a tensor is made there.
    """
    global _default_device
    d = CPU if dev is None else device(dev)
    _default_device = device("cuda", 0) if d.type == "cuda" and d.index is None else d


def get_default_device() -> device:
    """The device factory functions use when given none (torch.get_default_device)."""
    return _default_device


def get_array_module(arr):
    """numpy for numpy arrays (and anything else), cupy for cupy arrays."""
    if type(arr) is np.ndarray or _cupy is None:
        return np
    return _cupy.get_array_module(arr)


def device_of(arr) -> device:
    """The device an array lives on."""
    if type(arr) is np.ndarray or _cupy is None or not isinstance(arr, _cupy.ndarray):
        return CPU
    return device("cuda", arr.device.id)


def xp_for(dev: device):
    """The array module for a device; raises a clear RuntimeError when CUDA is unusable."""
    return np if dev.type == "cpu" else cupy_module()


def to_device(arr, dev: device):
    """Copy `arr` to `dev` (no copy when it is already there)."""
    if dev.type == "cpu":
        if type(arr) is np.ndarray:
            return arr
        return arr.get()
    cp = cupy_module()
    if isinstance(arr, cp.ndarray):
        return arr
    with cp.cuda.Device(dev.index or 0):
        return cp.asarray(arr)


def as_array(x):
    """numpy hands back scalars for 0-d results; tensors always hold arrays."""
    return np.asarray(x) if isinstance(x, (np.generic, float, int)) else x


def data_ptr(arr) -> int:
    """Address of the first element of a numpy or cupy array."""
    if type(arr) is np.ndarray:
        return arr.ctypes.data
    return arr.data.ptr


def as_strided(root, shape, strides, offset):
    """A view of `root`'s buffer with element `strides` starting `offset` elements in.

    `root` is a storage's root array (dense, non-negative strides), numpy or cupy.
    """
    xp = get_array_module(root)
    it = root.itemsize
    flat = xp.lib.stride_tricks.as_strided(root, shape=(root.size,), strides=(it,))
    return xp.lib.stride_tricks.as_strided(flat[offset:], shape=tuple(shape),
                                           strides=tuple(s * it for s in strides))


def _scipy_special():
    """scipy.special when installed (it comes with scikit-learn, the `train` extra), else None."""
    global _SPECIAL
    if _SPECIAL is False:
        try:
            import scipy.special as sp  # noqa: PLC0415
        except ImportError:
            sp = None
        _SPECIAL = sp
    return _SPECIAL


_SPECIAL = False


def erf(arr):
    """The error function, elementwise (numpy has none; cupy has it in cupyx). On the CPU,
    scipy.special.erf when scipy is installed — 1 ms for 135k elements where calling Python's
    math.erf per element (the fallback) takes 24 ms and made exact GELU the slowest op of a
    small GPT."""
    if type(arr) is np.ndarray:
        sp = _scipy_special()
        if sp is not None:
            return sp.erf(arr).astype(arr.dtype, copy=False)
        import math
        out = np.frompyfunc(math.erf, 1, 1)(arr)
        return np.asarray(out, dtype=arr.dtype)
    import cupyx.scipy.special as sp  # noqa: PLC0415
    return sp.erf(arr)


def erfinv(arr):
    """The inverse error function, elementwise: Giles' approximation refined by two Newton
    steps on erf (numpy has none; cupy has it in cupyx). +-inf at +-1, NaN outside [-1, 1]."""
    if type(arr) is not np.ndarray:
        import cupyx.scipy.special as sp  # noqa: PLC0415
        return sp.erfinv(arr)
    y = np.asarray(arr, dtype=np.float64)
    with np.errstate(all="ignore"):
        w = -np.log((1 - y) * (1 + y))
        small = w < 5
        ws, wl = w - 2.5, np.sqrt(w) - 3
        ps = np.full_like(y, 2.81022636e-08)
        for c in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
                  -0.00417768164, 0.246640727, 1.50140941):
            ps = c + ps * ws
        pl = np.full_like(y, -0.000200214257)
        for c in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
                  0.00943887047, 1.00167406, 2.83297682):
            pl = c + pl * wl
        x = np.where(small, ps, pl) * y
        inner = np.isfinite(x)
        for _ in range(2):
            step = (erf(x[inner]) - y[inner]) / (1.1283791670955126 * np.exp(-x[inner] ** 2))
            x[inner] -= step
        x = np.where(np.abs(y) == 1, np.copysign(np.inf, y), x)
        x = np.where(np.abs(y) > 1, np.nan, x)
    return x.astype(arr.dtype if arr.dtype.kind == "f" else np.float64)


# ---- BLAS threads (torch.set_num_threads / get_num_threads) ----
_THREADS = [None]


def set_num_threads(n: int) -> None:
    """Number of threads the BLAS under numpy may use (torch.set_num_threads).

    nbgrad sets 1 at import (override with the NBGRAD_NUM_THREADS environment variable): its
    tensors are small, and OpenBLAS threads on small matrices cost more than they give — an MLP
    epoch on the digits data ran 8x slower with 2 threads on a busy 2-core machine. This changes
    the BLAS thread count of the whole process, numpy included, as torch does for its own.
    """
    n = int(n)
    if n < 1:
        raise RuntimeError(f"set_num_threads expects a positive integer, but got {n}")
    try:
        from threadpoolctl import threadpool_limits  # noqa: PLC0415
    except ImportError:  # without threadpoolctl the BLAS keeps its own setting
        _THREADS[0] = None
        return
    threadpool_limits(limits=n, user_api="blas")
    _THREADS[0] = n


def get_num_threads() -> int:
    """The BLAS thread count nbgrad set (or the BLAS's own when it could not set one)."""
    if _THREADS[0] is not None:
        return _THREADS[0]
    try:
        from threadpoolctl import threadpool_info  # noqa: PLC0415
        info = [i for i in threadpool_info() if i.get("user_api") == "blas"]
        return int(info[0]["num_threads"]) if info else 1
    except ImportError:
        return 1


def _init_threads():
    import os
    n = os.environ.get("NBGRAD_NUM_THREADS", "1")
    try:
        set_num_threads(int(n))
    except Exception:  # never fail an import over a thread count
        pass


# ---- memory accounting: live storage bytes per device (the CPU counterpart of the cupy pool) ----
class _Counters:
    __slots__ = ("live_bytes", "peak_bytes", "created", "freed")

    def __init__(self):
        self.live_bytes = self.peak_bytes = self.created = self.freed = 0

    @property
    def live_storages(self):
        return self.created - self.freed


COUNTERS = _Counters()


def memory_stats(device_="cpu") -> dict:
    """Memory statistics (bytes).

    CPU: `live_bytes` (bytes of live nbgrad storages), `live_storages`, `peak_bytes`.
    CUDA: the same counters plus cupy's pool: `used_bytes`, `total_bytes` (held by the pool),
    `free_bytes`, `free_blocks`, `limit` (0 = none). Raises RuntimeError when CUDA is unusable.
    """
    dev = device(device_) if not isinstance(device_, device) else device_
    out = {"live_bytes": COUNTERS.live_bytes, "live_storages": COUNTERS.live_storages,
           "peak_bytes": COUNTERS.peak_bytes}
    if dev.type == "cuda":
        pool = cupy_module().get_default_memory_pool()
        out.update(used_bytes=pool.used_bytes(), total_bytes=pool.total_bytes(),
                   free_bytes=pool.free_bytes(), free_blocks=pool.n_free_blocks(),
                   limit=pool.get_limit())
    return out


def empty_cache():
    """Release the cupy pool's cached, unused blocks to the driver (torch.cuda.empty_cache)."""
    if _load_cupy() is not None:
        _cupy.get_default_memory_pool().free_all_blocks()


# ---- floating-point warnings -------------------------------------------------------------------
# NaN and Inf are values (as in PyTorch): the op table computes with numpy's floating-point
# warnings off. `quiet()` / `loud(token)` bracket a computation; they set numpy's error state for
# the current context only (the user's own numpy code keeps its settings). numpy 2 keeps that
# state in a ContextVar, which costs ~0.1 us to set and reset; np.errstate costs ~1 us.
try:
    from numpy._core._ufunc_config import _extobj_contextvar as _ERRSTATE
    from numpy._core.umath import _make_extobj

    quiet = functools.partial(_ERRSTATE.set, _make_extobj(all="ignore"))  # C calls only
    loud = _ERRSTATE.reset
except ImportError:  # numpy 1.x: the public (slower) context manager
    def quiet():
        state = np.errstate(all="ignore")
        state.__enter__()
        return state

    def loud(state):
        state.__exit__(None, None, None)
