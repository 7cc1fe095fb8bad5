"""Reading the .npz checkpoints that nbgrad.save wrote before it wrote PyTorch's format.

Such a file is a plain numpy ``.npz`` archive: each tensor and numpy array one array named by its
key path, plus a JSON entry ``__nbgrad__`` describing the structure (dicts with their key types,
lists, tuples, Size, numbers, strings, bytes, dtypes, devices). Nothing in it is pickled, so
reading it runs no code. ``nbgrad.load`` recognises it by that entry and reads it here.
"""
import json
from collections import OrderedDict

import numpy as np

from .. import backend, dtypes
from ..creation import from_numpy
from ..nn.parameter import Parameter
from ..tensor import Size

_META = "__nbgrad__"
_FORMAT = 2  # 1: tensors, numbers, strings, containers; 2 adds arrays, numpy scalars, complex...


def is_npz(names):
    """Whether a zip archive whose record names (bytes) are ``names`` is such a checkpoint."""
    return (_META + ".npy").encode() in names


def _decode_key(k):
    if isinstance(k, dict):
        return float(k["f"]) if "f" in k else tuple(_decode_key(x) for x in k["tu"])
    return k



def _decode(node, arrays, map_location):
    if "t" in node:
        t = from_numpy(np.array(arrays[node["t"]]))
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
                    "torch.cuda.is_available() is False. If you are running on a CPU-only "
                    "machine, please use torch.load with map_location=torch.device('cpu') to "
                    "map your storages to the CPU.")
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


def load(fh, map_location=None):
    """The structure an earlier ``nbgrad.save`` wrote to ``fh`` (a binary file object).

    Raises:
        ValueError: a corrupt structure, or a format newer than this reader.
    """
    with np.load(fh, allow_pickle=False) as z:
        meta = json.loads(bytes(z[_META]).decode("utf-8"))
        arrays = {k: z[k] for k in z.files if k != _META}
    if meta.get("format", 1) > _FORMAT:
        raise ValueError(f"nbgrad.load: this file has format {meta['format']}, newer than this "
                         f"nbgrad reads ({_FORMAT}); update nbgrad")
    return _decode(meta["root"], arrays, map_location)
