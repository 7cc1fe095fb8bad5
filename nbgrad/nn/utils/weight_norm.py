"""``nn.utils.weight_norm`` / ``remove_weight_norm`` (torch.nn.utils.weight_norm): a module's
weight re-parametrised as ``weight = weight_g * weight_v / ||weight_v||`` (Salimans & Kingma),
recomputed by a forward pre-hook before each call, as PyTorch's (deprecated) version does."""
from __future__ import annotations

import warnings

from ... import functions
from ..parameter import Parameter


class WeightNorm:
    """The forward pre-hook that recomputes ``module.<name>`` from ``<name>_g`` and ``<name>_v``
    (torch.nn.utils.weight_norm.WeightNorm)."""

    def __init__(self, name, dim):
        self.name = name
        self.dim = -1 if dim is None else dim

    def compute_weight(self, module):
        """``g * v / ||v||`` (norm over every dim but ``dim``): torch._weight_norm's graph."""
        g = getattr(module, self.name + "_g")
        v = getattr(module, self.name + "_v")
        return functions._weight_norm(v, g, self.dim)

    @staticmethod
    def apply(module, name, dim):
        """Replace parameter ``name`` of ``module`` by ``name_g`` (its norms) and ``name_v`` (its
        direction) and register the hook.

        Raises:
            RuntimeError: the parameter already has a weight_norm hook (PyTorch's text).
        """
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, WeightNorm) and hook.name == name:
                raise RuntimeError(
                    f"Cannot register two weight_norm hooks on the same parameter {name}")
        fn = WeightNorm(name, dim)
        weight = getattr(module, name)
        del module._parameters[name]
        module.register_parameter(
            name + "_g", Parameter(functions.norm_except_dim(weight, 2, fn.dim).detach()))
        module.register_parameter(name + "_v", Parameter(weight.detach()))
        setattr(module, name, fn.compute_weight(module))
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module):
        """Back to one parameter ``name`` holding the current weight."""
        weight = self.compute_weight(module)
        delattr(module, self.name)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        setattr(module, self.name, Parameter(weight.detach()))

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module, name="weight", dim=0):
    """Weight-normalise parameter ``name`` of ``module`` (torch.nn.utils.weight_norm, deprecated in
    PyTorch for parametrizations.weight_norm, with its FutureWarning): the module gets parameters
    ``name_g`` (shape of the norms: (out, 1, ...) for dim 0, 0-d for dim None) and ``name_v``, and
    ``name`` is recomputed before each forward (WeightNormInterfaceBackward0). Returns module.

    Raises:
        RuntimeError: ``name`` is already weight-normalised (PyTorch's text).
    """
    warnings.warn("`torch.nn.utils.weight_norm` is deprecated in favor of "
                  "`torch.nn.utils.parametrizations.weight_norm`.", FutureWarning, stacklevel=2)
    WeightNorm.apply(module, name, dim)
    return module


def remove_weight_norm(module, name="weight"):
    """Undo weight_norm: ``name`` is one Parameter again (torch.nn.utils.remove_weight_norm).

    Raises:
        ValueError: ``name`` is not weight-normalised (PyTorch's text).
    """
    for k, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, WeightNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[k]
            return module
    raise ValueError(f"weight_norm of '{name}' not found in {module}")
