"""``nbgrad.optim``: SGD, Adam, AdamW, RMSprop, Adagrad, Adadelta, Adamax, NAdam, RAdam, ASGD,
Rprop, Adafactor, SparseAdam, LBFGS, ``lr_scheduler`` and ``swa_utils`` (mirrors ``torch.optim``)."""

from .optimizer import Optimizer
from .optimizers import SGD, Adam, AdamW, RMSprop, Adagrad, Adadelta, Adamax, NAdam, RAdam
from .optimizers_more import ASGD, Rprop, Adafactor
from .sparse import SparseAdam
from .lbfgs import LBFGS
from . import lr_scheduler
from . import swa_utils

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax",
           "NAdam", "RAdam", "ASGD", "Rprop", "Adafactor", "SparseAdam", "LBFGS", "lr_scheduler",
           "swa_utils"]
