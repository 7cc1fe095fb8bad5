"""End to end on the digits data: the parity of a training run with torch's, the example's
accuracy targets, and save/load of trained models."""

import importlib.util
import pathlib

import numpy as np
import pytest
import torch

import nbgrad

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _example():
    spec = importlib.util.spec_from_file_location("train_digits",
                                                  ROOT / "examples" / "train_digits.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def example():
    return _example()


@pytest.fixture(scope="module")
def digits(example):
    return example.load_digits_split()


def npy(t):
    return np.asarray(t.detach().numpy())


def test_parity_with_torch_over_50_sgd_momentum_steps(example, digits):
    """Same MLP (torch's initial weights copied), same batches, SGD + momentum: same loss curve."""
    x_tr, y_tr, _, _ = digits
    torch.manual_seed(0)
    th = example.make_mlp(torch)
    ng = example.make_mlp(nbgrad)
    ng.load_state_dict({k: nbgrad.tensor(v.numpy().copy()) for k, v in th.state_dict().items()})
    ot = torch.optim.SGD(th.parameters(), lr=0.05, momentum=0.9)
    on = nbgrad.optim.SGD(ng.parameters(), lr=0.05, momentum=0.9)
    lt, ln = torch.nn.CrossEntropyLoss(), nbgrad.nn.CrossEntropyLoss()
    rng = np.random.default_rng(0)
    losses_t, losses_n = [], []
    order = rng.permutation(len(x_tr))
    for step in range(50):
        idx = order[(step * 64) % 1408:(step * 64) % 1408 + 64]
        xb, yb = x_tr[idx], y_tr[idx]
        ot.zero_grad()
        loss_t = lt(th(torch.from_numpy(xb)), torch.from_numpy(yb))
        loss_t.backward()
        ot.step()
        on.zero_grad()
        loss_n = ln(ng(nbgrad.tensor(xb)), nbgrad.tensor(yb))
        loss_n.backward()
        on.step()
        assert loss_n.dtype == nbgrad.float32
        losses_t.append(loss_t.item())
        losses_n.append(loss_n.item())
    np.testing.assert_allclose(losses_n, losses_t, rtol=2e-4, atol=2e-5)
    assert losses_n[-1] < 0.5 * losses_n[0]  # it did learn
    for (k, pt), pn in zip(th.state_dict().items(), ng.state_dict().values()):
        np.testing.assert_allclose(npy(pn), pt.numpy(), rtol=1e-3, atol=2e-5, err_msg=k)


def test_example_mlp_reaches_95_percent(example, digits):
    model, acc, _ = example.train(nbgrad, "mlp", progress=False, data=digits)
    assert acc >= 0.95, acc


def test_example_cnn_reaches_97_percent(example, digits):
    model, acc, _ = example.train(nbgrad, "cnn", progress=False, data=digits)
    assert acc >= 0.97, acc


def test_save_load_round_trip_of_trained_model(example, digits, tmp_path):
    x_tr, y_tr, x_te, y_te = digits
    model, acc, _ = example.train(nbgrad, "mlp", epochs=3, progress=False, data=digits)
    path = tmp_path / "mlp.npz"
    nbgrad.save(model.state_dict(), path)
    # PyTorch's zip format (torch.load reads it: tests/test_serialization.py)
    import zipfile
    assert "mlp/data.pkl" in zipfile.ZipFile(path).namelist()
    fresh = example.make_mlp(nbgrad)
    sd = nbgrad.load(path)
    assert list(sd.keys()) == list(model.state_dict().keys())
    assert all(sd[k].dtype == v.dtype for k, v in model.state_dict().items())
    fresh.load_state_dict(sd)
    assert example.accuracy(nbgrad, fresh, x_te, y_te) == acc
    for a, b in zip(model.parameters(), fresh.parameters()):
        np.testing.assert_array_equal(npy(a), npy(b))


def test_save_load_cnn_with_batchnorm_buffers(tmp_path):
    nn = nbgrad.nn
    m = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU())
    m(nbgrad.randn(8, 1, 6, 6))  # moves the running stats
    nbgrad.save(m.state_dict(), tmp_path / "bn.npz")
    sd = nbgrad.load(tmp_path / "bn.npz")
    assert sd["1.num_batches_tracked"].dtype == nbgrad.int64
    assert int(sd["1.num_batches_tracked"].item()) == 1
    m2 = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU())
    m2.load_state_dict(sd)
    for (k, a), b in zip(m.state_dict().items(), m2.state_dict().values()):
        np.testing.assert_array_equal(npy(a), npy(b), err_msg=k)


def test_save_load_nested_values_and_file_objects():
    import io
    obj = {"epoch": 3, "lr": 0.1, "inf": float("inf"), "name": "run", "flag": True, "none": None,
           "betas": (0.9, 0.999), "hist": [nbgrad.tensor([1.0, 2.0]), 4],
           "w": nbgrad.nn.Parameter(nbgrad.ones(2, 2))}
    buf = io.BytesIO()
    nbgrad.save(obj, buf)
    buf.seek(0)
    back = nbgrad.load(buf)
    assert back["epoch"] == 3 and back["lr"] == 0.1 and back["inf"] == float("inf")
    assert back["name"] == "run" and back["flag"] is True and back["none"] is None
    assert back["betas"] == (0.9, 0.999)
    assert np.array_equal(npy(back["hist"][0]), [1.0, 2.0]) and back["hist"][1] == 4
    assert type(back["w"]).__name__ == "Parameter" and back["w"].requires_grad
    import pickle
    buf = io.BytesIO()
    nbgrad.save({"f": object()}, buf)  # pickled, as torch.save does; the default load refuses it
    with pytest.raises(pickle.UnpicklingError, match="GLOBAL object was not an allowed"):
        nbgrad.load(io.BytesIO(buf.getvalue()))
    raw = io.BytesIO()
    np.savez(raw, a=np.zeros(2))
    raw.seek(0)
    with pytest.raises(RuntimeError, match="file in archive is not in a subdirectory: a.npy"):
        nbgrad.load(raw)
