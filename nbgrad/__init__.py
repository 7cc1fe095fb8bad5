"""nbgrad: a Jupyter-first autograd environment with PyTorch's semantics, on numpy and cupy.

`import nbgrad as torch` runs PyTorch autograd tutorials as far as the API goes. In a notebook,
`%load_ext nbgrad` shows the live grad_fn graph, version counters, views and memory after each cell.
"""
from __future__ import annotations

import sys as _sys
import warnings as _warnings

# NaN and inf propagate silently, as in PyTorch: the op table runs with numpy's floating-point
# warnings off (backend.quiet); this filter covers nbgrad's other numpy calls (the user's own
# numpy code is untouched).
_warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"nbgrad\.")

from . import backend, dtypes, tracebacks  # noqa: E402
from .backend import (device, get_default_device, get_num_threads, set_default_device,
                      set_num_threads)
from .dtypes import (bfloat16, bool_ as bool, dtype, float16, float32, float64,
                     get_default_dtype, int8, int16, int32, int64, set_default_dtype, uint8)
from .dtypes import float16 as half, float32 as float, float64 as double, int64 as long
from .dtypes import int32 as int, int16 as short
from .tensor import Size, Tensor
from .storage import Storage as UntypedStorage
from .typed_storage import TypedStorage  # noqa: F401
from .autograd.grad_mode import (enable_grad, inference_mode, is_grad_enabled,
                                 is_inference_mode_enabled, no_grad, set_grad_enabled)
from . import ops
from .functions import *  # noqa: F401,F403  (the torch.* functions)
from .functions import (abs, all, any, max, min, pow, round, sum)  # noqa: F401  (shadow builtins)
from .functions import _safe_softmax  # noqa: F401  (torch._safe_softmax, attention's softmax)
from .functions import _weight_norm  # noqa: F401  (torch._weight_norm, nn.utils.weight_norm's)
from . import linalg  # noqa: E402  (torch.linalg)
from . import return_types  # noqa: E402  (torch.return_types)
from .creation import (arange, as_tensor, asarray, empty, empty_like, eye, from_dlpack,
                       from_numpy, full, full_like, linspace, logspace, ones, ones_like, tensor,
                       zeros, zeros_like)
from .creation import deprecated_range as range  # noqa: A001  (torch.range shadows the builtin)
from .random import (Generator, default_generator, get_rng_state, initial_seed, manual_seed,
                     multinomial, rand, rand_like, randint, randint_like, randn, randn_like,
                     randperm, seed, set_rng_state)
from .sampling import bernoulli, normal
from .printing import set_printoptions
from . import sparse  # noqa: E402  (torch.sparse)
from .sparse import sparse_coo_tensor  # noqa: E402
from .dtypes import layout, sparse_coo, strided  # noqa: E402,F401
from .typeinfo import can_cast, finfo, iinfo, promote_types, result_type
from . import accelerator, amp, autograd, backends, cuda, distributed, version
from .autograd.function import Function  # noqa: F401
from .autograd.anomaly import (is_anomaly_check_nan_enabled, is_anomaly_enabled,  # noqa: F401
                               set_anomaly_enabled, set_detect_anomaly)
from . import nn, optim, utils, viz
from . import distributions  # noqa: E402  (torch.distributions)
# torch.autograd.functional (jacobian, hessian, ...) is built on the torch.* surface, a layer
# above autograd: the package root, which may import every layer, loads it
from .autograd import functional as _autograd_functional  # noqa: E402,F401
from .serialization import load, save
from .typed_storage import (BoolStorage, ByteStorage, CharStorage, DoubleStorage,  # noqa: E402
                            FloatStorage, HalfStorage, IntStorage, LongStorage, ShortStorage)

__version__ = "0.1.0"

# torch's float constants (torch.inf, torch.nan, torch.pi, torch.e)
import math as _math  # noqa: E402

inf, nan, pi, e = _math.inf, _math.nan, _math.pi, _math.e

backend._init_threads()
tracebacks.install()
if "IPython" in _sys.modules:  # in a notebook: the notebook layer gives Tensor its HTML display
    from .notebook import register_tensor_html as _register_tensor_html
    _register_tensor_html()

from .tensortypes import (BoolTensor, ByteTensor, CharTensor, DoubleTensor, FloatTensor,  # noqa: E402
                          HalfTensor, IntTensor, LongTensor, ShortTensor)


def is_inference(input):
    """True for a tensor made under `inference_mode` (torch.is_inference)."""
    return input.is_inference()


def is_tensor(obj):
    """True when ``obj`` is a Tensor (a Parameter included) (torch.is_tensor)."""
    return isinstance(obj, Tensor)


def _tensor_arg(fn, t):
    if not isinstance(t, Tensor):
        raise TypeError(f"{fn}(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(t).__name__}")
    return t


def is_floating_point(input):
    """True for float16/32/64 tensors (torch.is_floating_point).

    Raises:
        TypeError: ``input`` is not a Tensor (PyTorch's text).
    """
    return _tensor_arg("is_floating_point", input).is_floating_point()


def numel(input):
    """Number of elements of ``input`` (torch.numel); a 0-dim tensor has 1.

    Raises:
        TypeError: ``input`` is not a Tensor (PyTorch's text).
    """
    return _tensor_arg("numel", input).numel()


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
