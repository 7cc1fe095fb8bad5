"""The Tensor methods the torch.* functions declare: ``@method`` beside a function's definition
(or ``name = method(fn, "name", "alias")`` for a generated one or an alias) records it here;
nbgrad/functions/bind.py puts every recorded function onto Tensor once, at import."""
from __future__ import annotations

METHODS = {}  # Tensor method name -> the function itself (no wrapper: no extra call per use)


def method(fn, *names):
    """Declare ``fn`` as the Tensor method(s) ``names`` (default: its ``__name__``); returns
    ``fn`` unchanged, so it serves as a decorator."""
    for name in names or (fn.__name__,):
        METHODS[name] = fn
    return fn
