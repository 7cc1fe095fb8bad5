"""``nn.Module``: the base class of every layer (mirrors ``torch.nn.Module``).

Parameters, buffers and child modules live in three dicts (``_parameters``, ``_buffers``,
``_modules``) filled by ``__setattr__``, and ``__getattr__`` (reached only when ordinary lookup
fails) reads them, as in torch.
"""

from collections import OrderedDict, namedtuple
import itertools

from nbgrad import dtypes
from nbgrad.autograd import grad_mode
from nbgrad.tensor import Tensor
from ..parameter import Parameter, Buffer
from .hooks import (RemovableHandle, _BackwardHooks, _add_hook, _global_backward_hooks,
                    _global_backward_pre_hooks, _global_forward_hooks,
                    _global_forward_hooks_with_kwargs, _global_forward_pre_hooks)
from .utils import _addindent, _is_dtype, _remove_from, _typename

__all__ = ["Module", "RemovableHandle", "register_module_forward_pre_hook",
           "register_module_forward_hook", "register_module_full_backward_hook",
           "register_module_full_backward_pre_hook"]

# a module call tests this one flag while no global hook (hooks.py's tables) is registered
_GLOBAL_HOOKS_ON = False


def _update_global_flag():
    global _GLOBAL_HOOKS_ON
    _GLOBAL_HOOKS_ON = bool(_global_forward_pre_hooks or _global_forward_hooks
                            or _global_backward_hooks or _global_backward_pre_hooks)


class _GlobalHandle:
    """RemovableHandle of a global hook: removing it also updates the fast-path flag."""

    def __init__(self, handle):
        self.handle = handle
        self.id = handle.id
        _update_global_flag()

    def remove(self):
        self.handle.remove()
        _update_global_flag()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def register_module_forward_pre_hook(hook):
    """Register ``hook(module, args) -> None | new_args`` run before every module's forward,
    before the module's own pre-hooks (mirrors torch's global hook).

    Returns:
        RemovableHandle.
    """
    handle = RemovableHandle(_global_forward_pre_hooks)
    _global_forward_pre_hooks[handle.id] = hook
    return _GlobalHandle(handle)


def register_module_forward_hook(hook, *, with_kwargs=False, always_call=False):
    """Register ``hook(module, args, output) -> None | new_output`` run after every module's
    forward, before the module's own hooks (mirrors torch's global hook).

    Returns:
        RemovableHandle.
    """
    handle = RemovableHandle(_global_forward_hooks, _global_forward_hooks_with_kwargs)
    _global_forward_hooks[handle.id] = hook
    if with_kwargs:
        _global_forward_hooks_with_kwargs[handle.id] = True
    return _GlobalHandle(handle)


def register_module_full_backward_hook(hook):
    """Register ``hook(module, grad_input, grad_output)`` for every module (torch's global
    full backward hook). Returns a RemovableHandle."""
    handle = RemovableHandle(_global_backward_hooks)
    _global_backward_hooks[handle.id] = hook
    return _GlobalHandle(handle)


def register_module_full_backward_pre_hook(hook):
    """Register ``hook(module, grad_output) -> None | new grad_output`` for every module
    (torch's global full backward pre-hook). Returns a RemovableHandle."""
    handle = RemovableHandle(_global_backward_pre_hooks)
    _global_backward_pre_hooks[handle.id] = hook
    return _GlobalHandle(handle)


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


class Module:
    """Base class for all neural-network modules (mirrors ``torch.nn.Module``).

    Subclasses call ``super().__init__()`` and then assign :class:`Parameter`\\ s, sub-modules
    and buffers as attributes; ``forward`` defines the computation and ``module(x)`` runs it
    (with forward pre-hooks and hooks, if any are registered).
    """

    training: bool
    _version = 1
    call_super_init = False

    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise TypeError(
                f"{type(self).__name__}.__init__() got an unexpected argument "
                f"(Module.__init__ takes none)"
            )
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = {}
        d["_buffers"] = {}
        d["_non_persistent_buffers_set"] = set()
        d["_modules"] = {}
        d["_forward_hooks"] = OrderedDict()
        d["_forward_hooks_with_kwargs"] = {}
        d["_forward_pre_hooks"] = OrderedDict()
        d["_forward_pre_hooks_with_kwargs"] = {}
        d["_backward_hooks"] = OrderedDict()
        d["_backward_pre_hooks"] = OrderedDict()
        d["_state_dict_hooks"] = OrderedDict()
        d["_load_state_dict_post_hooks"] = OrderedDict()

    # ------------------------------------------------------------------ calling
    def forward(self, *input):
        raise NotImplementedError(
            f'Module [{type(self).__name__}] is missing the required "forward" function'
        )

    def __call__(self, *args, **kwargs):
        if not (self._forward_hooks or self._forward_pre_hooks or self._backward_hooks
                or self._backward_pre_hooks or _GLOBAL_HOOKS_ON):
            return self.forward(*args, **kwargs)
        return self._call_with_hooks(args, kwargs)

    def _call_with_hooks(self, args, kwargs):
        for hook in list(_global_forward_pre_hooks.values()):
            res = hook(self, args)
            if res is not None:
                args = res if isinstance(res, tuple) else (res,)
        for hook_id, hook in list(self._forward_pre_hooks.items()):
            if hook_id in self._forward_pre_hooks_with_kwargs:
                res = hook(self, args, kwargs)
                if res is not None:
                    if not (isinstance(res, tuple) and len(res) == 2):
                        raise RuntimeError(
                            "forward pre-hook must return None or a tuple of (new_args, "
                            f"new_kwargs), but got {res}."
                        )
                    args, kwargs = res
            else:
                res = hook(self, args)
                if res is not None:
                    args = res if isinstance(res, tuple) else (res,)
        bw = None
        if self._backward_hooks or self._backward_pre_hooks or _global_backward_hooks \
                or _global_backward_pre_hooks:
            if grad_mode.is_grad_enabled():
                bw = _BackwardHooks(self)
                args = bw.wrap_inputs(args)
        result = self.forward(*args, **kwargs)
        for hook_id, hook in list(_global_forward_hooks.items()):
            if hook_id in _global_forward_hooks_with_kwargs:
                res = hook(self, args, kwargs, result)
            else:
                res = hook(self, args, result)
            if res is not None:
                result = res
        for hook_id, hook in list(self._forward_hooks.items()):
            if hook_id in self._forward_hooks_with_kwargs:
                res = hook(self, args, kwargs, result)
            else:
                res = hook(self, args, result)
            if res is not None:
                result = res
        if bw is not None:
            result = bw.wrap_outputs(result)
        return result

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """Register ``hook(module, args) -> None | new_args`` to run before ``forward``.

        Returns:
            RemovableHandle: call ``.remove()`` to unregister.
        """
        handle = RemovableHandle(self._forward_pre_hooks, self._forward_pre_hooks_with_kwargs)
        self._forward_pre_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs[handle.id] = True
        if prepend:
            self._forward_pre_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False, always_call=False):
        """Register ``hook(module, args, output) -> None | new_output`` to run after ``forward``.

        Mirrors ``torch.nn.Module.register_forward_hook``.

        Returns:
            RemovableHandle: call ``.remove()`` to unregister.
        """
        handle = RemovableHandle(self._forward_hooks, self._forward_hooks_with_kwargs)
        self._forward_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_hooks_with_kwargs[handle.id] = True
        if prepend:
            self._forward_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_full_backward_hook(self, hook, prepend=False):
        """Register ``hook(module, grad_input, grad_output) -> None | new grad_input``, called
        once the gradients with respect to the module's tensor inputs are computed (mirrors
        ``torch.nn.Module.register_full_backward_hook``; the graph gains torch's
        ``BackwardHookFunctionBackward`` nodes around the module).

        ``grad_input`` and ``grad_output`` are tuples, None where an input needs no gradient.
        When no input requires grad, the hook fires with the output gradients, ``grad_input``
        all None, and torch's warning.

        Returns:
            RemovableHandle.
        """
        return _add_hook(self._backward_hooks, hook, prepend)

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """Register ``hook(module, grad_output) -> None | new grad_output``, called before the
        gradients with respect to the inputs are computed (mirrors torch's).

        Returns:
            RemovableHandle.
        """
        return _add_hook(self._backward_pre_hooks, hook, prepend)

    # ------------------------------------------------------------------ registration
    def register_parameter(self, name, param):
        """Add a parameter (or None) under ``name``. Raises KeyError/TypeError like torch."""
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        self._check_name(name, "parameter")
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is None:
            self._parameters[name] = None
        elif not isinstance(param, Parameter):
            raise TypeError(
                f"cannot assign '{_typename(param)}' object to parameter '{name}' "
                "(nbgrad.nn.Parameter or None required)"
            )
        else:
            self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        """Add a buffer (a tensor that is state but not a parameter, e.g. BatchNorm's running_mean).

        Args:
            name (str): attribute name.
            tensor (Tensor | None): the buffer.
            persistent (bool): whether it is part of ``state_dict()``.
        """
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        self._check_name(name, "buffer")
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(
                f"cannot assign '{_typename(tensor)}' object to buffer '{name}' "
                "(nbgrad Tensor or None required)"
            )
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name, module):
        """Add a child module under ``name`` (mirrors ``torch.nn.Module.add_module``)."""
        if not isinstance(module, Module) and module is not None:
            raise TypeError(f"{_typename(module)} is not a Module subclass")
        self._check_name(name, "module")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        self._modules[name] = module

    register_module = add_module

    @staticmethod
    def _check_name(name, what):
        if not isinstance(name, str):
            raise TypeError(f"{what} name should be a string. Got {_typename(name)}")
        if "." in name:
            raise KeyError(f'{what} name can\'t contain "."')
        if name == "":
            raise KeyError(f'{what} name can\'t be empty string ""')

    def __getattr__(self, name):
        d = self.__dict__
        if "_parameters" in d and name in d["_parameters"]:
            return d["_parameters"][name]
        if "_buffers" in d and name in d["_buffers"]:
            return d["_buffers"][name]
        if "_modules" in d and name in d["_modules"]:
            return d["_modules"][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name, value):
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            _remove_from(name, d, self._buffers, self._modules, self._non_persistent_buffers_set)
            self.register_parameter(name, value)
            return
        if params is not None and name in params:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{_typename(value)}' as parameter '{name}' "
                    "(nbgrad.nn.Parameter or None expected)"
                )
            self.register_parameter(name, value)
            return
        modules = d.get("_modules")
        if isinstance(value, Module):
            if modules is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            _remove_from(name, d, self._parameters, self._buffers,
                         self._non_persistent_buffers_set)
            modules[name] = value
            return
        if modules is not None and name in modules:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{_typename(value)}' as child module '{name}' "
                    "(nbgrad.nn.Module or None expected)"
                )
            modules[name] = value
            return
        buffers = d.get("_buffers")
        if isinstance(value, Buffer):
            _remove_from(name, d, self._parameters, self._modules)
            self.register_buffer(name, value.data, value.persistent)
            return
        if buffers is not None and name in buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(
                    f"cannot assign '{_typename(value)}' as buffer '{name}' "
                    "(nbgrad.nn.Buffer, nbgrad.Tensor or None expected)"
                )
            buffers[name] = value
            return
        object.__setattr__(self, name, value)

    def __delattr__(self, name):
        for key in ("_parameters", "_buffers", "_modules"):
            dd = self.__dict__.get(key)
            if dd is not None and name in dd:
                del dd[name]
                self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    def __setstate__(self, state):
        self.__dict__.update(state)

    def __dir__(self):
        keys = list(type(self).__dict__) + list(self.__dict__)
        keys += list(self._parameters) + list(self._modules) + list(self._buffers)
        return sorted(k for k in set(keys) if not k[0].isdigit())

    # ------------------------------------------------------------------ traversal
    def _named_members(self, get_members_fn, prefix="", recurse=True, remove_duplicate=True):
        memo = set()
        modules = (self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
                   if recurse else [(prefix, self)])
        for module_prefix, module in modules:
            for k, v in get_members_fn(module):
                if v is None:
                    continue
                if remove_duplicate:
                    if id(v) in memo:
                        continue
                    memo.add(id(v))
                yield (module_prefix + ("." if module_prefix else "") + k, v)

    def parameters(self, recurse=True):
        """Yield every parameter (each once), in registration order, recursing into children."""
        modules = self._plain_tree() if recurse else None
        if modules is None:  # (not recursing, or a module overrides the traversal)
            for _, p in self.named_parameters(recurse=recurse):
                yield p
            return
        memo = set()  # named_parameters' order and deduplication, without building the names
        for m in modules:
            for p in m._parameters.values():
                if p is not None and id(p) not in memo:
                    memo.add(id(p))
                    yield p

    def _plain_tree(self):
        """The modules named_modules() yields, in its order (each once), or None when one of
        them overrides named_modules or named_parameters (then those are asked)."""
        if type(self).named_parameters is not _NAMED_PARAMETERS:
            return None
        out, memo, stack = [], set(), [self]
        while stack:
            m = stack.pop()
            if id(m) in memo:
                continue
            if type(m).named_modules is not _NAMED_MODULES:
                return None
            memo.add(id(m))
            out.append(m)
            children = [c for c in m._modules.values() if c is not None]
            children.reverse()
            stack += children
        return out

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """Yield ``(dotted_name, Parameter)`` pairs, e.g. ``("0.weight", p)``."""
        return self._named_members(lambda m: m._parameters.items(), prefix, recurse,
                                   remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        return self._named_members(lambda m: m._buffers.items(), prefix, recurse,
                                   remove_duplicate)

    def children(self):
        for _, m in self.named_children():
            yield m

    def named_children(self):
        memo = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in memo:
                memo.add(id(m))
                yield name, m

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """Yield ``(dotted_name, module)`` for this module (name ``prefix``) and all descendants."""
        if memo is None:
            memo = set()
        if id(self) in memo and remove_duplicate:
            return
        if remove_duplicate:
            memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from m.named_modules(memo, sub, remove_duplicate)

    def get_submodule(self, target):
        if target == "":
            return self
        mod = self
        for item in target.split("."):
            if not hasattr(mod, item):
                raise AttributeError(f"{mod._get_name()} has no attribute `{item}`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError(f"`{item}` is not an nn.Module")
        return mod

    def get_parameter(self, target):
        module_path, _, name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if name not in mod._parameters:
            raise AttributeError(f"{mod._get_name()} has no parameter `{name}`")
        return mod._parameters[name]

    # ------------------------------------------------------------------ modes, grads, devices
    def train(self, mode=True):
        """Set training mode (Dropout active, BatchNorm uses batch statistics); returns self."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for m in self.children():
            m.train(mode)
        return self

    def eval(self):
        """Set evaluation mode; same as ``train(False)``. Returns self."""
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        """Reset the gradients of all parameters: to None (default, as torch 2.x) or to zero."""
        zero_grads(self.parameters(), set_to_none)

    def apply(self, fn):
        """Call ``fn(m)`` on every child (recursively) then on self; returns self."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def _apply(self, fn):
        """Replace every parameter's data, every grad and every buffer by ``fn(tensor)``."""
        for m in self.children():
            m._apply(fn)
        with grad_mode.no_grad():
            for key, p in self._parameters.items():
                if p is None:
                    continue
                new = fn(p)
                if new is not p:
                    newp = Parameter(new, p.requires_grad)
                    if p.grad is not None:
                        newp.grad = fn(p.grad)
                    self._parameters[key] = newp
            for key, b in self._buffers.items():
                if b is not None:
                    self._buffers[key] = fn(b)
        return self

    def to(self, *args, **kwargs):
        """Move / cast parameters and buffers: ``to(device)``, ``to(dtype)``, ``to(device, dtype)``.

        Only floating-point parameters and buffers are cast to a dtype (as torch). Returns self.
        """
        device, dtype = None, None
        for a in list(args) + list(kwargs.values()):
            if a is None or isinstance(a, bool):
                continue
            if isinstance(a, Tensor):
                device, dtype = a.device, a.dtype
            elif _is_dtype(a):
                dtype = a
            else:
                device = a
        if dtype is not None and not dtype.is_floating_point:
            raise TypeError(
                "nn.Module.to only accepts floating point or complex dtypes, but got desired "
                f"dtype={dtype}"
            )

        def convert(t):
            out = t
            if device is not None:
                out = out.to(device)
            if dtype is not None and out.is_floating_point():
                out = out.to(dtype)
            return out

        return self._apply(convert)

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None):
        return self.to("cuda" if device is None else f"cuda:{device}" if isinstance(device, int)
                       else device)

    def float(self):
        return self._apply(lambda t: t.to(dtypes.float32) if t.is_floating_point() else t)

    def double(self):
        return self._apply(lambda t: t.to(dtypes.float64) if t.is_floating_point() else t)

    def half(self):
        return self._apply(lambda t: t.to(dtypes.float16) if t.is_floating_point() else t)

    def type(self, dst_type):
        return self._apply(lambda t: t.to(dst_type))

    # ------------------------------------------------------------------ state dict
    def _save_to_state_dict(self, destination, prefix, keep_vars):
        for name, param in self._parameters.items():
            if param is not None:
                destination[prefix + name] = param if keep_vars else param.detach()
        for name, buf in self._buffers.items():
            if buf is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = buf if keep_vars else buf.detach()

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """Return an ``OrderedDict`` of parameters and persistent buffers by dotted name.

        Values are detached tensors sharing storage with the module's (as torch), unless
        ``keep_vars=True``. Mirrors ``torch.nn.Module.state_dict``.
        """
        if args:  # positional (destination, prefix, keep_vars), deprecated in torch
            destination = args[0]
            if len(args) > 1:
                prefix = args[1]
            if len(args) > 2:
                keep_vars = args[2]
        if destination is None:
            destination = OrderedDict()
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=destination, prefix=prefix + name + ".",
                                  keep_vars=keep_vars)
        for hook in self._state_dict_hooks.values():
            res = hook(self, destination, prefix, {})
            if res is not None:
                destination = res
        return destination

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        persistent_buffers = {k: v for k, v in self._buffers.items()
                              if k not in self._non_persistent_buffers_set}
        local_state = {k: v for k, v in itertools.chain(self._parameters.items(),
                                                       persistent_buffers.items())
                       if v is not None}
        for name, param in local_state.items():
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            input_param = state_dict[key]
            if not isinstance(input_param, Tensor):  # (a numpy array too, as torch)
                error_msgs.append(
                    f'While copying the parameter named "{key}", expected torch.Tensor or '
                    f"Tensor-like object from checkpoint but received {type(input_param)}"
                )
                continue
            if tuple(input_param.shape) != tuple(param.shape):
                error_msgs.append(
                    f"size mismatch for {key}: copying a param with shape {input_param.shape} "
                    f"from checkpoint, the shape in current model is {param.shape}."
                )
                continue
            if local_metadata.get("assign_to_params_buffers"):
                if isinstance(param, Parameter):
                    if not isinstance(input_param, Parameter):
                        input_param = Parameter(input_param, requires_grad=param.requires_grad)
                    else:
                        input_param.requires_grad_(param.requires_grad)
                setattr(self, name, input_param)
                continue
            try:
                with grad_mode.no_grad():
                    param.copy_(input_param)
            except Exception as ex:
                error_msgs.append(
                    f'While copying the parameter named "{key}", whose dimensions in the model '
                    f"are {param.shape} and whose dimensions in the checkpoint are "
                    f"{input_param.shape}, an exception occurred : {ex.args}."
                )
        if strict:
            for key in state_dict.keys():
                if key.startswith(prefix):
                    input_name = key[len(prefix):].split(".", 1)
                    if len(input_name) > 1:
                        if input_name[0] not in self._modules:
                            unexpected_keys.append(key)
                    elif input_name[0] not in local_state:
                        unexpected_keys.append(key)

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copy parameters and buffers from ``state_dict`` into this module (in place, no_grad).

        Args:
            state_dict (Mapping[str, Tensor]): e.g. from :meth:`state_dict` or ``nbgrad.load``.
            strict (bool): require the keys to match exactly.
            assign (bool): put the checkpoint's tensors in the module instead of copying
                into the existing ones (parameters stay Parameters, keeping
                ``requires_grad``), as torch.

        Returns:
            NamedTuple ``(missing_keys, unexpected_keys)``.

        Raises:
            RuntimeError: ``Error(s) in loading state_dict for <Class>:`` followed by the missing
                keys, the unexpected keys (strict) and the size mismatches, as torch words them.
        """
        if not hasattr(state_dict, "keys"):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing_keys, unexpected_keys, error_msgs = [], [], []
        state_dict = OrderedDict(state_dict)

        def load(module, local_state_dict, prefix=""):
            module._load_from_state_dict(local_state_dict, prefix, {"assign_to_params_buffers":
                                                                    assign}, True,
                                         missing_keys, unexpected_keys, error_msgs)
            for name, child in module._modules.items():
                if child is not None:
                    child_prefix = prefix + name + "."
                    child_sd = {k: v for k, v in local_state_dict.items()
                                if k.startswith(child_prefix)}
                    load(child, child_sd, child_prefix)
            incompatible = _IncompatibleKeys(missing_keys, unexpected_keys)
            for hook in module._load_state_dict_post_hooks.values():
                hook(module, incompatible)

        load(self, state_dict)
        if strict:
            if unexpected_keys:
                error_msgs.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in unexpected_keys)))
            if missing_keys:
                error_msgs.insert(0, "Missing key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in missing_keys)))
        if error_msgs:
            raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(
                type(self).__name__, "\n\t".join(error_msgs)))
        return _IncompatibleKeys(missing_keys, unexpected_keys)

    # ------------------------------------------------------------------ repr
    def extra_repr(self):
        """The part of the repr inside the parentheses; layers override it (torch's hook)."""
        return ""

    def _get_name(self):
        return type(self).__name__

    def __repr__(self):
        extra_lines = []
        extra_repr = self.extra_repr()
        if extra_repr:
            extra_lines = extra_repr.split("\n")
        child_lines = []
        for key, module in self._modules.items():
            mod_str = _addindent(repr(module), 2)
            child_lines.append("(" + key + "): " + mod_str)
        lines = extra_lines + child_lines
        main_str = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                main_str += extra_lines[0]
            else:
                main_str += "\n  " + "\n  ".join(lines) + "\n"
        main_str += ")"
        return main_str

    def _shape_error(self, expected, x):
        """ValueError naming this layer, the expected and the given shape."""
        return ValueError(f"{self!r}: expected input {expected}, got {tuple(x.shape)}")


_NAMED_MODULES, _NAMED_PARAMETERS = Module.named_modules, Module.named_parameters


def zero_grads(params, set_to_none=True):
    """Reset `.grad` of each parameter: to None, or detached and zeroed in place (what
    Module.zero_grad and Optimizer.zero_grad both do)."""
    for p in params:
        if p.grad is not None:
            if set_to_none:
                p.grad = None
            else:
                g = p.grad
                if g.grad_fn is not None:
                    g.detach_()
                else:
                    g.requires_grad_(False)
                g.zero_()
