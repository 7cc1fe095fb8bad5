"""Tensor.storage(): a TypedStorage over the tensor's Storage, as torch's (torch as the oracle)."""
import io
import warnings

import numpy as np
import pytest

import nbgrad
from nbgrad import typed_storage

torch = pytest.importorskip("torch")


def both(fn):
    """fn(lib) for nbgrad and torch, without the deprecation warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(nbgrad), fn(torch)


def test_deprecation_warning_once_with_torch_text():
    typed_storage._warned[0] = False
    with pytest.warns(UserWarning) as rec:
        nbgrad.arange(3.0).storage()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nbgrad.arange(3.0).storage()  # only once per process, as torch
    assert str(rec[0].message) == (
        "TypedStorage is deprecated. It will be removed in the future and UntypedStorage will be "
        "the only storage class. This should only matter to you if you are using storages "
        "directly.  To access UntypedStorage directly, use tensor.untyped_storage() instead of "
        "tensor.storage()")
    assert rec[0].filename == __file__  # points at the caller's line


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int64", "int32", "int16",
                                   "int8", "uint8", "bool"])
def test_sizes_values_and_repr(dtype):
    def make(lib):
        t = lib.tensor(np.array([0, 1, 2, 5], dtype=dtype)).reshape(2, 2)
        s = t[1].storage()
        return (s.size(), len(s), s.element_size(), s.nbytes(), str(s.dtype).split(".")[-1],
                str(s.device), s.tolist(), list(s), s[1], s[-1], type(s[0]).__name__,
                s.is_cuda, s.is_shared(), s.data_ptr() == t.data_ptr(),
                s.untyped().nbytes(), repr(s).replace("torch.", "nbgrad."), str(s) == repr(s))
    ours, theirs = both(make)
    assert ours == theirs


def test_writes_show_in_the_tensor_and_errors_are_torchs():
    def make(lib):
        t = lib.arange(4.0)
        v = t[2:]
        s = v.storage()
        s[0] = 7
        s[-1] = 9.5
        out = [t.tolist(), v.tolist()]
        for bad in (lambda: s[4], lambda: s.__setitem__(4, 1.0), lambda: s["a"],
                    lambda: s[1:3]):
            try:
                bad()
                out.append(None)
            except Exception as e:  # noqa: BLE001
                out.append((type(e).__name__, str(e).replace("torch.", "nbgrad.")))
        s.fill_(2)
        out.append(t.tolist())
        s.copy_(lib.tensor([1.0, 2.0, 3.0, 4.0]).storage())
        out.append(t.tolist())
        try:
            s.copy_(lib.tensor([1.0]).storage())
        except Exception as e:  # noqa: BLE001
            out.append(type(e).__name__)
        return out
    ours, theirs = both(make)
    assert ours == theirs


def test_storage_shares_the_tensors_memory_and_version_counter():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = nbgrad.zeros(3)
        s = t.storage()
        assert s.untyped() is t.untyped_storage()
        s[1] = 4.0
        assert t.tolist() == [0.0, 4.0, 0.0]
        assert nbgrad.tensor([1, 2]).storage().type() == "nbgrad.LongStorage"


def test_legacy_storage_classes():
    ours, theirs = both(lambda lib: (lib.FloatStorage([1, 2]).tolist(), lib.FloatStorage(3).size(),
                                     lib.LongStorage([3]).tolist(),
                                     str(lib.BoolStorage([1, 0]).dtype).split(".")[-1]))
    assert ours == theirs
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert isinstance(nbgrad.arange(2.0).storage(), nbgrad.FloatStorage)
        assert not isinstance(nbgrad.arange(2).storage(), nbgrad.FloatStorage)


def test_a_storage_saved_alone_both_ways():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for src, dst in ((nbgrad, torch), (torch, nbgrad)):
            buf = io.BytesIO()
            src.save({"s": src.arange(3.0).storage(), "u": src.arange(2).untyped_storage()}, buf)
            back = dst.load(io.BytesIO(buf.getvalue()))
            assert back["s"].tolist() == [0.0, 1.0, 2.0]
            assert back["u"].nbytes() == 16
