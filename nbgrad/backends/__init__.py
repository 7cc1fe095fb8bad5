"""``nbgrad.backends``: the switches PyTorch scripts set in ``torch.backends`` (cuda, cudnn, mps,
mkldnn: the last chooses nbgrad's fused LSTM layer, see its module).

nbgrad computes with numpy and cupy, never with cuDNN or Metal, so ``cudnn.is_available()`` and
``mps.is_available()`` are False and the cudnn flags (``benchmark``, ``deterministic``, ``enabled``)
are recorded but change nothing: nbgrad's results are deterministic already. (Not to be confused
with ``nbgrad.backend``, which chooses numpy or cupy.)
"""
from . import cuda, cudnn, mkldnn, mps

__all__ = ["cuda", "cudnn", "mkldnn", "mps"]
