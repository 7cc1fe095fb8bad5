"""Op outputs made under inference_mode get their storage only when asked for (the byte count
kept inverted until then, `Tensor._make_fresh`): they must still be inference tensors, counted
once in the memory stats, and behave as torch's (flags, in-place errors, clones, .data)."""

import gc

import numpy as np
import torch

import nbgrad
from nbgrad import backend

A = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)


def _facts(lib):
    x = lib.tensor(A.copy())
    out = []
    with lib.inference_mode():
        y = x * 2          # binary
        z = y.tanh()       # unary
        w = z.sum(0)       # general path
        out += [t.is_inference() for t in (x, y, z, w)]
        out.append(y.requires_grad)
        y.add_(1)          # in place inside inference mode: allowed, no version counter
    out += [y.is_inference(), z.is_inference()]
    try:
        z.mul_(2)
        out.append("no error")
    except RuntimeError as e:
        out.append(str(e).split(".")[0])
    try:
        z.requires_grad_(True)
        out.append("no error")
    except RuntimeError as e:
        out.append(str(e).split("\n")[0])
    c = z.clone()
    out += [c.is_inference(), c._version, z.data.is_inference()]
    out.append(np.round(c.numpy(), 5).tolist())
    with lib.no_grad():
        out.append((x * 2).is_inference())
    return out


def test_inference_op_outputs_as_torch():
    assert _facts(nbgrad) == _facts(torch)


def test_inference_outputs_counted_once():
    gc.collect()
    s0 = backend.memory_stats()
    x = nbgrad.tensor(A.copy())
    with nbgrad.inference_mode():
        y = x * 2                     # storage not made yet
        z = x + 1
        z._storage                    # made: the InferenceStorage takes over the count
    s1 = backend.memory_stats()
    assert s1["live_bytes"] - s0["live_bytes"] == 3 * A.nbytes
    assert type(z._storage).__name__ == "InferenceStorage" and y.is_inference()
    del y, z
    gc.collect()
    s2 = backend.memory_stats()
    assert s2["live_bytes"] - s0["live_bytes"] == A.nbytes
    assert s2["live_storages"] - s1["live_storages"] == -2
