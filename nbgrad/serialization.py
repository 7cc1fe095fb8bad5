"""``nbgrad.save`` / ``nbgrad.load``: state dicts and nested containers as ``.npz``, no pickle.

The file is a plain numpy ``.npz`` archive, readable without nbgrad: each tensor and each numpy
array is one array, named by its key path (``"0.weight"`` for a module's state dict,
``"state/0/exp_avg"`` inside an optimizer's), plus one small JSON entry ``__nbgrad__`` describing
the structure: dicts (OrderedDict, int keys and tuple keys kept), lists, tuples, ``nbgrad.Size``,
Python numbers (int, float with inf/nan and every bit, complex, bool), numpy scalars (their dtype
kept), strings, bytes, None, dtypes and devices. Each value comes back with its type: a tensor as
a tensor (a Parameter as a Parameter, ``requires_grad`` kept), an ndarray as an ndarray. Nothing is
pickled, so loading an untrusted file cannot run code; what has no such form (a Module, a
function, any other object) is refused by ``save`` with a TypeError naming it and where it is.
"""

import io
import json
import os
from collections import OrderedDict

import numpy as np

from nbgrad import backend, creation, dtypes
from nbgrad.nn.parameter import Parameter
from nbgrad.tensor import Size, Tensor

__all__ = ["save", "load"]

_META = "__nbgrad__"
_FORMAT = 2  # 1: tensors, numbers, strings, containers; 2 adds arrays, numpy scalars, complex...


def _array_name(path, arrays, default):
    name = path or default
    base, k = name, 1
    while name in arrays or name == _META:
        name = f"{base}~{k}"
        k += 1
    return name


def _where(path):
    return f" at {path!r}" if path else ""


def _encode_key(k, path):
    if isinstance(k, (str, int, float)) or k is None:  # bool is an int
        return k if not isinstance(k, float) else {"f": repr(k)}
    if isinstance(k, tuple):
        return {"tu": [_encode_key(x, path) for x in k]}
    raise TypeError(f"nbgrad.save: cannot save a dict key of type {type(k).__name__}{_where(path)}"
                    "; keys must be str, int, float, bool, None or tuples of them")


def _decode_key(k):
    if isinstance(k, dict):
        return float(k["f"]) if "f" in k else tuple(_decode_key(x) for x in k["tu"])
    return k


def _encode(obj, path, arrays):
    """Turn ``obj`` into a JSON-able structure; arrays go into ``arrays`` under unique names."""
    if isinstance(obj, Tensor):
        name = _array_name(path, arrays, "tensor")
        arr = backend.to_device(obj._data, backend.CPU)
        arrays[name] = arr if arr.flags.c_contiguous else arr.copy(order="C")
        node = {"t": name, "param": type(obj).__name__ == "Parameter",
                "requires_grad": bool(obj.requires_grad)}
        if obj.device.type != "cpu":
            node["device"] = str(obj.device)
        return node
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind not in "biufc":
            raise TypeError(f"nbgrad.save: cannot save a numpy array of dtype {obj.dtype}"
                            f"{_where(path)} (numbers and bools only: no pickle)")
        name = _array_name(path, arrays, "array")
        arrays[name] = obj if obj.flags.c_contiguous else obj.copy(order="C")
        return {"a": name}
    if isinstance(obj, np.generic) and obj.dtype.kind in "biufc":
        name = _array_name(path, arrays, "scalar")
        arrays[name] = np.asarray(obj)
        return {"s": name}
    if obj is None or isinstance(obj, (bool, str)):
        return {"v": obj}
    if isinstance(obj, int):
        return {"v": int(obj)}
    if isinstance(obj, float):
        return {"f": repr(float(obj))}  # keeps inf / nan / every bit
    if isinstance(obj, complex):
        return {"c": [repr(obj.real), repr(obj.imag)]}
    if isinstance(obj, (bytes, bytearray)):
        return {"b": obj.hex(), "mutable": isinstance(obj, bytearray)}
    if isinstance(obj, dtypes.dtype):
        return {"dtype": obj.name}
    if isinstance(obj, backend.device):
        return {"device": str(obj)}
    if isinstance(obj, dict):
        if type(obj) not in (dict, OrderedDict):
            raise TypeError(f"nbgrad.save: cannot save a {type(obj).__name__}{_where(path)}; "
                            "convert it to a dict")
        items = []
        for k, v in obj.items():
            items.append([_encode_key(k, path), _encode(v, f"{path}/{k}" if path else str(k),
                                                        arrays)])
        return {"d": items, "ordered": isinstance(obj, OrderedDict)}
    if type(obj) in (list, tuple, Size):
        kind = {list: "l", tuple: "tu", Size: "size"}[type(obj)]
        return {kind: [_encode(v, f"{path}/{i}" if path else str(i), arrays)
                       for i, v in enumerate(obj)]}
    hint = (" (save its state_dict() instead)" if hasattr(obj, "state_dict") else
            "; nbgrad.save stores tensors, numpy arrays, numbers, strings, bytes, None, dtypes, "
            "devices and dicts/lists/tuples of them, without pickle")
    raise TypeError(f"nbgrad.save: cannot save an object of type {type(obj).__name__}"
                    f"{_where(path)}{hint}")


def _decode(node, arrays, map_location):
    if "t" in node:
        t = creation.from_numpy(np.array(arrays[node["t"]]))
        device = node.get("device")
        if isinstance(map_location, dict):
            device = map_location.get(device or "cpu", device)
        elif map_location is not None:
            device = map_location
        if device is not None:
            device = backend.device(device)
            if device.type == "cuda" and not backend.cuda_available():
                raise RuntimeError(
                    "Attempting to deserialize object on a CUDA device but "
                    "nbgrad.cuda.is_available() is False. If you are running on a CPU-only "
                    "machine, please use nbgrad.load with map_location='cpu' to map your "
                    "storages to the CPU.")
            t = t.to(device)
        if node.get("param"):
            return Parameter(t, node.get("requires_grad", True))
        if node.get("requires_grad"):
            t.requires_grad_(True)
        return t
    if "a" in node:
        return np.array(arrays[node["a"]])
    if "s" in node:
        return arrays[node["s"]][()]
    if "v" in node:
        return node["v"]
    if "f" in node:
        return float(node["f"])
    if "c" in node:
        return complex(float(node["c"][0]), float(node["c"][1]))
    if "b" in node:
        data = bytes.fromhex(node["b"])
        return bytearray(data) if node.get("mutable") else data
    if "dtype" in node:
        return dtypes.from_name(node["dtype"])
    if "device" in node:
        return backend.device(node["device"])
    if "d" in node:
        out = OrderedDict() if node.get("ordered") else {}
        for k, v in node["d"]:
            out[_decode_key(k)] = _decode(v, arrays, map_location)
        return out
    for kind, make in (("l", list), ("tu", tuple), ("size", Size)):
        if kind in node:
            return make(_decode(v, arrays, map_location) for v in node[kind])
    raise ValueError(f"nbgrad.load: corrupt structure entry {node!r}")


def save(obj, f):
    """Save ``obj`` to ``f`` as an .npz archive, without pickle (mirrors ``torch.save``).

    Args:
        obj: e.g. ``model.state_dict()``, ``optimizer.state_dict()``, or any nesting of dicts
            (str/int/float/bool/None/tuple keys), lists and tuples holding tensors (any shape and
            dtype, CPU or CUDA, Parameters), numpy arrays and scalars, Python numbers, strings,
            bytes, None, ``nbgrad.Size``, dtypes and devices. Each comes back from :func:`load`
            with its type; state dicts keep their key order.
        f (str | os.PathLike | file object): where to write. A path is written as given (numpy
            would append ".npz" to a name without it; nbgrad does not).

    Raises:
        TypeError: a value of another type (a Module, a function, a set, an object array...),
            named with its key path, e.g. "cannot save an object of type Linear at 'model'".
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
    """Load what :func:`save` wrote (mirrors ``torch.load``; never unpickles anything).

    Args:
        f (str | os.PathLike | file object | bytes): the .npz file.
        map_location (str | device | dict | None): the device every tensor goes to ("cpu"), or
            a dict from saved device names to devices ({"cuda:0": "cpu"}); None keeps the saved
            device.
        weights_only, mmap: accepted for torch's signature; loading is always weights-only.

    Returns:
        The saved structure: tensors (Parameters where a Parameter was saved, requires_grad
        kept), numpy arrays, numbers, strings... each of the type it was saved as.

    Raises:
        ValueError: not a file written by ``nbgrad.save`` (a torch.save pickle, a plain .npz).
        RuntimeError: a tensor saved on CUDA, loaded where CUDA is unavailable without
            ``map_location``.
    """
    if isinstance(f, (bytes, bytearray)):
        f = io.BytesIO(f)
    with np.load(f, allow_pickle=False) as npz:
        if _META not in npz.files:
            raise ValueError("nbgrad.load: not an nbgrad checkpoint (no __nbgrad__ entry); "
                             "for a plain .npz use numpy.load; files from torch.save are "
                             "pickles, which nbgrad does not read")
        meta = json.loads(bytes(npz[_META]).decode("utf-8"))
        arrays = {k: npz[k] for k in npz.files if k != _META}
    if meta.get("format", 1) > _FORMAT:
        raise ValueError(f"nbgrad.load: this file has format {meta['format']}, newer than this "
                         f"nbgrad reads ({_FORMAT}); update nbgrad")
    return _decode(meta["root"], arrays, map_location)
