"""softmax over a short last dim (ops/nn.py `_softmax`'s transposed short rows, divided straight
into the output's rows): torch's values and layout, and the same bits as the short-row arithmetic
written out here on numpy, with no graph and recorded."""

import numpy as np
import pytest
import torch

import nbgrad
import nbgrad.nn.functional as F


def _reference(a):
    """exp(x - max) / sum over the last dim, each step as the short-row kernel takes it (the
    rows transposed, reduced along axis 0), written without nbgrad."""
    n = a.shape[-1]
    at = np.ascontiguousarray(a.reshape(-1, n).T)
    with np.errstate(all="ignore"):
        at -= np.maximum.reduce(at, 0)
        np.exp(at, out=at)
        at /= np.add.reduce(at, 0)
    return np.ascontiguousarray(at.T).reshape(a.shape)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n", [2, 4, 5, 16, 27, 32])
def test_short_row_softmax_is_torchs_and_the_written_out_kernels(n, dtype):
    rng = np.random.default_rng(n)
    a = (rng.standard_normal((8, 4, n)) * 6).astype(dtype)
    a[0, 0, 1] = np.inf
    a[1, 2, 0] = np.nan
    a[2, 1, :] = -np.inf
    a[3, 3, :] = 7.0
    want = torch.softmax(torch.from_numpy(a), -1)
    for mode in (nbgrad.inference_mode, nbgrad.no_grad, None):
        x = nbgrad.tensor(a, requires_grad=mode is None)
        if mode is None:
            got = F.softmax(x, dim=-1)
        else:
            with mode():
                got = F.softmax(x, dim=-1)
        assert got.detach().numpy().tobytes() == _reference(a).tobytes()
        assert got.stride() == want.stride() and got.is_contiguous()
        assert tuple(got.shape) == tuple(want.shape) and str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
        np.testing.assert_allclose(got.detach().numpy(), want.numpy(),
                                   rtol=2e-6 if dtype == "float32" else 1e-14, atol=0,
                                   equal_nan=True)
