"""``Optimizer``: the base class of every optimizer (mirrors ``torch.optim.Optimizer``).

The update rules run under ``no_grad`` on the parameters' numpy arrays in place (``p._data``),
then bump each parameter's version counter once per in-place op torch would have run, so
``_version`` moves as in torch. Their per-step state (momentum buffers, moments, ``step``) are
nbgrad tensors, so ``state_dict()`` looks like torch's.
"""

from collections import defaultdict
import copy
import functools
import itertools

import numpy as np

from nbgrad import creation
from nbgrad.autograd import grad_mode
from nbgrad.tensor import Tensor

__all__ = ["Optimizer", "required"]


class _RequiredParameter:
    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


def _use_grad(step):
    """Run ``step`` under no_grad (a closure, if given, is evaluated with grad enabled)."""

    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        with grad_mode.no_grad():
            return step(self, *args, **kwargs)

    return wrapper


def _tensor_of(arr):
    """A fresh nbgrad tensor owning ``arr`` (a numpy array, or a device array: on its device)."""
    return creation.from_numpy(arr) if type(arr) is np.ndarray else Tensor._make_fresh(arr)


class Optimizer:
    """Base class: holds ``param_groups`` (list of dicts) and per-parameter ``state``.

    Args:
        params: an iterable of Parameters, or of dicts ``{"params": [...], "lr": ...}`` (groups).
        defaults (dict): default hyper-parameters of a group.

    Raises:
        TypeError: params is a single tensor; ValueError: empty params or a parameter in two
            groups.
    """

    def __init__(self, params, defaults):
        self.defaults = defaults
        if isinstance(params, Tensor):
            raise TypeError(
                "params argument given to the optimizer should be an iterable of Tensors or "
                f"dicts, but got {params.type()}")
        self.state = defaultdict(dict)
        self.param_groups = []
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for group in param_groups:
            self.add_param_group(group)

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state,
                "param_groups": self.param_groups}

    def __setstate__(self, state):
        self.__dict__.update(state)

    def __repr__(self):
        s = self.__class__.__name__ + " ("
        for i, group in enumerate(self.param_groups):
            s += "\n"
            s += f"Parameter Group {i}\n"
            for key in sorted(group.keys()):
                if key != "params":
                    s += f"    {key}: {group[key]}\n"
        s += ")"
        return s

    def add_param_group(self, param_group):
        """Add a group (a dict with "params" and optional hyper-parameters) to ``param_groups``."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            param_group["params"] = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, "
                            "but the ordering of tensors in sets will change between runs. "
                            "Please use a list instead.")
        else:
            param_group["params"] = list(params)
        for p in param_group["params"]:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, but one of the params "
                                f"is {type(p).__name__}")
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(
                    f"parameter group didn't specify a value of required optimization "
                    f"parameter {name}")
            param_group.setdefault(name, default)
        if len({id(p) for p in param_group["params"]}) != len(param_group["params"]):
            import warnings
            warnings.warn("optimizer contains a parameter group with duplicate parameters; "
                          "in future, this will cause an error; see "
                          "github.com/pytorch/pytorch/issues/40967 for more information",
                          stacklevel=3)
        seen = set()
        for group in self.param_groups:
            seen.update(id(p) for p in group["params"])
        if any(id(p) in seen for p in param_group["params"]):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    def zero_grad(self, set_to_none=True):
        """Reset the gradients: to None (default, as torch 2.x), or zero them in place."""
        from ..nn.modules.module import zero_grads
        zero_grads((p for group in self.param_groups for p in group["params"]), set_to_none)

    def step(self, closure=None):
        raise NotImplementedError

    def _closure_loss(self, closure):
        if closure is None:
            return None
        with grad_mode.enable_grad():
            return closure()

    # ------------------------------------------------------------------ state dict
    def state_dict(self):
        """``{"state": {index: {...}}, "param_groups": [{..., "params": [indices]}]}`` as torch.

        Parameters are replaced by their index in the order of ``param_groups``; state tensors
        are returned by reference (as torch).
        """
        param_mappings = {}
        start_index = 0

        def pack_group(group):
            nonlocal start_index
            packed = {k: v for k, v in group.items() if k != "params"}
            param_mappings.update({id(p): i for i, p in enumerate(group["params"], start_index)
                                   if id(p) not in param_mappings})
            packed["params"] = [param_mappings[id(p)] for p in group["params"]]
            start_index += len(packed["params"])
            return packed

        param_groups = [pack_group(g) for g in self.param_groups]
        packed_state = {(param_mappings[id(k)] if isinstance(k, Tensor) else k): v
                        for k, v in self.state.items()}
        return {"state": packed_state, "param_groups": param_groups}

    def load_state_dict(self, state_dict):
        """Load a :meth:`state_dict` (deep-copied; floating state cast to each param's dtype).

        Raises:
            ValueError: different number of groups or of parameters in a group (torch's words).
        """
        state_dict = dict(state_dict)
        groups = self.param_groups
        saved_groups = copy.deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        param_lens = (len(g["params"]) for g in groups)
        saved_lens = (len(g["params"]) for g in saved_groups)
        if any(p_len != s_len for p_len, s_len in zip(param_lens, saved_lens)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match "
                             "the size of optimizer's group")
        id_map = dict(zip(itertools.chain.from_iterable(g["params"] for g in saved_groups),
                          itertools.chain.from_iterable(g["params"] for g in groups)))

        def cast(param, value, key=None):
            if isinstance(value, Tensor):
                arr = value._data.copy()
                if key != "step" and arr.dtype.kind == "f":
                    arr = arr.astype(param._data.dtype)
                return _tensor_of(arr)
            if isinstance(value, dict):
                return {k: cast(param, v, k) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                return type(value)(cast(param, v) for v in value)
            return copy.deepcopy(value)

        state = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in id_map:
                param = id_map[k]
                state[param] = cast(param, v)
            else:
                state[k] = v

        def update_group(group, new_group):
            new_group["params"] = group["params"]
            return new_group

        self.__setstate__({"state": state, "param_groups": [
            update_group(g, ng) for g, ng in zip(groups, saved_groups)]})
