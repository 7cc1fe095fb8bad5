"""The GPU backend (cupy). Without a CUDA device these tests check the errors a user sees and
skip the device runs; on a machine with a GPU the same bodies run on device='cuda'."""
import numpy as np
import pytest

import nbgrad

# Without cupy nbgrad is PyTorch built without CUDA (AssertionError "Torch not compiled with CUDA
# enabled"); with cupy but no device, PyTorch built with CUDA on a machine without a GPU.
nbgrad.cuda.is_available()
NO_CUDA = AssertionError if "cupy" in (nbgrad.backend._cupy_error or "") and \
    (nbgrad.backend._cupy_error or "").startswith("ModuleNotFoundError") else RuntimeError

HAS_GPU = nbgrad.cuda.is_available()
gpu = pytest.mark.skipif(not HAS_GPU, reason="no CUDA device (cupy absent or no GPU)")


@pytest.mark.skipif(HAS_GPU, reason="checks the no-GPU path")
def test_cuda_unavailable_errors_name_the_cause():
    assert nbgrad.cuda.is_available() is False
    with pytest.raises(NO_CUDA, match="CUDA is not available to nbgrad") as e:
        nbgrad.ones(3, device="cuda")
    assert "pip install nbgrad[cuda12]" in str(e.value)
    with pytest.raises(NO_CUDA, match="CUDA is not available"):
        nbgrad.ones(3).cuda()
    with pytest.raises(NO_CUDA, match="CUDA is not available"):
        nbgrad.cuda.memory_allocated()


def test_bad_device_string():
    with pytest.raises(RuntimeError, match="Expected one of cpu, cuda device type"):
        nbgrad.ones(2, device="tpu")


def test_cpu_memory_stats_count_live_storages():
    before = nbgrad.backend.memory_stats()["live_bytes"]
    t = nbgrad.zeros(1000, dtype=nbgrad.float64)
    assert nbgrad.backend.memory_stats()["live_bytes"] - before == 8000
    del t
    assert nbgrad.backend.memory_stats()["live_bytes"] == before


CASES = {
    "mul_add": lambda x, w: (x * w + 1.0).sum(),
    "matmul_tanh": lambda x, w: (x @ w.reshape(4, 3)).tanh().sum(),
    "softmax": lambda x, w: (x.softmax(1) * w[:4]).sum(),
    "view_inplace": lambda x, w: _view_inplace(x, w),
}


def _view_inplace(x, w):
    y = x * 1
    y[:, 1:3].mul_(w[:2])
    return y.exp().sum()


@gpu
@pytest.mark.parametrize("name", sorted(CASES))
def test_same_values_and_grads_on_gpu(name):
    rng = np.random.default_rng(0)
    xs, ws = rng.standard_normal((5, 4)), rng.standard_normal(12)
    out = {}
    for dev in ("cpu", "cuda"):
        x = nbgrad.tensor(xs, device=dev, requires_grad=True)
        w = nbgrad.tensor(ws, device=dev, requires_grad=True)
        y = CASES[name](x, w)
        y.backward()
        assert x.device.type == dev and x.grad.device.type == dev
        out[dev] = (y.item(), x.grad.cpu().numpy(), w.grad.cpu().numpy())
    np.testing.assert_allclose(out["cuda"][0], out["cpu"][0], rtol=1e-6)
    np.testing.assert_allclose(out["cuda"][1], out["cpu"][1], rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(out["cuda"][2], out["cpu"][2], rtol=1e-6, atol=1e-9)


@gpu
def test_mixed_devices_error():
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        nbgrad.ones(3, device="cuda") + nbgrad.ones(3)


@gpu
def test_pool_stats_and_empty_cache():
    x = nbgrad.ones(1 << 20, device="cuda")
    assert nbgrad.cuda.memory_allocated() >= x.nbytes
    assert nbgrad.cuda.memory_reserved() >= nbgrad.cuda.memory_allocated()
    del x
    nbgrad.cuda.empty_cache()
    assert nbgrad.cuda.memory_stats()["free_blocks"] == 0
