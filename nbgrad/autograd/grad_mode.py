"""Grad mode: no_grad, enable_grad, set_grad_enabled, inference_mode (mirroring torch)."""
from __future__ import annotations

import functools


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


class _Mode:
    """Base of the grad-mode context managers; also usable as decorators."""

    _value = True

    def __enter__(self):
        self._prev = STATE.enabled
        STATE.enabled = self._value

    def __exit__(self, *exc):
        STATE.enabled = self._prev
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__():
                return fn(*args, **kwargs)
        return wrapper


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

    def __call__(self, fn):
        STATE.enabled = self._prev
        mode = self._value

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with set_grad_enabled(mode):
                return fn(*args, **kwargs)
        return wrapper


class inference_mode(_Mode):
    """Like no_grad, for inference (torch.inference_mode); `inference_mode(False)` is a no-op."""

    def __init__(self, mode: bool = True):
        self._mode = bool(mode)

    def __enter__(self):
        self._prev = STATE.enabled
        self._prev_inf = STATE.inference
        if self._mode:
            STATE.enabled = False
            STATE.inference = True

    def __exit__(self, *exc):
        STATE.enabled = self._prev
        STATE.inference = self._prev_inf
        return False

    def __call__(self, fn):
        mode = self._mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with inference_mode(mode):
                return fn(*args, **kwargs)
        return wrapper
