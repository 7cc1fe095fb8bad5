"""``nbgrad.optim``: SGD, Adam, AdamW, RMSprop and ``lr_scheduler`` (mirrors ``torch.optim``)."""

from .optimizer import Optimizer
from .optimizers import SGD, Adam, AdamW, RMSprop
from . import lr_scheduler

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "lr_scheduler"]
