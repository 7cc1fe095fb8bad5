"""The module classes of ``nbgrad.nn`` (mirrors ``torch.nn.modules``)."""

from .module import Module, RemovableHandle
from .container import Sequential, ModuleList, ModuleDict
from .layers import (
    Identity, Linear, Conv2d, MaxPool2d, AvgPool2d, Flatten, Unflatten, ReLU, LeakyReLU, GELU,
    Tanh, Sigmoid, Softmax, LogSoftmax, Dropout, BatchNorm1d, BatchNorm2d, LayerNorm, Embedding,
)
from .loss import MSELoss, L1Loss, CrossEntropyLoss, NLLLoss, BCELoss, BCEWithLogitsLoss

__all__ = [
    "Module", "RemovableHandle", "Sequential", "ModuleList", "ModuleDict",
    "Identity", "Linear", "Conv2d", "MaxPool2d", "AvgPool2d", "Flatten", "Unflatten", "ReLU",
    "LeakyReLU", "GELU", "Tanh", "Sigmoid", "Softmax", "LogSoftmax", "Dropout", "BatchNorm1d",
    "BatchNorm2d", "LayerNorm", "Embedding",
    "MSELoss", "L1Loss", "CrossEntropyLoss", "NLLLoss", "BCELoss", "BCEWithLogitsLoss",
]
