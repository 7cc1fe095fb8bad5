"""GPU discipline without a GPU: the op suite's cases run with device="cuda" served by a strict
cupy double (tests/device_double.py), whose arrays refuse implicit host conversion and numpy
functions. A case passing here proves every array call its rows make on device data goes through
`backend` (the array's own module), and that values, grad_fn names and grads match torch."""
import numpy as np
import pytest

import nbgrad
from device_double import MESSAGE, DeviceArray, install
import test_ops_ext
from test_ops import CASES, check_on_device

# rows whose path still calls numpy on device data: {case name: the bug} (none left open)
XFAIL = {}


@pytest.fixture
def double(monkeypatch):
    install(monkeypatch)
    yield


def _param(case):
    marks = () if case.name not in XFAIL else pytest.mark.xfail(
        reason=f"GPU bug: {XFAIL[case.name]}", strict=True)
    return pytest.param(case, id=case.name, marks=marks)


def test_double_is_strict(double):
    a = nbgrad.ones(3, device="cuda")
    assert type(a._data) is DeviceArray and a.device.type == "cuda"
    for call in (lambda: np.asarray(a._data), lambda: np.exp(a._data),
                 lambda: np.sum(a._data), lambda: a._data + np.ones(3),
                 lambda: np.ones(3) + a._data):
        with pytest.raises(TypeError):
            call()
    with pytest.raises(TypeError, match=MESSAGE.split(".")[0]):
        np.asarray(a._data)
    np.testing.assert_array_equal(a.cpu().numpy(), np.ones(3))
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        a + nbgrad.ones(3)  # the hot path of operators: cupy's TypeError becomes torch's text
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        a + nbgrad.ones(2, 3)
    assert float(a.sum()) == 3.0


@pytest.mark.parametrize("case", [_param(c) for c in CASES + test_ops_ext.CASES])
def test_case_on_double(case, double):
    check_on_device(case, "cuda")
