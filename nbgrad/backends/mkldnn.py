"""``nbgrad.backends.mkldnn`` (torch.backends.mkldnn): the switch of the fused LSTM layer.

PyTorch's CPU build runs a float32 ``nn.LSTM`` layer (no projection, unpacked input) as one
oneDNN kernel and records one ``MkldnnRnnLayerBackward0`` node per layer and direction; with
``torch.backends.mkldnn.enabled = False`` it records the per-step graph instead. nbgrad does the
same with its own numpy kernel for the layer (``nbgrad.ops.nn``, row ``mkldnn_rnn_layer``), under
the same switch: set ``enabled = False`` to see (and get) the per-step graph.
"""

enabled = True


def is_available() -> bool:
    """True: the fused LSTM layer this switch controls is always there
    (torch.backends.mkldnn.is_available)."""
    return True
