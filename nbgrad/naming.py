"""The namespace nbgrad's objects print under: ``nbgrad``, or ``torch`` under the torch alias.

Without the alias a user typed ``import nbgrad``: shapes print ``nbgrad.Size([2, 3])``, dtypes
``nbgrad.float32``, tensor types ``nbgrad.FloatTensor`` — names that evaluate to the object they
print in the user's own namespace, and say which library made it. Under the alias
(``python -m nbgrad script.py``, ``%nbgrad torch``; see :mod:`nbgrad.as_torch`) the program
imported ``torch`` and was written against PyTorch: it prints and compares the names PyTorch gives
(``torch.Size([2, 3])``, ``dtype=torch.float64``, ``x.type() == 'torch.FloatTensor'``, an error
about ``[torch.FloatTensor [2, 3]]``, ``<class 'torch.Tensor'>``,
``<torch.autograd.function.MyFnBackward object at ...>``), so its output reads as it would under
PyTorch and can be compared line by line. :func:`use` switches between the two; as_torch calls it.

A class's printed module (``type(x)``, a custom Function's node) comes from its ``__module__``:
:func:`use` rewrites it for the classes PyTorch exposes under another module and puts nbgrad's
back when the alias is switched off.
"""
from __future__ import annotations

import weakref

PREFIX = ["nbgrad"]  # "nbgrad" or "torch"
_CLASSES = {}  # class -> PyTorch's module for it (public classes; set by their modules)
_NODE_BASES = []  # graph.Node, function.BackwardCFunction (set by autograd)
_ORIGINAL = weakref.WeakKeyDictionary()  # class -> nbgrad's __module__ while renamed


def public(name):
    """``'nbgrad.' + name``, or ``'torch.' + name`` under the torch alias."""
    return PREFIX[0] + "." + name


def named(fn, name):
    """`fn`, a function made by a factory, named `name` wherever a reader looks: ``__name__``,
    ``__qualname__`` and its code object's name, which is what profilers and tracebacks print
    (else every op a factory makes shows as the factory's inner ``f``). Returns `fn`."""
    fn.__name__ = fn.__qualname__ = name
    fn.__code__ = fn.__code__.replace(co_name=name, co_qualname=name)
    return fn


def cpp(name):
    """The name of a C++ node in PyTorch: ``'nbgrad::autograd::' + name`` (``torch::`` under the
    alias)."""
    return PREFIX[0] + "::autograd::" + name


def expose(cls, torch_module):
    """Register `cls` as PyTorch's class of the same name in `torch_module` (``Tensor`` ->
    ``'torch'``): under the alias, ``type(x)`` prints ``<class 'torch.Tensor'>``. Returns cls."""
    _CLASSES[cls] = torch_module
    if PREFIX[0] == "torch":
        _rename(cls, torch_module)
    return cls


def node_class(cls):
    """Give a node class made at run time (a custom Function's MyFnBackward) the module it
    prints under now. Returns cls."""
    if PREFIX[0] == "torch":
        _rename(cls, _torch_module_of_node(cls))
    return cls


def use(prefix):
    """Print names under `prefix` ("nbgrad" or "torch") from now on.

    Raises:
        ValueError: another prefix.
    """
    if prefix not in ("nbgrad", "torch"):
        raise ValueError(f"naming.use: expected 'nbgrad' or 'torch', got {prefix!r}")
    if prefix == PREFIX[0]:
        return
    PREFIX[0] = prefix
    if prefix == "torch":
        for cls, module in _CLASSES.items():
            _rename(cls, module)
        for cls in _node_classes():
            _rename(cls, _torch_module_of_node(cls))
    else:
        for cls, module in list(_ORIGINAL.items()):
            cls.__module__ = module
        _ORIGINAL.clear()


def _rename(cls, module):
    if cls not in _ORIGINAL:
        _ORIGINAL[cls] = cls.__module__
    cls.__module__ = module


def _node_classes():
    todo = list(_NODE_BASES[:1])
    seen = []
    while todo:
        c = todo.pop()
        seen.append(c)
        todo.extend(c.__subclasses__())
    return seen[1:]  # the base itself is nbgrad's


def _torch_module_of_node(cls):
    """PyTorch's module of a node class: a custom Function's node lives in
    torch.autograd.function; the C++ nodes (MulBackward0, AccumulateGrad) in builtins."""
    custom = _NODE_BASES[1] if len(_NODE_BASES) > 1 else None
    if custom is not None and issubclass(cls, custom):
        return "torch.autograd.function"
    return "builtins"
