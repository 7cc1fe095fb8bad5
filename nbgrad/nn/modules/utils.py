"""Helpers the layer files share (torch keeps its ``_pair`` and friends in ``nn.modules.utils``)."""

from nbgrad import dtypes


def _factory(device, dtype):
    kw = {}
    if device is not None:
        kw["device"] = device
    kw["dtype"] = dtype if dtype is not None else dtypes.get_default_dtype()
    return kw
