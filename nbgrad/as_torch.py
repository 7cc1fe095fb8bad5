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
(:data:`TORCH_VERSION`, comparable with strings and tuples as torch's ``TorchVersion``), so that
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
from pathlib import Path

from . import naming

__all__ = ["enable", "disable", "is_enabled", "switch", "TORCH_VERSION"]

TORCH_VERSION = "2.13.0+cpu"  # the PyTorch release whose behaviour nbgrad follows (its CPU wheel)

_IMPORT_FROM = dis.opmap["IMPORT_FROM"]
_set_aside = {}  # the real torch modules enable() took out of sys.modules


_PEP440 = re.compile(
    r"\s*v?(?:(\d+)!)?(\d+(?:\.\d+)*)"
    r"(?:[-_.]?(alpha|beta|preview|pre|a|b|c|rc)[-_.]?(\d*))?"
    r"(?:-(\d+)|[-_.]?(?:post|rev|r)[-_.]?(\d*))?"
    r"(?:[-_.]?dev[-_.]?(\d*))?"
    r"(?:\+([a-z0-9]+(?:[-_.][a-z0-9]+)*))?\s*$", re.I)
_PRE = {"a": 0, "alpha": 0, "b": 1, "beta": 1, "c": 2, "rc": 2, "pre": 2, "preview": 2}
_LOW, _HIGH = (0,), (2,)  # packaging's NegativeInfinity / Infinity, around (1, value)


def _version_key(version):
    """The sort key packaging's ``Version`` orders PEP 440 versions by (epoch, release without
    trailing zeros, pre-release, post, dev, local segment), or None for an invalid version."""
    m = _PEP440.match(version)
    if m is None:
        return None
    epoch, release, pre, pre_n, post_a, post_b, dev, local = m.groups()
    rel = [int(p) for p in release.split(".")]
    while len(rel) > 1 and rel[-1] == 0:
        rel.pop()
    post = post_a if post_a is not None else post_b
    has_post = post is not None
    dev_n = None if dev is None else int(dev or 0)
    if pre is None:
        pre_k = _LOW if (not has_post and dev_n is not None) else _HIGH
    else:
        pre_k = (1, _PRE[pre.lower()], int(pre_n or 0))
    post_k = (1, int(post or 0)) if has_post else _LOW
    dev_k = _HIGH if dev_n is None else (1, dev_n)
    local_k = _LOW if local is None else (1, tuple(
        (1, int(p), "") if p.isdigit() else (0, 0, p.lower()) for p in re.split(r"[-_.]", local)))
    return int(epoch or 0), tuple(rel), pre_k, post_k, dev_k, local_k


class _TorchVersion(str):
    """``torch.__version__`` under the alias: a str that compares with version strings and
    tuples as PEP 440 versions, as torch's ``TorchVersion`` (``torch.__version__ >= "2.1"``,
    ``>= (2, 1)``; "2.13.0+cpu" > "2.13.0", a local tag ordering after its release); where a
    side is no valid version, as strings. ``!=`` is str's, as in torch."""

    __slots__ = ()

    def _cmp(self, other, op):
        if isinstance(other, (tuple, list)):
            other = ".".join(str(p) for p in other)
        if isinstance(other, str):
            a, b = _version_key(self), _version_key(other)
            if a is not None and b is not None:
                return op(a, b)
        return op(str(self), other)

    def __eq__(self, other):
        return self._cmp(other, operator.eq)

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
            if _torch_lacks(self.__name__, name):  # torch's own text: it has no such name
                raise AttributeError(f"module '{self.__name__}' has no attribute '{name}'",
                                     name=name, obj=self) from None
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
            alias.__version__ = _TorchVersion(TORCH_VERSION)  # (dunders stay on the alias)
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


def _torch_names():
    """{namespace: PyTorch's names there} from torch_names.txt (docs/_supported.py writes it)."""
    global _TORCH_NAMES
    if _TORCH_NAMES is None:
        text = (Path(__file__).with_name("torch_names.txt")).read_text()
        _TORCH_NAMES = {head[1:-1]: frozenset(rest.split())
                        for head, _, rest in (line.partition(" ") for line in text.splitlines()
                                              if line.startswith("["))}
    return _TORCH_NAMES


_TORCH_NAMES = None


def _torch_lacks(namespace, name):
    """Whether PyTorch itself has no public `name` in `namespace` (unknown namespaces and
    private names: not known, so False)."""
    names = _torch_names().get(namespace)
    return names is not None and not name.startswith("_") and name not in names


class _NotImplementedYet:
    """Put on Tensor, while the alias is on, under each torch.Tensor name nbgrad lacks: reading
    it raises AttributeError saying so. A descriptor, not a `Tensor.__getattr__`: a class with
    `__getattr__` loses CPython's specialized attribute loads for every attribute of its
    instances (each `t._data` inside nbgrad). Other missing names keep Python's (= torch's)
    plain "'Tensor' object has no attribute ..." text."""

    def __init__(self, name):
        self.name = name

    def __get__(self, obj, owner=None):
        who = (f"'{owner.__name__}' object" if obj is not None
               else f"type object '{owner.__name__}'")
        raise AttributeError(f"{who} has no attribute '{self.name}' (nbgrad does not implement "
                             f"torch.Tensor.{self.name} yet)",
                             name=self.name, obj=obj if obj is not None else owner)


def _tensor_dir(self):
    """dir() of a Tensor while the alias is on: without the names it only says nbgrad lacks."""
    return [n for n in object.__dir__(self)
            if not isinstance(type(self).__dict__.get(n), _NotImplementedYet)]


def _mark_unimplemented(tensor_class):
    for name in _torch_names().get("torch.Tensor", ()):
        if not name.startswith("_") and not hasattr(tensor_class, name):
            setattr(tensor_class, name, _NotImplementedYet(name))
    tensor_class.__dir__ = _tensor_dir


def _unmark_unimplemented(tensor_class):
    for name, value in list(vars(tensor_class).items()):
        if isinstance(value, _NotImplementedYet):
            delattr(tensor_class, name)
    if vars(tensor_class).get("__dir__") is _tensor_dir:
        del tensor_class.__dir__


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
    _mark_unimplemented(_tensor_class())


def disable():
    """Switch back: ``import torch`` finds the real PyTorch (if installed) again.

    Removes the finder and the ``torch*`` aliases from ``sys.modules`` and restores a real torch
    that :func:`enable` set aside. Names already bound to the alias keep it; import again.
    """
    if not is_enabled():
        return
    sys.meta_path.remove(_finder)
    naming.use("nbgrad")
    _unmark_unimplemented(_tensor_class())
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
