"""Grad mode: no_grad, enable_grad, set_grad_enabled, inference_mode (mirroring torch)."""
from __future__ import annotations

import functools
import inspect
import os

from .. import storage as _storage


class _State:
    """`enabled`: ops record the graph (read on every op). `inference`: inference mode is on.
    `asked`: the grad mode `is_grad_enabled()` reports while inference mode is on — PyTorch keeps
    the two modes apart, and under inference mode nothing is recorded whatever grad mode says."""

    __slots__ = ("enabled", "inference", "asked")

    def __init__(self):
        self.enabled = True
        self.inference = False
        self.asked = False


STATE = _State()  # read on every op; a plain attribute is the cheapest global flag

# NBGRAD_GENERAL_PATH=1 (read once, at import): the few mechanisms that keep a written-out fast
# case beside their general path for speed (apply's one-input ops, the engine's chain step) run
# the general path alone, so that the whole core suite checks it on its own
# (tests/test_general_path.py runs it so).
GENERAL_PATH = os.environ.get("NBGRAD_GENERAL_PATH", "") not in ("", "0")


def is_grad_enabled() -> bool:
    """True when gradients are recorded (torch.is_grad_enabled); under inference mode, the grad
    mode set by no_grad / enable_grad inside it (nothing is recorded either way)."""
    return STATE.asked if STATE.inference else STATE.enabled


def is_inference_mode_enabled() -> bool:
    """True inside `inference_mode()` (torch.is_inference_mode_enabled)."""
    return STATE.inference


def _set_grad(mode):
    """Set grad mode to `mode`; returns what restores the previous one (`_restore_grad`)."""
    st = STATE
    if st.inference:
        prev, st.asked = (True, st.asked), mode
    else:
        prev, st.enabled = (False, st.enabled), mode
    return prev


def _restore_grad(prev):
    if prev[0]:
        STATE.asked = prev[1]
    else:
        STATE.enabled = prev[1]


def _decorate(fn, make_ctx):
    """``fn`` run inside ``make_ctx()``; a generator function gets the mode around each step
    (torch's rule: the caller's mode is back whenever the generator is suspended)."""
    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def gen_wrapper(*args, **kwargs):
            gen, sent = fn(*args, **kwargs), None
            while True:
                try:
                    with make_ctx():
                        value = gen.send(sent)
                except StopIteration as stop:
                    return stop.value
                sent = yield value
        return gen_wrapper

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with make_ctx():
            return fn(*args, **kwargs)
    return wrapper



class _Mode:
    """Base of the grad-mode context managers; also decorators, with or without parentheses
    (``@no_grad()`` and ``@no_grad``), generator functions included."""

    _value = True

    def __new__(cls, orig_func=None):
        if orig_func is None:
            return super().__new__(cls)
        return cls()(orig_func)  # bare @no_grad on a function

    def __enter__(self):
        self._prev = _set_grad(self._value)

    def __exit__(self, *exc):
        _restore_grad(self._prev)
        return False

    def __call__(self, fn):
        return _decorate(fn, self.__class__)


class no_grad(_Mode):
    """Disable graph recording inside the block (torch.no_grad)."""

    _value = False


class enable_grad(_Mode):
    """Enable graph recording inside the block (torch.enable_grad)."""

    _value = True


class set_grad_enabled(_Mode):
    """Set grad mode to `mode` now and, used as a context manager, restore it on exit."""

    def __init__(self, mode: bool):
        self._value = bool(mode)
        self._prev = _set_grad(self._value)

    def __enter__(self):
        pass

    def __new__(cls, mode):
        return object.__new__(cls)

    def __call__(self, fn):
        _restore_grad(self._prev)
        mode = self._value
        return _decorate(fn, lambda: set_grad_enabled(mode))


class inference_mode(_Mode):
    """Inference mode (torch.inference_mode): nothing is recorded, and the tensors made inside
    are inference tensors (`Tensor.is_inference()`): they have no version counter, cannot be
    saved for backward, and cannot be updated in place outside inference mode. Views of normal
    tensors made inside stay normal tensors, but may not be modified in place under grad mode
    later. `inference_mode(False)` turns it off (and grad mode on) inside an enclosing one.
    Also a decorator, with or without parentheses."""

    def __new__(cls, mode=True):
        if isinstance(mode, bool):
            return object.__new__(cls)
        return cls()(mode)  # bare @inference_mode on a function

    def __init__(self, mode: bool = True):
        self._mode = bool(mode)

    def __enter__(self):
        st = STATE
        self._prev = (st.enabled, st.inference, st.asked)
        # as PyTorch's InferenceMode guard: grad mode is set to `not mode`, so
        # inference_mode(False) inside no_grad turns gradients back on
        st.enabled = not self._mode
        st.inference = _storage.INFERENCE[0] = self._mode
        st.asked = False

    def __exit__(self, *exc):
        st = STATE
        st.enabled, st.inference, st.asked = self._prev
        _storage.INFERENCE[0] = st.inference
        return False

    def __call__(self, fn):
        mode = self._mode
        return _decorate(fn, lambda: inference_mode(mode))
