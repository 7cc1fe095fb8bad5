"""``nbgrad.nn``: modules, parameters, losses, ``functional`` and ``init`` (mirrors ``torch.nn``).

``import nbgrad as torch`` then ``torch.nn.Linear(64, 10)`` works as in PyTorch: same names,
same constructor defaults, same default initialisation (torch's random stream, so after
``manual_seed`` the same initial weights as torch's).
"""

from .parameter import Parameter, Buffer
from .modules import *  # noqa: F401,F403
from .modules import __all__ as _modules_all
from . import functional, init, parallel, utils
from .parallel import DataParallel

__all__ = ["Parameter", "Buffer", "functional", "init", "parallel", "utils", "DataParallel"] + \
    list(_modules_all)
