"""nbgrad: a Jupyter-first autograd environment with PyTorch's semantics, on numpy and cupy.

`import nbgrad as torch` runs PyTorch autograd tutorials as far as the API goes. In a notebook,
`%load_ext nbgrad` shows the live grad_fn graph, version counters, views and memory after each cell.
"""
from __future__ import annotations

import warnings as _warnings

# NaN and inf propagate silently, as in PyTorch: numpy's floating-point warnings raised inside
# nbgrad's own code are not the user's concern (their own numpy code is untouched).
_warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"nbgrad\.")

from . import backend, dtypes  # noqa: E402
from .backend import device, get_num_threads, set_num_threads
from .dtypes import (bool_ as bool, dtype, float16, float32, float64, get_default_dtype, int8,
                     int16, int32, int64, set_default_dtype, uint8)
from .dtypes import float16 as half, float32 as float, float64 as double, int64 as long
from .dtypes import int32 as int, int16 as short
from .tensor import Size, Tensor
from .storage import Storage as UntypedStorage
from .autograd.grad_mode import (enable_grad, inference_mode, is_grad_enabled,
                                 is_inference_mode_enabled, no_grad, set_grad_enabled)
from . import ops
from .functions import *  # noqa: F401,F403  (the torch.* functions)
from .functions import (abs, all, any, max, min, pow, round, sum)  # noqa: F401  (shadow builtins)
from .functions import _safe_softmax  # noqa: F401  (torch._safe_softmax, attention's softmax)
from . import linalg  # noqa: E402  (torch.linalg)
from .creation import (Generator, arange, as_tensor, asarray, default_generator, empty,
                       empty_like, eye, from_dlpack, from_numpy, full, full_like, initial_seed,
                       linspace, logspace, manual_seed, multinomial, ones, ones_like, rand,
                       rand_like, randint, randint_like, randn, randn_like, randperm, seed, tensor,
                       zeros, zeros_like)
from .printing import set_printoptions
from . import autograd, cuda
from .autograd.function import Function  # noqa: F401
from .autograd.anomaly import is_anomaly_enabled, set_detect_anomaly  # noqa: F401
from . import nn, optim, utils, viz
from .serialization import load, save

__version__ = "0.1.0"

backend._init_threads()

FloatTensor = DoubleTensor = LongTensor = Tensor  # isinstance checks in tutorials
is_tensor = lambda obj: isinstance(obj, Tensor)  # noqa: E731


def is_floating_point(t):
    return t.is_floating_point()


def numel(t):
    return t.numel()


def typename(t):
    return t.type() if isinstance(t, Tensor) else type(t).__name__


def load_ipython_extension(ipython):
    """`%load_ext nbgrad`: register the per-cell panel (imports the notebook layer lazily)."""
    from .notebook.extension import load_ipython_extension as _load
    _load(ipython)


def unload_ipython_extension(ipython):
    """`%unload_ext nbgrad`: remove the hook and magics."""
    from .notebook.extension import unload_ipython_extension as _unload
    _unload(ipython)
