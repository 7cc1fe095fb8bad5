"""Storage: one buffer and one version counter, shared by every view of it (seed 002).

A Tensor is a view onto a Storage. The version counter lives here, so every view of a storage sees
every in-place change, in both directions. `.data` makes a second Storage over the same buffer with
its own counter (as PyTorch does), flagged as an alias so its bytes are not counted twice.
"""
from __future__ import annotations

from . import backend
from . import provenance

_C = backend.COUNTERS
_HISTORY = 8  # in-place modifications remembered per storage, for error messages and the panel
# inference mode on (set by nbgrad.autograd.grad_mode.inference_mode): the storages made meanwhile
# are InferenceStorage, the memory of inference tensors
INFERENCE = [False]
_new = object.__new__
FIND = object()  # Storage.bump's default `where`: find the user's line


def bump_all(storages, op_name):
    """`bump(op_name)` of each storage, the user's line found once for all (an optimizer's
    step writes every parameter from one line: one frame walk, not one per parameter)."""
    where = provenance.capture()
    for st in storages:
        st.bump(op_name, where)


class Storage:
    """The memory under one or more tensors (`Tensor.untyped_storage()`).

    Attributes:
        version: the version counter (int), bumped by one by every in-place op.
    """

    __slots__ = ("_root", "version", "_bumps", "_counted", "_ptr", "_views", "__weakref__")
    inference = False  # True for the memory of inference tensors (InferenceStorage)

    def __init__(self, root, alias=False):
        self._root = root          # the array whose buffer this is (numpy or cupy)
        self.version = 0
        self._bumps = None         # [(new_version, op_name, where)], newest last, bounded
        self._ptr = None           # the buffer address, computed on first request
        self._views = None         # weakrefs to views made while their base did not require grad
        if alias:
            self._counted = None
        else:
            self._counted = n = root.nbytes   # bytes counted as live (None for an alias)
            c = _C
            c.created += 1
            c.live_bytes = b = c.live_bytes + n
            if b > c.peak_bytes:
                c.peak_bytes = b
            if INFERENCE[0] and type(self) is Storage:  # (ops under it make InferenceStorage)
                self.__class__ = InferenceStorage

    @classmethod
    def adopt(cls, root, counted):
        """The storage of a tensor made without one (`Tensor._make_fresh`), made when first
        asked for: it takes over the `counted` bytes the tensor has held since it was made (no
        second count; this storage's `__del__` gives them back instead of the tensor's)."""
        st = _new(cls)
        st._root = root
        st.version = 0
        st._bumps = st._ptr = st._views = None
        st._counted = counted
        return st

    def __del__(self):
        n = self._counted
        if n is not None:
            c = _C
            c.live_bytes -= n
            c.freed += 1

    def bump(self, op_name, where=FIND):
        """Record one in-place modification by `op_name` (adds exactly 1 to the version) made
        at `where` (a captured user line, `provenance.capture`; found here by default, once
        for many by `bump_all`)."""
        self.version = v = self.version + 1
        provenance.BUMPS[0] += 1
        if where is FIND:
            where = provenance.capture(4)  # user -> op -> apply -> _apply_inplace -> here
        b = self._bumps
        if b is None:
            self._bumps = [(v, op_name, where)]
        else:
            b.append((v, op_name, where))
            if len(b) > _HISTORY:
                del b[0]

    def history(self, since=-1):
        """[(version, op_name, Location)] of remembered in-place ops after version `since`."""
        return [(v, name, provenance.Location.of(w)) for v, name, w in (self._bumps or ())
                if v > since]

    # ---- torch.UntypedStorage API ----
    def data_ptr(self) -> int:
        """Address of the buffer (int)."""
        p = self._ptr
        if p is None:
            p = self._ptr = backend.data_ptr(self._root)
        return p

    def nbytes(self) -> int:
        """Size of the buffer in bytes."""
        return self._root.nbytes

    def size(self) -> int:
        """Size in bytes (an untyped storage counts bytes, as in PyTorch)."""
        return self._root.nbytes

    @property
    def device(self):
        return backend.device_of(self._root)

    def __len__(self):
        return self._root.nbytes

    def __repr__(self):
        return (f"<nbgrad.UntypedStorage of {self.nbytes()} bytes on {self.device}, "
                f"version {self.version}>")


_INFERENCE_INPLACE = (
    "Inplace update to inference tensor outside InferenceMode is not allowed.You can make a clone "
    "to get a normal tensor before doing inplace update.See "
    "https://github.com/pytorch/rfcs/pull/17 for more details.")


class InferenceStorage(Storage):
    """The memory of inference tensors (made under `inference_mode`): no version counter, and
    no in-place update outside inference mode (PyTorch checks it after the write, as here)."""

    __slots__ = ()
    inference = True

    def bump(self, op_name, where=None):
        if not INFERENCE[0]:
            raise RuntimeError(_INFERENCE_INPLACE)


class InferenceData(Storage):
    """`.data` of an inference tensor taken outside inference mode: PyTorch gives it a fresh
    version counter (0), so it is still an inference tensor (not saved for backward, no
    requires_grad) whose in-place updates are allowed and counted."""

    __slots__ = ()
    inference = True
