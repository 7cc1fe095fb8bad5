"""Tensor: a view (shape, strides, storage_offset, dtype, device) onto a Storage, plus autograd
metadata (requires_grad, grad_fn, grad, hooks). The ops and most methods are bound onto it by
nbgrad/functions/, over the op table in nbgrad/ops/."""
from __future__ import annotations

import warnings
from sys import _getframe

import numpy as np

from . import backend, dtypes, provenance
from .naming import expose, public
from . import storage as _storage
from .storage import Storage
from .storage import InferenceStorage as _InferenceStorage
from .typed_storage import TypedStorage as _TypedStorage

_NONLEAF_GRAD_WARNING = (
    "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad "
    "attribute won't be populated during autograd.backward(). If you indeed want the .grad field "
    "to be populated for a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor. If you "
    "access the non-leaf Tensor by mistake, make sure you access the leaf Tensor instead. See "
    "github.com/pytorch/pytorch/pull/30531 for more information.")

# view creation meta (why a view may refuse in-place modification)
DEFAULT, NO_GRAD_MODE, MULTI_OUTPUT, INFERENCE = 0, 1, 2, 3


class Size(tuple):
    """A shape (torch.Size): a tuple of ints."""

    def __repr__(self):
        return public(f"Size({list(self)})")

    def numel(self):
        n = 1
        for s in self:
            n *= s
        return n


def type_name(np_dtype, arr=None):
    """'nbgrad.FloatTensor' (or 'nbgrad.cuda.FloatTensor') for an array's dtype."""
    d = dtypes.from_np(np_dtype)
    dev = "" if arr is None or type(arr) is np.ndarray else "cuda."
    return public(dev + d._tensor_name)


class _ViewMeta:
    """What a view remembers: its base, the version its grad_fn was made at, why it was made."""

    __slots__ = ("base", "version", "creation", "creator", "own")

    def __init__(self, base, version, creation, creator=None):
        self.base = base
        self.version = version
        self.creation = creation
        self.creator = creator  # node name for MULTI_OUTPUT views
        self.own = False  # requires_grad_() was called on it (PyTorch's own flag: an accumulator)


def wake_views(base):
    """`base` now requires grad: so do its views made before (PyTorch reads a view's
    requires_grad from its base); those whose storage was written since get AsStridedBackward0
    to the base's history when next used (their version is behind)."""
    vs = base._storage._views
    if vs is None:
        return
    keep = []
    for w in vs:
        r = w()
        if r is None:
            continue
        if r._view.base is base:
            r._requires_grad = True
        else:
            keep.append(w)
    base._storage._views = keep or None


class _Extra:
    """Rarely used per-tensor state, kept out of the common path."""

    __slots__ = ("hooks", "accum", "retains_grad", "name", "cut", "post_acc")

    def __init__(self):
        self.hooks = None
        self.post_acc = None  # register_post_accumulate_grad_hook's hooks (a leaf's)
        self.accum = None
        self.retains_grad = False
        self.name = None
        self.cut = None  # (how, where): made by .detach() / .data / from_numpy of a graph


_PROV = provenance.ENABLED
_cached_site_at = provenance.cached_site_at
_C = backend.COUNTERS
_INF = _storage.INFERENCE


def strides_of(a):
    """An array's strides in elements (torch's Tensor.stride())."""
    n = a.itemsize
    st = a.strides
    if len(st) == 2:  # (mm's operands, saved by every product)
        return (st[0] // n, st[1] // n)
    return tuple([s // n for s in st])


def is_dense(a):
    """Whether an array's elements fill one block of memory, in some order of dims, with neither
    gaps nor overlaps (torch's is_non_overlapping_and_dense)."""
    if a.flags.c_contiguous or a.flags.f_contiguous:
        return True
    step = a.itemsize
    for st, n in sorted((abs(st), n) for n, st in zip(a.shape, a.strides) if n != 1):
        if st != step:
            return False
        step *= n
    return True


def _mark_cut(t, how):
    """Record on `t` where a graph was cut (provenance on only): the notebook panel names it
    ("its output was detached at cell [3] line 1"). Called by .detach(), .data, from_numpy: the
    user's frame is usually their caller's (no walk through the frames between), and its line
    is the shared `(code, lasti)` of provenance's cache (one dict lookup on a repeated line)."""
    e = t._extra
    if e is None:
        e = t._extra = _Extra()
    e.cut = (how, _cached_site_at(_getframe(2)))


class Tensor:
    """A multi-dimensional array with autograd (torch.Tensor).

    Create tensors with `nbgrad.tensor`, `nbgrad.zeros`, ...; `Tensor(data)` also works (the
    legacy constructor, nbgrad.creation.tensor_init). The autograd methods (backward,
    register_hook, retain_grad, grad_fn) are nbgrad/autograd/variable.py's; the ops are bound
    as methods by nbgrad/functions/bind.py.
    """

    # `_storage_or_nbytes`: the Storage, or for a tensor made by an op (`_make_fresh`) the number
    # of bytes it holds until someone asks for its storage (`_storage`): most op outputs never
    # need one (inverted, ~nbytes, for an inference tensor's)
    __slots__ = ("_data", "_storage_or_nbytes", "_grad_fn", "_output_nr", "_requires_grad",
                 "_grad", "_view", "_extra", "__weakref__", "__dict__")
    __array_priority__ = 1000  # so `ndarray * Tensor` defers to Tensor.__rmul__

    # ---- construction (internal, hot) ----
    @staticmethod
    def _make(data, storage, grad_fn, output_nr, requires_grad):
        t = _new(Tensor)
        t._data = data
        t._storage_or_nbytes = storage
        t._grad_fn = grad_fn
        t._output_nr = output_nr
        t._requires_grad = requires_grad
        t._grad = t._view = t._extra = None
        return t

    @staticmethod
    def _make_subclass(cls, data, require_grad=False):
        """A new leaf of type `cls` (a Tensor subclass) sharing `data`'s storage and version
        counter (torch.Tensor._make_subclass; nn.Parameter is built on it)."""
        t = _new(cls)
        _init(t, data._data, data._storage, None, 0, False)
        if require_grad:
            t.requires_grad_(True)
        return t

    @staticmethod
    def _make_fresh(data):
        """A new leaf tensor owning `data` (a new storage, made when first asked for: until
        then the tensor counts its bytes as live itself, and gives them back in `__del__`).
        Under inference mode the count is stored inverted (`~nbytes`, negative): the storage
        made later is an InferenceStorage (an inference tensor from the start)."""
        t = _new(Tensor)
        t._data = data
        c = _C
        c.created += 1
        n = data.nbytes
        c.live_bytes = b = c.live_bytes + n
        if b > c.peak_bytes:
            c.peak_bytes = b
        t._storage_or_nbytes = ~n if _INF[0] else n
        t._grad_fn = t._grad = t._view = t._extra = None
        t._output_nr = 0
        t._requires_grad = False
        return t

    @property
    def _storage(self):
        """The Storage under this tensor (made now for a tensor an op made without one)."""
        st = self._storage_or_nbytes
        if type(st) is int:
            st = self._storage_or_nbytes = Storage.adopt(self._data, st) if st >= 0 else \
                _InferenceStorage.adopt(self._data, ~st)
        return st

    @_storage.setter
    def _storage(self, st):
        old = self._storage_or_nbytes
        if type(old) is int:  # the bytes it counted go, as its storage would have
            _C.live_bytes -= old if old >= 0 else ~old
            _C.freed += 1
        self._storage_or_nbytes = st

    def __del__(self):
        try:
            n = self._storage_or_nbytes
        except AttributeError:  # (a constructor that failed half-way)
            return
        if type(n) is int:
            c = _C
            c.live_bytes -= n if n >= 0 else ~n
            c.freed += 1

    # ---- metadata ----
    @property
    def shape(self):
        return Size(self._data.shape)

    def size(self, dim=None):
        """The shape, or one dimension of it (torch.Tensor.size)."""
        if dim is None:
            return Size(self._data.shape)
        return self._data.shape[_dim(dim, self._data.ndim)]

    @property
    def dtype(self):
        return dtypes.from_np(self._data.dtype)

    @property
    def device(self):
        return backend.device_of(self._data)

    @property
    def is_cuda(self):
        return self.device.type == "cuda"

    @property
    def ndim(self):
        return self._data.ndim

    def dim(self):
        return self._data.ndim

    def ndimension(self):
        return self._data.ndim

    def numel(self):
        return int(self._data.size)

    nelement = numel

    def element_size(self):
        return self._data.itemsize

    @property
    def itemsize(self):
        return self._data.itemsize

    @property
    def nbytes(self):
        return int(self._data.nbytes)

    def __len__(self):
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    layout = dtypes.strided  # (nbgrad.sparse_coo's tensors: sparse_coo)
    is_sparse = is_sparse_csr = False

    def is_floating_point(self):
        return self._data.dtype.kind == "f"

    def is_complex(self):
        return False

    def stride(self, dim=None):
        """Strides in elements (torch.Tensor.stride)."""
        st = strides_of(self._data)
        return st if dim is None else st[_dim(dim, self._data.ndim)]

    def storage_offset(self):
        """Offset of the first element from the start of the storage, in elements."""
        return (backend.data_ptr(self._data) - self._storage.data_ptr()) // self._data.itemsize

    def data_ptr(self):
        """Address of the first element (int)."""
        return backend.data_ptr(self._data)

    def untyped_storage(self):
        """The Storage this tensor views (shared by all its views)."""
        return self._storage

    def storage(self):
        """The storage as this tensor's dtype (a TypedStorage; deprecated in torch, warns once)."""
        return _TypedStorage._of_tensor(self)

    def is_contiguous(self, memory_format=None):
        return bool(self._data.flags.c_contiguous)

    @property
    def _version(self):
        """The version counter (int): +1 per in-place op on this tensor or any view of it."""
        st = self._storage
        if st.inference and type(st) is not _storage.InferenceData:
            raise RuntimeError("Inference tensors do not track version counter.")
        return st.version

    def is_inference(self):
        """True for a tensor made under `inference_mode` (torch.Tensor.is_inference)."""
        return self._storage.inference

    def _bump_version(self, op_name="inplace"):
        """Record an in-place modification made directly on `_data` (nn/optim internals)."""
        self._storage.bump(op_name)

    def _version_history(self):
        """[(version, op_name, Location)] of recent in-place modifications (newest last)."""
        return self._storage.history()

    @property
    def _base(self):
        v = self._view
        return None if v is None else v.base

    def _is_view(self):
        return self._view is not None

    # ---- autograd attributes ----
    @property
    def requires_grad(self):
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, flag):
        if self._grad_fn is not None and not flag:
            raise RuntimeError("you can only change requires_grad flags of leaf variables. If you "
                               "want to use a computed variable in a subgraph that doesn't require "
                               "differentiation use var_no_grad = var.detach().")
        if flag and self._data.dtype.kind != "f":
            raise RuntimeError("only Tensors of floating point and complex dtype can require "
                               "gradients")
        if flag and self._storage.inference and not _storage.INFERENCE[0]:
            raise RuntimeError("Setting requires_grad=True on inference tensor outside "
                               "InferenceMode is not allowed.")
        v = self._view
        if v is not None:  # a view also requires grad through its base
            v.own = bool(flag)
        self._requires_grad = bool(flag) or self._grad_fn is not None or \
            (v is not None and v.base._requires_grad)
        if flag and self._view is None and self._storage._views is not None:
            wake_views(self)

    def requires_grad_(self, requires_grad=True):
        """Set requires_grad in place; returns self (torch.Tensor.requires_grad_)."""
        if requires_grad and self._data.dtype.kind != "f":
            raise RuntimeError("only Tensors of floating point dtype can require gradients")
        self.requires_grad = requires_grad
        return self

    @property
    def is_leaf(self):
        return self.grad_fn is None

    @property
    def output_nr(self):
        return self._output_nr

    @property
    def grad(self):
        if self._grad_fn is not None and not (self._extra and self._extra.retains_grad):
            warnings.warn(_NONLEAF_GRAD_WARNING, UserWarning, stacklevel=2)
        return self._grad

    @grad.setter
    def grad(self, value):
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(f"assigned grad expected to be a Tensor or None but got grad of "
                                f"type {type(value).__name__}")
            if value._data.shape != self._data.shape:
                raise RuntimeError(f"attempting to assign a gradient of size "
                                   f"'{list(value._data.shape)}' to a tensor of size "
                                   f"'{list(self._data.shape)}'. Please ensure that the gradient "
                                   "and the tensor are the same size")
            if value._data.dtype != self._data.dtype:
                names = {"float32": "Float", "float64": "double", "float16": "Half"}
                raise RuntimeError(
                    f"attempting to assign a gradient with dtype "
                    f"'{names.get(str(value._data.dtype), str(value._data.dtype))}' to a tensor "
                    f"with grad_dtype '{names.get(str(self._data.dtype), str(self._data.dtype))}"
                    "'. The gradient must match the tensor's grad_dtype (defaults to the "
                    "tensor's dtype). You can set the tensor's grad_dtype attribute with a "
                    "specific dtype, or None to allow any dtype. Set grad_dtype with caution. "
                    "Diverging the dtypes of a tensor and its gradient may break downstream "
                    "systems that assume they match.")
        self._grad = value

    @property
    def retains_grad(self):
        return bool(self._extra and self._extra.retains_grad)

    def _x(self):
        e = self._extra
        if e is None:
            e = self._extra = _Extra()
        return e

    @property
    def _hooks(self):
        e = self._extra
        return None if e is None else e.hooks

    def detach(self):
        """A new tensor sharing storage and version counter, outside the graph."""
        t = Tensor._make(self._data, self._storage, None, 0, False)
        if self._requires_grad and _PROV[0]:
            _mark_cut(t, "detach")
        return t

    def detach_(self):
        """Detach this tensor from the graph in place."""
        if self._view is not None:
            raise RuntimeError("Can't detach views in-place. Use detach() instead. If you are "
                               "using DistributedDataParallel (DDP) for training, and "
                               "gradient_as_bucket_view is set as True, gradients are views of "
                               "DDP buckets, and hence detach_() cannot be called on these "
                               "gradients. To fix this error, please refer to the Optimizer."
                               "zero_grad() function in torch/optim/optimizer.py as the "
                               "solution.")
        cut = self._requires_grad and _PROV[0]
        self._grad_fn = None
        self._requires_grad = False
        self._output_nr = 0
        if cut:
            _mark_cut(self, "detach_")
        return self

    @property
    def data(self):
        """A tensor sharing memory but not the version counter, outside the graph."""
        own = self._storage
        st = Storage.adopt(own._root, None)  # (an alias: its bytes are counted by `own`)
        if own.inference:  # .data of an inference tensor is one too (PyTorch), with a version
            # counter when taken outside inference mode
            st.__class__ = _storage.InferenceStorage if _storage.INFERENCE[0] else \
                _storage.InferenceData
        t = Tensor._make(self._data, st, None, 0, False)
        if self._requires_grad and _PROV[0]:
            _mark_cut(t, "data")
        return t

    @data.setter
    def data(self, value):
        """PyTorch's set_data: this tensor now shows `value`'s memory. `p.data += u` (manual SGD)
        gives back p's own memory: p keeps its Storage, so its version counter (the in-place op
        bumped `.data`'s counter, not p's, as in PyTorch) and its counted bytes."""
        if not isinstance(value, Tensor):
            raise TypeError("data must be a Tensor")
        st = self._storage  # first: a storage made on demand adopts the current `_data`
        self._data = value._data
        if value._storage._root is not st._root:
            self._storage = value._storage

    # ---- conversion ----
    def numpy(self, force=False):
        """The numpy array sharing memory with this tensor (torch.Tensor.numpy)."""
        if self._requires_grad and not force:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use "
                               "tensor.detach().numpy() instead.")
        if type(self._data) is not np.ndarray:
            if not force:
                raise TypeError("can't convert cuda:0 device type tensor to numpy. Use "
                                "Tensor.cpu() to copy the tensor to host memory first.")
            return backend.to_device(self._data, backend.CPU)
        return self._data

    def __array__(self, dtype=None, copy=None):
        arr = backend.to_device(self._data, backend.CPU)
        return arr if dtype is None else arr.astype(dtype)

    def __dlpack__(self, *args, **kwargs):
        return self._data.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self._data.__dlpack_device__()

    def tolist(self):
        return backend.to_device(self._data, backend.CPU).tolist()

    def item(self):
        if self._data.size != 1:
            raise RuntimeError(f"a Tensor with {self._data.size} elements cannot be converted "
                               "to Scalar")
        return self._data.item()

    def __float__(self):
        if self._requires_grad and not _WARNED_SCALAR:
            _warn_scalar()
        return float(self._scalar())

    def __int__(self):
        return int(self._scalar())

    def _scalar(self):
        if self._data.size != 1:  # torch's text for float() / int(), not item()'s
            raise ValueError("only one element tensors can be converted to Python scalars")
        return self._data.item()

    def __index__(self):
        if self._data.dtype.kind not in "iu" or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an "
                            "index")
        return int(self.item())

    def __bool__(self):
        if self._data.size != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return bool(self._data.item())

    __hash__ = object.__hash__  # identity, at C speed (tensors key optimizer state dicts)

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))

    def __reduce_ex__(self, proto):
        return (_rebuild, (backend.to_device(self._data, backend.CPU), self._requires_grad))

    def __deepcopy__(self, memo):
        if self._grad_fn is not None:
            raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) support "
                               "the deepcopy protocol at the moment.  If you were attempting to "
                               "deepcopy a module, this may be because of a torch.nn.utils."
                               "weight_norm usage, see https://github.com/pytorch/pytorch/pull/"
                               "103001")
        new = type(self).__new__(type(self))
        _init(new, self._data.copy(), None, None, 0, self._requires_grad)
        if self.__dict__:
            new.__dict__.update(self.__dict__)
        memo[id(self)] = new
        return new

    # ---- printing ----
    def __repr__(self):
        from .printing import tensor_repr
        return tensor_repr(self)

    def __format__(self, spec):
        """A 0-dim tensor formats as its Python number (f"{loss}" -> 2.4543561935424805), as
        torch; any other tensor: str(t) for an empty spec, TypeError otherwise."""
        if self._data.ndim == 0 and type(self) is Tensor:
            return format(self.item(), spec)
        return object.__format__(self, spec)


_new = object.__new__


def _init(t, data, storage, grad_fn, output_nr, requires_grad):
    t._data = data
    t._storage_or_nbytes = Storage(data) if storage is None else storage
    t._grad_fn = grad_fn
    t._output_nr = output_nr
    t._requires_grad = requires_grad
    t._grad = t._view = t._extra = None


def fresh_zeros(shape, np_dtype, device=None):
    """A new tensor of zeros, no graph, on `device` (default: the default device): the zeros
    autograd and the op table make for a missing gradient, below the torch.* factories."""
    dev = backend.get_default_device() if device is None else device
    arr = np.zeros(shape, np_dtype)
    return Tensor._make_fresh(arr if dev.type == "cpu" else backend.to_device(arr, dev))


def _rebuild(arr, requires_grad):
    t = Tensor._make_fresh(arr)
    t._requires_grad = requires_grad
    return t


def _dim(d, ndim):
    """Normalise a possibly negative dim, with PyTorch's IndexError text."""
    n = max(ndim, 1)  # a 0-d tensor takes dims -1 and 0, as PyTorch's wrap_scalar
    if d < -n or d >= n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
                         f"but got {d})")
    return d + n if d < 0 else d


expose(Tensor, "torch")  # printed as torch.Tensor under the torch alias (nbgrad.naming)
expose(Size, "torch")


_WARNED_SCALAR = []  # torch warns once per process (TORCH_WARN_ONCE)


def _warn_scalar():
    """PyTorch 2.13's warning for ``float(t)`` of a tensor that requires grad, once."""
    _WARNED_SCALAR.append(True)
    warnings.warn("Converting a tensor with requires_grad=True to a scalar may lead to "
                  "unexpected behavior.\nConsider using tensor.detach() first.", UserWarning,
                  stacklevel=3)
