"""The module classes of ``nbgrad.nn``, in torch's files (mirrors ``torch.nn.modules``).

``from torch.nn.modules.linear import Linear`` works as ``from nbgrad.nn.modules.linear import
Linear``: each file holds the classes torch's file of that name holds.
"""

from .hooks import RemovableHandle
from .module import Module
from .activation import *  # noqa: F401,F403
from .batchnorm import *  # noqa: F401,F403
from .container import *  # noqa: F401,F403
from .conv import *  # noqa: F401,F403
from .distance import *  # noqa: F401,F403
from .dropout import *  # noqa: F401,F403
from .flatten import *  # noqa: F401,F403
from .fold import *  # noqa: F401,F403
from .instancenorm import *  # noqa: F401,F403
from .linear import *  # noqa: F401,F403
from .loss import *  # noqa: F401,F403
from .normalization import *  # noqa: F401,F403
from .padding import *  # noqa: F401,F403
from .pixelshuffle import *  # noqa: F401,F403
from .pooling import *  # noqa: F401,F403
from .rnn import *  # noqa: F401,F403
from .sparse import *  # noqa: F401,F403
from .transformer import *  # noqa: F401,F403
from .upsampling import *  # noqa: F401,F403
from . import (activation, batchnorm, container, conv, distance, dropout, flatten, fold,
               instancenorm, linear, loss, normalization, padding, pixelshuffle, pooling, rnn,
               sparse, transformer, upsampling)

__all__ = ["Module", "RemovableHandle"] + [
    name for file in (activation, batchnorm, container, conv, distance, dropout, flatten, fold,
                      instancenorm, linear, loss, normalization, padding, pixelshuffle, pooling,
                      rnn, sparse, transformer, upsampling)
    for name in file.__all__]
