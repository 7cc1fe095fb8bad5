"""Run unchanged PyTorch code on nbgrad: ``import torch`` (and ``torch.nn``, ``torch.optim``, ...)
resolves to nbgrad while the alias is on.

Three ways to switch it on:

- ``python -m nbgrad script.py [args]`` runs a script with the alias on (see ``nbgrad.__main__``);
- ``%nbgrad torch`` in a notebook (after ``%load_ext nbgrad``); ``%nbgrad torch off`` switches back;
- ``nbgrad.as_torch.enable()`` / ``nbgrad.as_torch.disable()`` from Python.

What it changes: a finder placed first on ``sys.meta_path`` answers every import of ``torch``
and ``torch.<sub>`` with the matching nbgrad module (``torch.nn.functional`` ->
``nbgrad.nn.functional``, ``torch.utils.data`` -> ``nbgrad.utils.data``), wrapped so that a name
nbgrad lacks fails where it is used: ``AttributeError: nbgrad does not implement torch.fft yet``
(``ImportError`` for ``from torch import fft``; ``import torch.onnx`` succeeds, as programs import
such modules at the top and use them behind a flag, and ``torch.onnx.export(...)`` raises "nbgrad
does not implement torch.onnx.export yet"; for a Tensor method, "'Tensor' object has no attribute
'stft' (nbgrad does not implement torch.Tensor.stft yet)"). A real PyTorch already imported is set
aside from ``sys.modules`` and put back by :func:`disable`; names already bound (``torch`` in a
notebook's namespace) keep what they were bound to, so re-run the imports after switching. Every
library that imports ``torch`` while the alias is on gets nbgrad too.

While the alias is on, nbgrad prints PyTorch's names, as the program (which imported ``torch``)
expects them: ``torch.Size([2, 3])``, ``dtype=torch.float64``, ``x.type() == 'torch.FloatTensor'``,
``<class 'torch.Tensor'>``, ``torch::autograd::AccumulateGrad``, a custom Function's node as
``<torch.autograd.function.MyFnBackward object at ...>``, and error texts naming
``[torch.FloatTensor [2, 3]]``; :func:`disable` switches back to nbgrad's own names (see
:mod:`nbgrad.naming`). ``torch.__version__`` is the PyTorch version nbgrad follows
(:data:`TORCH_VERSION` with the build's local tag, "2.13.0+cpu" as torch's CPU wheels; compared
with strings and tuples as torch's ``TorchVersion``), so that
version checks written for torch pass; nbgrad's own stays in ``nbgrad.__version__``.
"""
from __future__ import annotations

import dis
import importlib
import operator
import re
import importlib.abc
import importlib.machinery
import sys
import types

from . import naming

__all__ = ["enable", "disable", "is_enabled", "switch", "TORCH_VERSION", "torch_version"]

TORCH_VERSION = "2.13.0"  # the PyTorch release whose behaviour nbgrad follows

_IMPORT_FROM = dis.opmap["IMPORT_FROM"]
_set_aside = {}  # the real torch modules enable() took out of sys.modules


def _release(version):
    m = re.match(r"\s*v?(\d+(?:\.\d+)*)", version)
    return tuple(int(p) for p in m.group(1).split(".")) if m else None


def _local(version):
    """The local tag of a version ("cpu" of "2.13.0+cpu"), "" when none."""
    return version.partition("+")[2].strip().lower()


def torch_version():
    """``torch.__version__`` of the PyTorch build nbgrad stands for: the release it follows with
    the build's local tag, "+cpu" as torch's CPU wheels ("2.13.0+cpu"), "+cu124" where cupy runs
    on a CUDA 12.4 runtime."""
    from . import backend

    cuda = backend.cuda_runtime_version()
    return _TorchVersion(TORCH_VERSION + ("+cu" + cuda.replace(".", "") if cuda else "+cpu"))


class _TorchVersion(str):
    """``torch.__version__`` under the alias: a str that compares with version strings and
    tuples as torch's ``TorchVersion`` (packaging's rules): by release number, padded with zeros
    (``torch.__version__ >= "2.1"``, ``>= (2, 1)``), then by local tag, a version with one after
    the same release without (``"2.13.0+cpu" > "2.13"``, ``!= "2.13"``); string comparison where
    a side has no release number (pre-releases are not ordered)."""

    __slots__ = ()

    def _cmp(self, other, op):
        if isinstance(other, (tuple, list)):
            other = ".".join(str(p) for p in other)
        if isinstance(other, str):
            a, b = _release(self), _release(other)
            if a is not None and b is not None:
                n = max(len(a), len(b))
                return op((a + (0,) * (n - len(a)), bool(_local(self)), _local(self)),
                          (b + (0,) * (n - len(b)), bool(_local(other)), _local(other)))
        return op(str(self), other)

    def __eq__(self, other):
        return self._cmp(other, operator.eq)

    def __ne__(self, other):
        return self._cmp(other, operator.ne)

    def __lt__(self, other):
        return self._cmp(other, operator.lt)

    def __le__(self, other):
        return self._cmp(other, operator.le)

    def __gt__(self, other):
        return self._cmp(other, operator.gt)

    def __ge__(self, other):
        return self._cmp(other, operator.ge)

    __hash__ = str.__hash__


def _torch_name(nbgrad_name):
    return "torch" + nbgrad_name[len("nbgrad"):]


class _TorchModule(types.ModuleType):
    """``torch.<path>`` seen through an nbgrad module: attributes read from (and written to) it;
    a missing name raises "nbgrad does not implement torch.<path>.<name> yet"."""

    def __init__(self, name, target):
        super().__init__(name, target.__doc__)
        object.__setattr__(self, "_nbgrad_target", target)

    def __getattr__(self, name):
        target = object.__getattribute__(self, "_nbgrad_target")
        try:
            value = getattr(target, name)
        except AttributeError:
            if name.startswith("__") and name.endswith("__"):
                raise  # protocol probes (__wrapped__, __path__ ...): Python's own error
            msg = f"nbgrad does not implement {self.__name__}.{name} yet"
            frame = sys._getframe(1)
            code = frame.f_code.co_code
            # `from torch import x`: Python would replace an AttributeError with a generic
            # "cannot import name"; an ImportError passes through with this text.
            if 0 <= frame.f_lasti < len(code) and code[frame.f_lasti] == _IMPORT_FROM:
                raise ImportError(msg, name=self.__name__) from None
            raise AttributeError(msg, name=name, obj=self) from None
        if isinstance(value, types.ModuleType) and value.__name__.startswith("nbgrad."):
            return importlib.import_module(_torch_name(value.__name__))
        return value

    def __setattr__(self, name, value):
        # submodules and import bookkeeping (__spec__, __path__ ...) stay on the alias; anything
        # else (monkeypatching torch.nn.functional.relu) goes to the nbgrad module it stands for
        if isinstance(value, types.ModuleType) or name.startswith("__"):
            object.__setattr__(self, name, value)
        else:
            setattr(object.__getattribute__(self, "_nbgrad_target"), name, value)

    def __dir__(self):
        return dir(object.__getattribute__(self, "_nbgrad_target"))

    def __repr__(self):
        target = object.__getattribute__(self, "_nbgrad_target")
        if target.__name__.startswith("nbgrad (no "):
            return f"<module {self.__name__!r} (not implemented by nbgrad)>"
        return f"<module {self.__name__!r} (nbgrad's {target.__name__})>"


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers ``torch`` and ``torch.*`` with nbgrad's modules (first on sys.meta_path)."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torch" and not fullname.startswith("torch."):
            return None
        module = _nbgrad_module(fullname)
        if module is None and _probing_a_from_import():
            return None  # `from torch import fft`: Python then asks __getattr__, which says why
        return importlib.machinery.ModuleSpec(
            fullname, self, origin=getattr(module, "__file__", None),
            is_package=module is None or hasattr(module, "__path__"))

    def create_module(self, spec):
        module = _nbgrad_module(spec.name)
        if module is None:
            # a submodule nbgrad lacks (torch.onnx): importing it works, as programs import such
            # modules at the top and use them behind a flag; using a name from it raises
            module = types.ModuleType(f"nbgrad (no {spec.name})",
                                      f"nbgrad does not implement {spec.name}.")
        alias = _TorchModule(spec.name, module)
        if spec.name == "torch":
            alias.__version__ = torch_version()  # (dunders stay on the alias)
        return alias

    def exec_module(self, module):
        pass  # the nbgrad module it stands for is already executed


def _nbgrad_module(torch_name):
    """The nbgrad module standing for torch_name, or None where nbgrad has none."""
    nb_name = "nbgrad" + torch_name[len("torch"):]
    try:
        return importlib.import_module(nb_name)
    except ModuleNotFoundError as e:
        if e.name is not None and (e.name == nb_name or nb_name.startswith(e.name + ".")):
            return None
        raise  # nbgrad has it, and something it imports is missing: say so


def _probing_a_from_import():
    """Whether this import is `from torch.x import name` trying torch.x.name as a submodule
    (importlib's _handle_fromlist): a name nbgrad lacks must then not become a placeholder
    module, or `from torch.utils.data import Typo` would quietly succeed."""
    frame = sys._getframe(2)
    for _ in range(8):
        if frame is None:
            return False
        if frame.f_code.co_name == "_handle_fromlist":
            return True
        frame = frame.f_back
    return False


_finder = _Finder()


def _tensor_getattr(self, name):
    """Tensor.__getattr__ while the alias is on: called only for a name Tensor lacks."""
    if name.startswith("_"):
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'",
                             name=name, obj=self)
    raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}' (nbgrad "
                         f"does not implement torch.Tensor.{name} yet)", name=name, obj=self)


def _tensor_class():
    from nbgrad.tensor import Tensor

    return Tensor


def is_enabled():
    """Whether ``import torch`` currently resolves to nbgrad."""
    return _finder in sys.meta_path


def enable():
    """Make ``import torch`` and ``import torch.<sub>`` resolve to nbgrad from now on.

    A real ``torch`` already in ``sys.modules`` is set aside (restored by :func:`disable`);
    names already bound to it stay bound, so run the imports again. Calling it twice is a no-op.
    """
    if is_enabled():
        return
    for name in [n for n in sys.modules if n == "torch" or n.startswith("torch.")]:
        _set_aside[name] = sys.modules.pop(name)
    sys.meta_path.insert(0, _finder)
    importlib.invalidate_caches()
    naming.use("torch")
    if "__getattr__" not in vars(_tensor_class()):
        _tensor_class().__getattr__ = _tensor_getattr


def disable():
    """Switch back: ``import torch`` finds the real PyTorch (if installed) again.

    Removes the finder and the ``torch*`` aliases from ``sys.modules`` and restores a real torch
    that :func:`enable` set aside. Names already bound to the alias keep it; import again.
    """
    if not is_enabled():
        return
    sys.meta_path.remove(_finder)
    naming.use("nbgrad")
    if vars(_tensor_class()).get("__getattr__") is _tensor_getattr:
        del _tensor_class().__getattr__
    for name in [n for n in sys.modules if n == "torch" or n.startswith("torch.")]:
        if isinstance(sys.modules[name], _TorchModule):
            del sys.modules[name]
    sys.modules.update(_set_aside)
    _set_aside.clear()
    importlib.invalidate_caches()


def switch(arg=""):
    """What ``%nbgrad torch [on|off|status]`` does; returns the line the magic prints.

    Raises:
        ValueError: an argument other than on, off, status or nothing (which means on).
    """
    arg = arg.strip().lower() or "on"
    if arg == "on":
        had_real = "torch" in sys.modules and not is_enabled()
        enable()
        note = " (the real torch imported before is set aside)" if had_real else ""
        return ("import torch -> nbgrad: on" + note + "; run `import torch` again; "
                "`%nbgrad torch off` switches back")
    if arg == "off":
        disable()
        return "import torch -> nbgrad: off; run `import torch` again for the real PyTorch"
    if arg == "status":
        return f"import torch -> nbgrad: {'on' if is_enabled() else 'off'}"
    raise ValueError(f"%nbgrad torch: expected on, off or status, got {arg!r}")
