"""Containers: Sequential, ModuleList, ModuleDict (mirror torch.nn's)."""

from collections import OrderedDict
import operator

from .module import Module
from .utils import _addindent

__all__ = ["Sequential", "ModuleList", "ModuleDict"]


class _Indexed(Module):
    """What Sequential and ModuleList share: children named "0".."n-1", kept so on deletion."""

    def __delitem__(self, idx):
        keys = list(self._modules.keys())
        n = len(keys)
        if isinstance(idx, slice):
            drop = keys[idx]
        else:
            i = operator.index(idx)
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of range")
            drop = [keys[i]]
        for key in drop:
            del self._modules[key]
        items = list(self._modules.values())  # renumber 0..n-1, as torch does
        self._modules.clear()
        for i, m in enumerate(items):
            self._modules[str(i)] = m

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self


class Sequential(_Indexed):
    """Run modules one after another (mirrors ``torch.nn.Sequential``).

    ``Sequential(m0, m1, ...)`` names the children "0", "1", ...; ``Sequential(OrderedDict)``
    uses the dict's names. Indexing with an int gives a child, with a slice a new Sequential.
    """

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for key, module in args[0].items():
                self.add_module(key, module)
        else:
            for idx, module in enumerate(args):
                self.add_module(str(idx), module)

    def forward(self, input):
        for module in self._modules.values():
            input = module(input)
        return input

    def _get_item_by_idx(self, iterator, idx):
        size = len(self)
        idx = operator.index(idx)
        if not -size <= idx < size:
            raise IndexError(f"index {idx} is out of range")
        idx %= size
        for i, v in enumerate(iterator):
            if i == idx:
                return v

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        return self._get_item_by_idx(self._modules.values(), idx)

    def __setitem__(self, idx, module):
        key = self._get_item_by_idx(self._modules.keys(), idx)
        setattr(self, key, module)



    def insert(self, index, module):
        n = len(self._modules)
        if not -n <= index <= n:
            raise IndexError(f"Index out of range: {index}")
        if index < 0:
            index += n
        items = list(self._modules.values())
        items.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(items):
            self.add_module(str(i), m)
        return self


class ModuleList(_Indexed):
    """A list of modules, registered as children (mirrors ``torch.nn.ModuleList``)."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def _abs(self, idx):
        idx = operator.index(idx)
        if not -len(self) <= idx < len(self):
            raise IndexError(f"index {idx} is out of range")
        return idx % len(self)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[str(self._abs(idx))]

    def __setitem__(self, idx, module):
        setattr(self, str(self._abs(idx)), module)


    def __iadd__(self, modules):
        return self.extend(modules)


    def insert(self, index, module):
        items = list(self._modules.values())
        items.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(items):
            self.add_module(str(i), m)

    def __repr__(self):
        """torch's repr: runs of children with the same repr are shown once, as
        ``(0-5): 6 x TransformerEncoderLayer(...)``."""
        runs = []  # [first index, last index, repr]
        for i, m in enumerate(self._modules.values()):
            r = repr(m)
            if runs and runs[-1][2] == r:
                runs[-1][1] = i
            else:
                runs.append([i, i, r])
        if not runs:
            return self._get_name() + "()"
        lines = [_addindent(f"({a}): {r}" if a == b else f"({a}-{b}): {b - a + 1} x {r}", 2)
                 for a, b, r in runs]
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleList is a container; it has no forward")


class ModuleDict(Module):
    """A dict of modules, registered as children (mirrors ``torch.nn.ModuleDict``)."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules):
        items = modules.items() if hasattr(modules, "items") else modules
        for k, m in items:
            self[k] = m

    def pop(self, key):
        v = self[key]
        del self[key]
        return v

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleDict is a container; it has no forward")
