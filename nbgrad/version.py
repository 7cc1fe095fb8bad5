"""``torch.version`` under the alias: the PyTorch release nbgrad follows and what it was built
with (mirrors ``torch.version``; nbgrad's own release is ``nbgrad.__version__``).

``cuda`` is the CUDA runtime cupy runs on when a GPU is usable (e.g. "12.4"), else None, as a CPU
build of torch reports; ``hip`` is None; ``debug`` False.
"""
from . import backend
from .as_torch import TORCH_VERSION, _TorchVersion

__all__ = ["__version__", "cuda", "hip", "debug", "git_version"]

__version__ = _TorchVersion(TORCH_VERSION)
cuda = backend.cuda_runtime_version()
hip = None
debug = False
git_version = "Unknown"
