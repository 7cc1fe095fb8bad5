"""Module hooks below the Module class: the global hook tables (torch.nn.modules.module's
globals), RemovableHandle, and the full backward hooks' machinery (identity nodes
BackwardHookFunctionBackward on a module call's inputs and outputs)."""

from collections import OrderedDict

from nbgrad import autograd
from nbgrad.tensor import Tensor


# hooks run for every module (torch.nn.modules.module's globals); while none is registered a
# module call pays for one global truth test (module.py's _GLOBAL_HOOKS_ON, which the
# register_module_* functions there keep up to date)
_global_forward_pre_hooks = OrderedDict()
_global_forward_hooks = OrderedDict()
_global_forward_hooks_with_kwargs = {}
_global_backward_hooks = OrderedDict()
_global_backward_pre_hooks = OrderedDict()


class RemovableHandle:
    """Handle returned by ``register_forward_hook`` and friends; ``remove()`` unregisters the hook.

    Mirrors ``torch.utils.hooks.RemovableHandle`` (also usable as a context manager).
    """

    _next_id = 0

    def __init__(self, *hook_dicts):
        self.hook_dicts = hook_dicts
        self.id = RemovableHandle._next_id
        RemovableHandle._next_id += 1

    def remove(self):
        for d in self.hook_dicts:
            d.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def _add_hook(hooks, hook, prepend):
    handle = RemovableHandle(hooks)
    hooks[handle.id] = hook
    if prepend:
        hooks.move_to_end(handle.id, last=False)
    return handle


class _BackwardHooks:
    """One module call's full backward hooks: identity nodes (BackwardHookFunctionBackward, as
    torch) on the tensor inputs and outputs; the output node records grad_output (running the
    pre-hooks), the input node runs the hooks with (grad_input, grad_output)."""

    def __init__(self, module):
        self.module = module
        self.n_inputs = 0
        self.grad_output = None
        self.inputs_need_grad = False

    def _hooks(self):
        return list(_global_backward_hooks.values()) + list(self.module._backward_hooks.values())

    def wrap_inputs(self, args):
        positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        self.n_inputs = len(positions)
        self.inputs_need_grad = any(args[i].requires_grad for i in positions)
        if not self.inputs_need_grad:
            return args
        wrapped = _BackwardHookFunction.apply(*[args[i] for i in positions], self._on_input_grads)
        args = list(args)
        for i, w in zip(positions, wrapped):
            args[i] = w
        return tuple(args)

    def wrap_outputs(self, result):
        single = isinstance(result, Tensor)
        outs = (result,) if single else result
        if not isinstance(outs, tuple) or not any(
                isinstance(o, Tensor) and o.requires_grad for o in outs):
            return result
        positions = [i for i, o in enumerate(outs) if isinstance(o, Tensor)]
        wrapped = _BackwardHookFunction.apply(*[outs[i] for i in positions], self._on_output_grads)
        outs = list(outs)
        for i, w in zip(positions, wrapped):
            outs[i] = w
        return outs[0] if single else tuple(outs)

    def _on_output_grads(self, grads):
        for hook in list(_global_backward_pre_hooks.values()) + list(
                self.module._backward_pre_hooks.values()):
            res = hook(self.module, grads)
            if res is not None:
                grads = tuple(res) if isinstance(res, (tuple, list)) else (res,)
        self.grad_output = grads
        if not self.inputs_need_grad:
            import warnings
            warnings.warn(
                "Full backward hook is firing when gradients are computed with respect to "
                "module outputs since no inputs require gradients. See https://docs.pytorch.org/"
                "docs/main/generated/torch.nn.Module.html#torch.nn.Module."
                "register_full_backward_hook for more details.", stacklevel=2)
            for hook in self._hooks():
                hook(self.module, (None,) * self.n_inputs, grads)
        return grads

    def _on_input_grads(self, grads):
        for hook in self._hooks():
            res = hook(self.module, grads, self.grad_output)
            if res is not None:
                grads = tuple(res) if isinstance(res, (tuple, list)) else (res,)
        return grads


class _BackwardHookFunction(autograd.Function):
    """Identity on its tensors; its backward hands their gradients to a callback (the last
    argument: Function's backward pairs gradients with the leading tensor arguments)."""

    @staticmethod
    def forward(ctx, *tensors_and_callback):
        ctx.callback = tensors_and_callback[-1]
        return tuple(tensors_and_callback[:-1])

    @staticmethod
    def backward(ctx, *grads):
        return tuple(ctx.callback(grads)) + (None,)

_BackwardHookFunction.__name__ = "BackwardHookFunction"
