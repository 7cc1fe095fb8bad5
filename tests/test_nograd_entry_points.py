"""The entry points GPT's eval forward runs with nothing to record: torch's values, layout,
`_base`, `_version` and inference flag."""

import contextlib

import numpy as np
import pytest
import torch

import nbgrad

R = np.random.default_rng(3)


def _mode(lib, mode):
    if mode == "no_grad":
        return lib.no_grad()
    if mode == "inference_mode":
        return lib.inference_mode()
    return contextlib.nullcontext()  # grad on, nothing requires grad


def _version(t):
    try:
        return t._version
    except RuntimeError as e:  # an inference tensor's (torch's text)
        return str(e)


def _layout(t):
    return (tuple(t.shape), t.stride(), t.is_contiguous(), t._base is None, _version(t),
            t.requires_grad, t.is_inference(), str(t.dtype).split(".")[-1])


VIEWS = {"view": lambda t: t.view(6), "transpose": lambda t: t.transpose(0, 1),
         "select": lambda t: t[0], "slice": lambda t: t[:, 1:], "t": lambda t: t.t(),
         "split": lambda t: t.split(1)[1], "unbind": lambda t: t.unbind(1)[2],
         "view of view": lambda t: t[0].view(3, 1)}


@pytest.mark.parametrize("where", ["inside", "outside", "normal base"])
@pytest.mark.parametrize("name", sorted(VIEWS))
def test_views_of_inference_tensors_like_torch(name, where):
    """torch: a view of an inference tensor is no view (no `_base`, `_is_view()` False), made
    inside inference_mode or outside it; a view of a normal tensor made inside one is."""
    x0 = R.standard_normal((2, 3)).astype(np.float32)
    res = []
    for lib in (torch, nbgrad):
        if where == "normal base":
            x = lib.tensor(x0)
        else:
            with lib.inference_mode():
                x = lib.tensor(x0) * 1
        with lib.inference_mode() if where != "outside" else contextlib.nullcontext():
            v = VIEWS[name](x)
            try:
                v.mul_(2)  # written through the shared storage
                err = None
            except RuntimeError as e:  # (outside inference_mode: torch's refusal)
                err = str(e)
        res.append((_layout(v), v._is_view(), err, x.numpy().tobytes(), v.numpy().tobytes()))
    assert res[0] == res[1]
