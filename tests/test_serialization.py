"""nbgrad.save / nbgrad.load: nested containers round-trip with their types, without pickle."""
import io
import math
import zipfile
from collections import OrderedDict

import numpy as np
import pytest

import nbgrad


def round_trip(obj, **load_kwargs):
    buf = io.BytesIO()
    nbgrad.save(obj, buf)
    buf.seek(0)
    return nbgrad.load(buf, **load_kwargs)


def same(a, b):
    """Equal values AND equal types, recursively (tensors by dtype, shape, values, flags)."""
    assert type(a) is type(b), (type(a), type(b))
    if isinstance(a, nbgrad.Tensor):
        assert a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape)
        assert a.requires_grad == b.requires_grad
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    elif isinstance(a, np.generic):
        assert a.dtype == b.dtype and (a == b or (np.isnan(a) and np.isnan(b)))
    elif isinstance(a, dict):
        assert list(a.keys()) == list(b.keys())
        assert all(type(x) is type(y) for x, y in zip(a.keys(), b.keys()))
        for k in a:
            same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            same(x, y)
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b)
    else:
        assert a == b


def test_nested_containers_keep_their_types():
    obj = {
        "model": OrderedDict([("0.weight", nbgrad.randn(3, 2)), ("0.bias", nbgrad.zeros(3))]),
        "arrays": [np.arange(6).reshape(2, 3), np.ones((2, 2), dtype=np.float32),
                   np.array([True, False]), np.zeros((0, 4)), np.array(2.5)],
        "scalars": (np.float32(1.25), np.int16(-3), np.bool_(True), np.float64("nan")),
        "numbers": [0, -7, 2 ** 70, 0.1, float("inf"), float("nan"), -0.0, 1 + 2j, True, False],
        "text": ["", "naïve ✓", b"\x00\xffbytes", bytearray(b"ab")],
        "none": None,
        "shape": nbgrad.Size([2, 3]),
        "dtype": nbgrad.float64, "device": nbgrad.device("cpu"),
        3: "int key", 2.5: "float key", (1, "a"): "tuple key", None: "None key", True: "bool",
        "deep": [[{"x": (nbgrad.tensor([1, 2]), [np.int64(5)])}]],
        "grad": nbgrad.tensor([1.0, 2.0], requires_grad=True),
        "param": nbgrad.nn.Parameter(nbgrad.ones(2)),
        "frozen": nbgrad.nn.Parameter(nbgrad.ones(2), requires_grad=False),
        "half": nbgrad.ones(2, dtype=nbgrad.float16),
        "view": nbgrad.arange(12.0).reshape(3, 4).t(),
    }
    back = round_trip(obj)
    same(obj, back)
    assert type(back["param"]).__name__ == "Parameter" and back["param"].requires_grad
    assert not back["frozen"].requires_grad
    assert back["grad"].is_leaf and back["grad"].grad_fn is None


def test_a_plain_npz_that_numpy_reads(tmp_path):
    path = tmp_path / "ck.npz"
    nbgrad.save({"w": nbgrad.ones(2, 2), "a": np.arange(3), "step": 5}, path)
    with np.load(path, allow_pickle=False) as raw:
        assert {"w", "a"} <= set(raw.files)
        np.testing.assert_array_equal(raw["a"], np.arange(3))
    with zipfile.ZipFile(path) as z:
        assert all(not n.endswith(".pkl") for n in z.namelist())
    back = nbgrad.load(str(path))
    assert isinstance(back["a"], np.ndarray) and back["step"] == 5


def test_load_from_bytes_and_map_location():
    buf = io.BytesIO()
    nbgrad.save([nbgrad.ones(2)], buf)
    back = nbgrad.load(buf.getvalue(), map_location="cpu")
    assert back[0].device.type == "cpu"
    back = nbgrad.load(buf.getvalue(), map_location={"cuda:0": "cpu"})
    assert back[0].device.type == "cpu"


@pytest.mark.parametrize("bad, what", [
    (object(), "object at 'x'"),
    (lambda: 0, "function at 'x'"),
    ({1, 2}, "set at 'x'"),
    (np.array(["a", "b"]), "dtype <U1 at 'x'"),
    (np.array([object()]), "dtype object at 'x'"),
])
def test_what_cannot_be_stored_is_named(bad, what):
    with pytest.raises(TypeError, match="cannot save") as info:
        nbgrad.save({"x": bad}, io.BytesIO())
    assert what in str(info.value)


def test_a_module_suggests_its_state_dict():
    with pytest.raises(TypeError, match=r"type Linear at 'model/0' \(save its state_dict\(\)"):
        nbgrad.save({"model": [nbgrad.nn.Linear(2, 2)]}, io.BytesIO())


def test_bad_keys_are_named():
    with pytest.raises(TypeError, match="dict key of type frozenset at 'outer'"):
        nbgrad.save({"outer": {frozenset(): 1}}, io.BytesIO())


def test_nothing_is_unpickled(tmp_path):
    torch = pytest.importorskip("torch")
    path = tmp_path / "torch.pt"
    torch.save({"w": torch.ones(2)}, path)
    with pytest.raises(ValueError, match="not an nbgrad checkpoint.*pickles"):
        nbgrad.load(path)
    evil = io.BytesIO()
    np.savez(evil, __nbgrad__=np.frombuffer(b'{"format": 2, "root": {"a": "x"}}', np.uint8),
             x=np.array([1, "a"], dtype=object))
    evil.seek(0)
    with pytest.raises(ValueError, match="allow_pickle"):
        nbgrad.load(evil)


@pytest.mark.skipif(not nbgrad.cuda.is_available(), reason="needs a CUDA GPU (cupy)")
def test_cuda_tensors_come_back_on_cuda_or_where_mapped():
    t = nbgrad.arange(4.0, device="cuda")
    back = round_trip({"t": t, "n": 1})
    assert back["t"].device.type == "cuda"
    np.testing.assert_array_equal(back["t"].cpu().numpy(), [0, 1, 2, 3])
    assert round_trip([t], map_location="cpu")[0].device.type == "cpu"
