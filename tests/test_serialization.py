"""nbgrad.save / nbgrad.load: PyTorch's checkpoint format, both ways, with torch as the oracle."""
import io
import json
import math
import pickle
import warnings
from collections import Counter, OrderedDict

import numpy as np
import pytest

import nbgrad

torch = pytest.importorskip("torch")

DTYPES = ["float32", "float64", "float16", "int64", "int32", "int16", "int8", "uint8", "bool"]


def saved_by(lib, obj):
    buf = io.BytesIO()
    lib.save(obj, buf)
    return buf.getvalue()


def load_with(lib, data, **kw):
    return lib.load(io.BytesIO(data), **kw)


def values(t):
    return (t.detach().numpy() if isinstance(t, torch.Tensor) else t.detach().numpy()).copy()


def same_tensor(a, b):
    """An nbgrad tensor and a torch tensor (either way round): dtype, shape, strides, values,
    requires_grad, Parameter-ness."""
    assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
    assert tuple(a.shape) == tuple(b.shape)
    assert tuple(a.stride()) == tuple(b.stride())
    assert a.storage_offset() == b.storage_offset()
    assert a.requires_grad == b.requires_grad
    assert (type(a).__name__ == "Parameter") == (type(b).__name__ == "Parameter")
    np.testing.assert_array_equal(values(a), values(b))


def same(a, b):
    """Recursively equal, containers of the same type, tensors as `same_tensor`."""
    if isinstance(a, (nbgrad.Tensor, torch.Tensor)):
        same_tensor(a, b)
        return
    assert type(a).__name__ == type(b).__name__, (type(a), type(b))
    if isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            same(x, y)
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b)
    elif type(a).__name__ in ("dtype", "device"):
        assert str(a).split(".")[-1] == str(b).split(".")[-1]
    else:
        assert a == b


# ---------------------------------------------------------------- state dicts of modules

def _modules(lib):
    nn = lib.nn
    return {
        "linear": nn.Linear(4, 3),
        "conv_bn": nn.Sequential(nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3), nn.ReLU()),
        "lstm": nn.LSTM(3, 4, num_layers=2),
        "embedding_layernorm": nn.Sequential(nn.Embedding(10, 4), nn.LayerNorm(4)),
        "gru": nn.GRU(3, 2, bidirectional=True),
    }


@pytest.mark.parametrize("name", list(_modules(nbgrad)))
def test_module_state_dicts_round_trip_both_ways(name):
    ours, theirs = _modules(nbgrad)[name], _modules(torch)[name]
    # nbgrad -> torch (torch's default weights_only=True)
    sd = ours.state_dict()
    back = load_with(torch, saved_by(nbgrad, sd))
    assert type(back) is OrderedDict and list(back) == list(sd)
    for k in sd:
        same_tensor(sd[k], back[k])
    theirs.load_state_dict(back)
    # torch -> nbgrad, loaded into the nbgrad module
    tsd = theirs.state_dict()
    back = load_with(nbgrad, saved_by(torch, tsd))
    assert list(back) == list(tsd)
    for k in tsd:
        same_tensor(back[k], tsd[k])
    ours.load_state_dict(back)
    for k, v in ours.state_dict().items():
        np.testing.assert_array_equal(values(v), values(tsd[k]))


def _adam_after_steps(lib, model):
    opt = lib.optim.Adam(model.parameters(), lr=0.01, betas=(0.8, 0.9))
    for _ in range(3):
        opt.zero_grad()
        model(lib.ones(5, 4)).pow(2).sum().backward()
        opt.step()
    return opt


def test_adam_state_round_trips_both_ways():
    ours = _adam_after_steps(nbgrad, nbgrad.nn.Linear(4, 2))
    theirs = _adam_after_steps(torch, torch.nn.Linear(4, 2))
    sd = ours.state_dict()
    back = load_with(torch, saved_by(nbgrad, sd))
    same(sd, back)
    torch.optim.Adam(torch.nn.Linear(4, 2).parameters()).load_state_dict(back)
    tsd = theirs.state_dict()
    back = load_with(nbgrad, saved_by(torch, tsd))
    same(back, tsd)
    fresh = nbgrad.optim.Adam(nbgrad.nn.Linear(4, 2).parameters())
    fresh.load_state_dict(back)
    same(fresh.state_dict()["state"], tsd["state"])


# ---------------------------------------------------------------- containers, scalars, dtypes

def _nested(lib):
    return {
        "od": OrderedDict([("b", lib.ones(2)), ("a", [1, 2.5, "x"])]),
        "list": [lib.zeros(1), (lib.tensor(3), None, True), {"deep": [[{"x": lib.eye(2)}]]}],
        "numbers": [0, -7, 2 ** 70, 0.1, float("inf"), float("nan"), -0.0, 1 + 2j, False],
        "text": ["", "naïve ✓", b"\x00\xffbytes", bytearray(b"ab")],
        "size": lib.Size([2, 3]), "dtype": lib.float16, "device": lib.device("cpu"),
        "set": {1, 2}, "counter": Counter("abca"),
        3: "int key", (1, "a"): "tuple key", None: "None key",
    }


@pytest.mark.parametrize("direction", ["nbgrad->torch", "torch->nbgrad", "nbgrad->nbgrad"])
def test_nested_containers_and_python_values(direction):
    src, dst = {"nbgrad->torch": (nbgrad, torch), "torch->nbgrad": (torch, nbgrad),
                "nbgrad->nbgrad": (nbgrad, nbgrad)}[direction]
    obj = _nested(src)
    same(load_with(dst, saved_by(src, obj)), obj)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(), (0,), (2, 0, 3), (3,), (2, 3)])
def test_every_dtype_and_shape_both_ways(dtype, shape):
    rng = np.random.default_rng(0)
    arr = (rng.standard_normal(shape) * 50).astype(dtype) if dtype != "bool" else \
        rng.standard_normal(shape) > 0
    ours, theirs = nbgrad.tensor(arr), torch.tensor(arr)
    same_tensor(ours, load_with(torch, saved_by(nbgrad, ours)))
    same_tensor(load_with(nbgrad, saved_by(torch, theirs)), theirs)


def _views(lib):
    a = lib.arange(24.0).reshape(4, 6)
    return {"a": a, "row": a[1], "t": a.t(), "step": a[:, 1::2], "col": a[:, 3],
            "tail": a.reshape(-1)[5:], "other": lib.arange(3)}


@pytest.mark.parametrize("src, dst", [(nbgrad, torch), (torch, nbgrad), (nbgrad, nbgrad)],
                         ids=["nbgrad->torch", "torch->nbgrad", "nbgrad->nbgrad"])
def test_views_stay_views_of_one_storage(src, dst):
    obj = _views(src)
    back = load_with(dst, saved_by(src, obj))
    for k in obj:
        same_tensor(back[k], obj[k])
    ptr = back["a"].untyped_storage().data_ptr()
    for k in ("row", "t", "step", "col", "tail"):
        assert back[k].untyped_storage().data_ptr() == ptr
    assert back["other"].untyped_storage().data_ptr() != ptr
    if dst is nbgrad:
        assert back["row"].untyped_storage() is back["a"].untyped_storage()  # one Storage
    back["a"][1, 3] = -5.0
    assert back["row"][3].item() == back["t"][3, 1].item() == back["col"][1].item() == -5.0


def test_saved_file_has_torch_records_and_one_record_per_storage():
    import zipfile
    data = saved_by(nbgrad, _views(nbgrad))
    names = zipfile.ZipFile(io.BytesIO(data)).namelist()
    assert names == ["archive/data.pkl", "archive/.format_version", "archive/.storage_alignment",
                     "archive/byteorder", "archive/data/0", "archive/data/1", "archive/version",
                     "archive/.data/serialization_id"]
    z = zipfile.ZipFile(io.BytesIO(data))
    for info in z.infolist():  # every record's bytes start on a 64-byte boundary (mmap)
        head = data[info.header_offset:info.header_offset + 30]
        start = info.header_offset + 30 + int.from_bytes(head[26:28], "little") + \
            int.from_bytes(head[28:30], "little")
        assert start % 64 == 0
    assert z.testzip() is None


def test_parameters_and_requires_grad_both_ways():
    obj = {"p": nbgrad.nn.Parameter(nbgrad.ones(2)),
           "frozen": nbgrad.nn.Parameter(nbgrad.ones(2), requires_grad=False),
           "leaf": nbgrad.tensor([1.0, 2.0], requires_grad=True), "plain": nbgrad.ones(1)}
    back = load_with(torch, saved_by(nbgrad, obj))
    same(obj, back)
    assert type(back["p"]) is torch.nn.Parameter
    again = load_with(nbgrad, saved_by(torch, back))
    same(again, back)
    assert type(again["p"]) is nbgrad.nn.Parameter and again["leaf"].is_leaf


def test_noncontiguous_and_negative_layouts_are_written_as_they_read():
    a = nbgrad.arange(30.0).reshape(5, 6)
    obj = [a[::2, 1::3], a.t()[2:], a.flip(0) if hasattr(a, "flip") else a, a.expand(2, 5, 6)
           if hasattr(a, "expand") else a]
    back = load_with(torch, saved_by(nbgrad, obj))
    for x, y in zip(obj, back):
        np.testing.assert_array_equal(values(x), values(y))
        assert tuple(x.shape) == tuple(y.shape)


def test_bfloat16_from_torch_loads_as_float32_with_a_warning():
    t = torch.tensor([1.5, -2.0, 3.140625], dtype=torch.bfloat16)
    with pytest.warns(UserWarning, match="bfloat16"):
        back = load_with(nbgrad, saved_by(torch, {"w": t}))
    assert back["w"].dtype == nbgrad.float32
    np.testing.assert_array_equal(back["w"].numpy(), t.float().numpy())


# ---------------------------------------------------------------- whole modules, weights_only

def _refusal(lib, data, **kw):
    with pytest.raises(pickle.UnpicklingError) as info:
        load_with(lib, data, **kw)
    return str(info.value)


def test_a_whole_module_saves_and_loads_with_weights_only_false():
    m = nbgrad.nn.Sequential(nbgrad.nn.Linear(2, 3), nbgrad.nn.ReLU())
    data = saved_by(nbgrad, m)
    # the default weights_only=True refuses it, with torch's very words
    assert _refusal(nbgrad, data) == _refusal(torch, data)
    assert "GLOBAL torch.nn.modules.container.Sequential was not an allowed global" in \
        _refusal(nbgrad, data)
    back = load_with(nbgrad, data, weights_only=False)
    assert type(back) is nbgrad.nn.Sequential
    x = nbgrad.ones(1, 2)
    np.testing.assert_array_equal(values(back(x)), values(m(x)))
    # torch reads it as torch's module, and nbgrad reads torch's
    tm = load_with(torch, data, weights_only=False)
    assert type(tm) is torch.nn.Sequential
    np.testing.assert_allclose(values(tm(torch.ones(1, 2))), values(m(x)), rtol=1e-6)
    back = load_with(nbgrad, saved_by(torch, tm), weights_only=False)
    assert type(back[0]) is nbgrad.nn.Linear
    np.testing.assert_allclose(values(back(x)), values(m(x)), rtol=1e-6)


def test_numpy_arrays_are_refused_as_torch_refuses_them():
    for src in (torch, nbgrad):
        data = saved_by(src, {"a": np.arange(3)})
        msg = _refusal(nbgrad, data)
        assert msg == _refusal(torch, data)
        assert "Weights only load failed" in msg and "_reconstruct" in msg
        np.testing.assert_array_equal(load_with(nbgrad, data, weights_only=False)["a"],
                                      np.arange(3))


def test_safe_globals_allow_what_the_user_trusts():
    data = saved_by(torch, {"a": np.arange(3)})
    np_globals = [np._core.multiarray._reconstruct if hasattr(np, "_core") else
                  np.core.multiarray._reconstruct, np.ndarray, np.dtype,
                  type(np.dtype(np.int64))]
    assert nbgrad.serialization.get_safe_globals() == []
    with nbgrad.serialization.safe_globals(np_globals):
        np.testing.assert_array_equal(load_with(nbgrad, data)["a"], np.arange(3))
    assert nbgrad.serialization.get_safe_globals() == []
    nbgrad.serialization.add_safe_globals(np_globals)
    try:
        assert set(nbgrad.serialization.get_safe_globals()) == set(np_globals)
        load_with(nbgrad, data)
    finally:
        nbgrad.serialization.clear_safe_globals()
    assert nbgrad.serialization.get_safe_globals() == []
    with pytest.raises(pickle.UnpicklingError):
        load_with(nbgrad, data)


# ---------------------------------------------------------------- map_location, mmap, files

def test_map_location_forms():
    data = saved_by(torch, {"w": torch.arange(3.0)})
    for ml in ("cpu", nbgrad.device("cpu"), {"cpu": "cpu"}, None):
        assert load_with(nbgrad, data, map_location=ml)["w"].device.type == "cpu"
    seen = []
    back = load_with(nbgrad, data, map_location=lambda st, loc: seen.append(loc))
    assert seen == ["cpu"] and back["w"].tolist() == [0.0, 1.0, 2.0]
    back = load_with(nbgrad, data, map_location=lambda st, loc: st)
    assert back["w"].tolist() == [0.0, 1.0, 2.0]


@pytest.mark.skipif(nbgrad.cuda.is_available(), reason="checks the CPU-only message")
def test_a_cuda_checkpoint_without_cuda_says_to_map_it():
    data = _edit_pickle(saved_by(torch, {"w": torch.arange(3.0)}),
                        lambda pkl: pkl.replace(b"X\x03\x00\x00\x00cpu",
                                                b"X\x06\x00\x00\x00cuda:0"))
    with pytest.raises(RuntimeError) as ours:
        load_with(nbgrad, data)
    assert "torch.cuda.is_available() is False" in str(ours.value)
    assert load_with(nbgrad, data, map_location={"cuda:0": "cpu"})["w"].tolist() == [0, 1, 2]


def _edit_pickle(data, edit):
    """A copy of checkpoint `data` whose data.pkl is edit(data.pkl)."""
    import zipfile
    z = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as w:
        for name in z.namelist():
            rec = z.read(name)
            w.writestr(name, edit(rec) if name.endswith("/data.pkl") else rec)
    return out.getvalue()


def test_paths_and_mmap(tmp_path):
    path = tmp_path / "ck.pt"
    obj = _views(nbgrad)
    nbgrad.save(obj, path)
    import zipfile
    assert zipfile.ZipFile(path).namelist()[0] == "ck/data.pkl"  # torch's folder: the stem
    for kw in ({}, {"mmap": True}):
        back = nbgrad.load(str(path), **kw)
        for k in obj:
            np.testing.assert_array_equal(values(back[k]), values(obj[k]))
        back["a"][0, 1] = 9.0  # copy-on-write: the file is unchanged
        assert back["row"].untyped_storage() is back["a"].untyped_storage()
    assert nbgrad.load(path)["a"][0, 1].item() == 1.0
    theirs = torch.load(path, mmap=True)  # torch maps nbgrad's records too (64-byte aligned)
    for k in obj:
        same_tensor(obj[k], theirs[k])
    with pytest.raises(ValueError, match="f must be a file path in order to use the mmap"):
        nbgrad.load(io.BytesIO(path.read_bytes()), mmap=True)


def test_old_nbgrad_npz_files_still_load():
    meta = {"format": 2, "root": {"d": [["w", {"t": "w", "param": True, "requires_grad": True}],
                                        ["step", {"v": 5}]], "ordered": True}}
    buf = io.BytesIO()
    np.savez(buf, __nbgrad__=np.frombuffer(json.dumps(meta).encode(), np.uint8),
             w=np.ones((2, 2), np.float32))
    back = nbgrad.load(io.BytesIO(buf.getvalue()))
    assert type(back) is OrderedDict and back["step"] == 5
    assert type(back["w"]) is nbgrad.nn.Parameter and back["w"].shape == (2, 2)


# ---------------------------------------------------------------- malformed files

def _outcome(lib, data, **kw):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            load_with(lib, data, **kw)
    except Exception as e:  # noqa: BLE001
        return e
    return None


# what torch lets through from Python's internals; nbgrad says the same as UnpicklingError
_INTERNAL = (KeyError, AttributeError, TypeError, IndexError, RecursionError)


def _same_outcome(data, **kw):
    ours, theirs = _outcome(nbgrad, data, **kw), _outcome(torch, data, **kw)
    if theirs is None:
        assert ours is None, f"torch loaded it, nbgrad raised {ours!r}"
        return ours, theirs
    assert ours is not None, f"torch raised {theirs!r}, nbgrad loaded it"
    assert not isinstance(ours, _INTERNAL + (__import__("zipfile").BadZipFile,)), repr(ours)
    if isinstance(theirs, _INTERNAL) or type(theirs).__module__ == "struct":
        assert isinstance(ours, (pickle.UnpicklingError, EOFError)), repr(ours)
    else:
        assert type(ours) is type(theirs), (ours, theirs)
    assert str(ours) or type(ours) is EOFError
    return ours, theirs


GOOD = saved_by(torch, {"w": torch.arange(6.0).reshape(2, 3), "n": 3, "s": "text"})
OURS = saved_by(nbgrad, {"w": nbgrad.arange(6.0).reshape(2, 3), "n": 3, "s": "text"})


@pytest.mark.parametrize("good", [GOOD, OURS], ids=["torch.save", "nbgrad.save"])
def test_truncated_files(good):
    for n in range(0, len(good), 7):
        _same_outcome(good[:n])


def _folder_flags(data):
    """Where each central record's external attributes (its "folder" flag) lie: a folder's
    bytes are read by torch as an unfilled buffer, whose contents are whatever memory held."""
    import struct
    out, p = set(), data.find(b"PK\x01\x02")
    while data[p:p + 4] == b"PK\x01\x02":
        out.add(p + 38)
        n, m, k = struct.unpack("<HHH", data[p + 28:p + 34])
        p += 46 + n + m + k
    return out


@pytest.mark.parametrize("good", [GOOD, OURS], ids=["torch.save", "nbgrad.save"])
def test_flipped_bytes_everywhere(good):
    uninitialised = _folder_flags(good)
    for pos in range(len(good)):
        data = bytearray(good)
        data[pos] ^= 0xFF
        if pos in uninitialised:
            ours = _outcome(nbgrad, bytes(data))
            assert ours is None or not isinstance(ours, _INTERNAL), repr(ours)
        else:
            _same_outcome(bytes(data))


def _zip(records, prefix="archive/"):
    import zipfile
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for k, v in records.items():
            z.writestr(prefix + k, v)
    return buf.getvalue()


class _Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        import os
        return (os.system, (f"touch {self.marker}",))


def test_a_pickle_calling_os_system_never_runs(tmp_path):
    marker = tmp_path / "ran"
    evil = pickle.dumps({"w": _Evil(marker)}, protocol=2)
    for data in (evil, _zip({"data.pkl": evil, "version": b"3\n"})):
        ours, theirs = _same_outcome(data)
        assert str(ours) == str(theirs)
        assert "GLOBAL posix.system whose module posix is blocked" in str(ours)
    for data in (pickle.dumps(_Evil(marker), protocol=4),
                 _zip({"data.pkl": pickle.dumps([print], protocol=2), "version": b"3\n"}),
                 _zip({"data.pkl": b"\x80\x02cbuiltins\neval\nX\x01\x00\x00\x001\x85R.",
                       "version": b"3\n"})):
        ours, theirs = _same_outcome(data)
    # weights_only=False of a non-zip file: nbgrad still reads its header weights-only
    assert isinstance(_outcome(nbgrad, evil, weights_only=False), pickle.UnpicklingError)
    assert not marker.exists()


@pytest.mark.parametrize("case", ["list", "tuple", "dict"])
def test_deep_nesting_loads_as_torch_loads_it(case):
    n = 50_000
    body = {"list": b"]" * n + b"a" * (n - 1),                     # [[[...]]]
            "tuple": b"(" * (n - 1) + b")" + b"t" * (n - 1),           # ((((),),),)
            "dict": b"}" + b"X\x01\x00\x00\x00k}" * (n - 1) + b"s" * (n - 1)}[case]
    data = _zip({"data.pkl": b"\x80\x02" + body + b".", "version": b"3\n"})
    ours, theirs = _same_outcome(data)
    assert ours is None and theirs is None
    back = load_with(nbgrad, data)
    depth = 0
    while back:
        back = back[0] if case != "dict" else back["k"]
        depth += 1
    assert depth == n - 1


@pytest.mark.parametrize("records", [
    {"version": b"3\n", "other": b"x"},                        # no data.pkl
    {"data.pkl": pickle.dumps({"a": 1}, protocol=2)},          # no version
    {"data.pkl": pickle.dumps({"a": 1}, protocol=2), "version": b"99\n"},
    {"data.pkl": pickle.dumps({"a": [1, 2]}, protocol=2)[:-4], "version": b"3\n"},
    {"data.pkl": b"\x80\x02h\x05.", "version": b"3\n"},       # memo never stored
    {"data.pkl": b"\x80\x02}}b.", "version": b"3\n"},         # BUILD on a dict
    {"data.pkl": b"\x80\x02](]a.", "version": b"3\n"},        # APPEND on a mark
    {"data.pkl": b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n)R.", "version": b"3\n"},
    {"data.pkl": pickle.dumps({"a": 1}, protocol=4), "version": b"3\n"},
    {"data.pkl": b"\x80\x02(X\x07\x00\x00\x00storagectorch\nFloatStorage\nX\x01\x00\x00\x000"
                 b"X\x03\x00\x00\x00cpuK\x06tQ.", "version": b"3\n"},   # storage record missing
    {"data.pkl": b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n((X\x07\x00\x00\x00storagectorch\n"
                 b"FloatStorage\nX\x01\x00\x00\x000X\x03\x00\x00\x00cpuK\x02tQK\x00K\x03\x85K\x01"
                 b"\x85\x89}tR.", "data/0": b"\0" * 8, "version": b"3\n"},  # view out of bounds
    {"data.pkl": b"\x80\x02.", "version": b"3\n"},            # STOP on an empty stack
])
def test_malformed_archives(records):
    _same_outcome(_zip(records))


@pytest.mark.parametrize("data", [
    b"", b"hello world, not a checkpoint", b"PK\x03\x04" + b"\0" * 200,
    pickle.dumps(12345, protocol=2), _zip({"a.npy": b"x"}, prefix=""),
    _zip({"data.pkl": b"\x80\x02K\x01."}, prefix="a/b/"),
], ids=["empty", "text", "zip-magic-only", "pickle-not-magic", "npz-not-nbgrad", "deep-folder"])
def test_not_checkpoints(data):
    _same_outcome(data)


def test_weights_only_with_a_pickle_module_is_refused():
    with pytest.raises(RuntimeError, match="Can not safely load weights when explicit "
                                           "pickle_module is specified"):
        nbgrad.load(io.BytesIO(GOOD), pickle_module=pickle, weights_only=True)
    assert nbgrad.load(io.BytesIO(GOOD), pickle_module=pickle)["n"] == 3


def test_views_cannot_escape_their_storage():
    # the size claims more than the record holds: refused before any memory is touched
    data = _edit_pickle(GOOD, lambda pkl: pkl.replace(b"K\x06tq", b"K\x60tq"))
    assert isinstance(_outcome(nbgrad, data), RuntimeError)


@pytest.mark.skipif(not nbgrad.cuda.is_available(), reason="needs a CUDA GPU (cupy)")
def test_cuda_tensors_come_back_on_cuda_or_where_mapped():
    t = nbgrad.arange(4.0, device="cuda")
    data = saved_by(nbgrad, {"t": t, "v": t[1:]})
    back = load_with(nbgrad, data)
    assert back["t"].device.type == "cuda" and back["v"].tolist() == [1, 2, 3]
    assert load_with(nbgrad, data, map_location="cpu")["t"].device.type == "cpu"
    assert load_with(torch, data, map_location="cpu")["v"].tolist() == [1, 2, 3]


WHOLE_MODEL_PROGRAM = '''
import io, pickle, sys
import torch
import torch.nn as nn

class RNNModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Embedding(10, 4)
        self.rnn = nn.LSTM(4, 5)
        self.decoder = nn.Linear(5, 10)

    def forward(self, x):
        out, _ = self.rnn(self.encoder(x))
        return self.decoder(out)

torch.manual_seed(0)
model = RNNModel()
with open(sys.argv[1], "wb") as f:
    torch.save(model, f)
try:
    torch.load(sys.argv[1])
except pickle.UnpicklingError as e:
    print("refused:", "GLOBAL __main__.RNNModel was not an allowed global" in str(e))
with open(sys.argv[1], "rb") as f:
    back = torch.load(f, weights_only=False)
x = torch.tensor([[1, 2, 3]])
print(type(back).__name__, type(back.rnn).__name__, bool((back(x) == model(x)).all()))
with torch.serialization.safe_globals([RNNModel, nn.Embedding, nn.LSTM, nn.Linear]):
    try:
        torch.load(sys.argv[1])
    except pickle.UnpicklingError as e:
        print("still refused:", str(e).split("GLOBAL ")[1].split(" ")[0])
'''


def test_a_program_saving_a_whole_model_under_the_torch_alias(tmp_path):
    """word_language_model's end: torch.save(model), then torch.load(f, weights_only=False)."""
    import os
    import subprocess
    import sys
    from pathlib import Path
    script = tmp_path / "prog.py"
    script.write_text(WHOLE_MODEL_PROGRAM)
    root = str(Path(nbgrad.__file__).parent.parent)
    ours = subprocess.run([sys.executable, "-m", "nbgrad", str(script), str(tmp_path / "m.pt")],
                          cwd=tmp_path, env=dict(os.environ, PYTHONPATH=root),
                          capture_output=True, text=True, timeout=300)
    theirs = subprocess.run([sys.executable, str(script), str(tmp_path / "t.pt")], cwd=tmp_path,
                            capture_output=True, text=True, timeout=300)
    assert ours.returncode == 0, ours.stderr[-2000:]
    assert theirs.returncode == 0, theirs.stderr[-2000:]
    assert ours.stdout == theirs.stdout


class _MyTensor(nbgrad.Tensor):
    pass


def test_tensor_attributes_and_subclasses():
    t, n = torch.ones(2), nbgrad.ones(2)
    t.note, n.note = "kept", "kept"
    assert load_with(nbgrad, saved_by(torch, {"t": t}))["t"].note == "kept"
    assert load_with(torch, saved_by(nbgrad, {"t": n}))["t"].note == "kept"
    sub = nbgrad.Tensor._make_subclass(_MyTensor, nbgrad.arange(3.0))
    data = saved_by(nbgrad, sub)
    assert "_MyTensor was not an allowed global" in _refusal(nbgrad, data)
    assert nbgrad.serialization.get_unsafe_globals_in_checkpoint(io.BytesIO(data)) == \
        [f"{__name__}._MyTensor"]
    assert nbgrad.serialization.get_unsafe_globals_in_checkpoint(io.BytesIO(GOOD)) == []
    with nbgrad.serialization.safe_globals([_MyTensor]):
        back = load_with(nbgrad, data)
    assert type(back) is _MyTensor and back.tolist() == [0.0, 1.0, 2.0]


@pytest.mark.parametrize("pkl, refused", [
    (b"\x80\x02ctorch\nSize\n]K\x02a\x85\x81.", False),                 # NEWOBJ Size([2])
    (b"\x80\x02ccollections\nOrderedDict\n)\x81.", False),
    (b"\x80\x02ctorch\nTensor\n)\x81.", True),           # a Tensor needs more than __new__
    (b"\x80\x02ctorch\nUntypedStorage\n)\x81.", True),
    (b"\x80\x02ctorch\nfloat32\n}X\x01\x00\x00\x00aK\x01sb.", True),  # BUILD on a dtype
    (b"\x80\x02ctorch\nFloatStorage\n}X\x01\x00\x00\x00aK\x01sb.", True),
])
def test_constructs_that_could_corrupt_nbgrad_objects_are_refused(pkl, refused):
    data = _zip({"data.pkl": pkl, "version": b"3\n"})
    if refused:
        with pytest.raises(pickle.UnpicklingError):
            load_with(nbgrad, data)
    else:
        load_with(nbgrad, data)
    assert nbgrad.float32.itemsize == 4 and not hasattr(nbgrad.FloatStorage, "a")


def test_environment_switches_as_torch(monkeypatch):
    data = saved_by(nbgrad, {"a": np.arange(2)})
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    with pytest.warns(UserWarning, match="forcing weights_only=False"):
        assert load_with(nbgrad, data)["a"].tolist() == [0, 1]
    with pytest.raises(pickle.UnpicklingError):
        load_with(nbgrad, data, weights_only=True)
    monkeypatch.setenv("TORCH_FORCE_WEIGHTS_ONLY_LOAD", "1")
    with pytest.raises(RuntimeError, match="Only one of"):
        load_with(nbgrad, data)
    monkeypatch.delenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD")
    with pytest.raises(pickle.UnpicklingError):
        load_with(nbgrad, data, weights_only=False)
