"""``nbgrad.save`` / ``nbgrad.load``: state dicts (and nested containers of tensors) as ``.npz``.

The file is a plain numpy ``.npz`` archive, readable without nbgrad: each tensor is one array,
named by its key path (``"0.weight"`` for a module's state dict, ``"state/0/exp_avg"`` inside an
optimizer's), plus one small JSON entry ``__nbgrad__`` describing the container structure and
the non-tensor values (numbers, strings, booleans, None, tuples). Nothing is pickled, so loading
an untrusted file cannot run code.
"""

import io
import json
import os
from collections import OrderedDict

import numpy as np

import nbgrad
from nbgrad.tensor import Tensor

__all__ = ["save", "load"]

_META = "__nbgrad__"
_FORMAT = 1


def _encode(obj, path, arrays):
    """Turn ``obj`` into JSON-able structure; tensors go into ``arrays`` under a unique name."""
    if isinstance(obj, Tensor):
        name = path or "tensor"
        base, k = name, 1
        while name in arrays or name == _META:
            name = f"{base}~{k}"
            k += 1
        data = obj.detach()
        arr = np.asarray(data.cpu()._data if hasattr(data, "cpu") else data._data)
        arrays[name] = arr if arr.flags.c_contiguous else arr.copy()
        return {"t": name, "param": type(obj).__name__ == "Parameter",
                "requires_grad": bool(obj.requires_grad)}
    if isinstance(obj, np.ndarray):
        return _encode(nbgrad.from_numpy(obj), path, arrays)
    if obj is None or isinstance(obj, (bool, str)):
        return {"v": obj}
    if isinstance(obj, (int, np.integer)):
        return {"v": int(obj)}
    if isinstance(obj, (float, np.floating)):
        f = float(obj)
        return {"f": repr(f)}  # keeps inf / nan / every bit
    if isinstance(obj, dict):
        items = []
        for k, v in obj.items():
            if not isinstance(k, (str, int)) or isinstance(k, bool):
                raise TypeError(f"nbgrad.save: dict keys must be str or int, got {type(k)}")
            items.append([k, _encode(v, f"{path}/{k}" if path else str(k), arrays)])
        return {"d": items, "ordered": isinstance(obj, OrderedDict)}
    if isinstance(obj, (list, tuple)):
        return {"l" if isinstance(obj, list) else "tu":
                [_encode(v, f"{path}/{i}" if path else str(i), arrays)
                 for i, v in enumerate(obj)]}
    raise TypeError(
        f"nbgrad.save: cannot save an object of type {type(obj).__name__}; save a state dict "
        "(module.state_dict(), optimizer.state_dict()) or a container of tensors and numbers")


def _decode(node, arrays):
    if "t" in node:
        t = nbgrad.from_numpy(np.array(arrays[node["t"]]))
        if node.get("param"):
            return nbgrad.nn.Parameter(t, node.get("requires_grad", True))
        if node.get("requires_grad"):
            t.requires_grad_(True)
        return t
    if "v" in node:
        return node["v"]
    if "f" in node:
        return float(node["f"])
    if "d" in node:
        out = OrderedDict() if node.get("ordered") else {}
        for k, v in node["d"]:
            out[k] = _decode(v, arrays)
        return out
    if "l" in node:
        return [_decode(v, arrays) for v in node["l"]]
    if "tu" in node:
        return tuple(_decode(v, arrays) for v in node["tu"])
    raise ValueError(f"nbgrad.load: corrupt structure entry {node!r}")


def save(obj, f):
    """Save a state dict (or a nested dict/list/tuple of tensors and numbers) to ``f`` as .npz.

    Mirrors ``torch.save`` for state dicts. Module state dicts keep their key order.

    Args:
        obj: e.g. ``model.state_dict()``, ``optimizer.state_dict()``, or
            ``{"model": ..., "optim": ..., "epoch": 3}``.
        f (str | os.PathLike | file object): where to write. A path is written as given (numpy
            would append ".npz" to a name without it; nbgrad does not).

    Raises:
        TypeError: an object that is neither a tensor, a number, a string nor a container.
    """
    arrays = {}
    meta = {"format": _FORMAT, "root": _encode(obj, "", arrays)}
    arrays[_META] = np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)
    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as fh:
            np.savez(fh, **arrays)
    else:
        np.savez(f, **arrays)


def load(f, map_location=None, weights_only=True, mmap=None):
    """Load what :func:`save` wrote (mirrors ``torch.load`` for state dicts).

    Args:
        f (str | os.PathLike | file object): the .npz file.
        map_location: a device to move tensors to (e.g. "cpu"), or None.

    Returns:
        The saved structure, with tensors (Parameters where a Parameter was saved).

    Raises:
        ValueError: not a file written by ``nbgrad.save``.
    """
    if isinstance(f, (bytes, bytearray)):
        f = io.BytesIO(f)
    with np.load(f, allow_pickle=False) as npz:
        if _META not in npz.files:
            raise ValueError("nbgrad.load: not an nbgrad checkpoint (no __nbgrad__ entry); "
                             "for a plain .npz use numpy.load")
        meta = json.loads(bytes(npz[_META]).decode("utf-8"))
        arrays = {k: npz[k] for k in npz.files if k != _META}
    obj = _decode(meta["root"], arrays)
    if map_location is not None:
        obj = _map(obj, map_location)
    return obj


def _map(obj, device):
    if isinstance(obj, Tensor):
        return obj.to(device)
    if isinstance(obj, dict):
        return type(obj)((k, _map(v, device)) for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        return type(obj)(_map(v, device) for v in obj)
    return obj
