"""Grad mode: no_grad, enable_grad, set_grad_enabled, inference_mode (mirroring torch)."""
from __future__ import annotations

import functools
import inspect


class _State:
    __slots__ = ("enabled", "inference")

    def __init__(self):
        self.enabled = True
        self.inference = False


STATE = _State()  # read on every op; a plain attribute is the cheapest global flag


def is_grad_enabled() -> bool:
    """torch.is_grad_enabled."""
    return STATE.enabled


def is_inference_mode_enabled() -> bool:
    """torch.is_inference_mode_enabled."""
    return STATE.inference


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
        self._prev = STATE.enabled
        STATE.enabled = self._value

    def __exit__(self, *exc):
        STATE.enabled = self._prev
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
        self._prev = STATE.enabled
        self._value = bool(mode)
        STATE.enabled = self._value

    def __enter__(self):
        pass

    def __new__(cls, mode):
        return object.__new__(cls)

    def __call__(self, fn):
        STATE.enabled = self._prev
        mode = self._value
        return _decorate(fn, lambda: set_grad_enabled(mode))


class inference_mode(_Mode):
    """Like no_grad, for inference (torch.inference_mode); `inference_mode(False)` is a no-op."""

    def __new__(cls, mode=True):
        if isinstance(mode, bool):
            return object.__new__(cls)
        return cls()(mode)  # bare @inference_mode on a function

    def __init__(self, mode: bool = True):
        self._mode = bool(mode)

    def __enter__(self):
        self._prev = STATE.enabled
        self._prev_inf = STATE.inference
        # as PyTorch's InferenceMode guard: grad mode is set to `not mode`, so
        # inference_mode(False) inside no_grad turns gradients back on
        STATE.enabled = not self._mode
        STATE.inference = self._mode

    def __exit__(self, *exc):
        STATE.enabled = self._prev
        STATE.inference = self._prev_inf
        return False

    def __call__(self, fn):
        mode = self._mode
        return _decorate(fn, lambda: inference_mode(mode))
