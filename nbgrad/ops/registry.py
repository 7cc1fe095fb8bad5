"""The Row schema of the op table, and the registry `ROWS` (name -> Row).

A row reads like a line of PyTorch's derivatives.yaml::

    op("mul", lambda self, other: self * other, broadcast=True,
       self=lambda g, other: g * other,
       other=lambda g, self: g * self)

- The forward takes backend arrays: first the tensor inputs, then the non-tensor arguments, with
  PyTorch's parameter names. The inputs are the forward's parameters that have a formula; the
  parameters after them are the row's arguments (`dim`, `keepdim`, ...).
- One formula per input, keyed by the input's name. A formula's first parameter is `g`, the
  gradient of the output (a list of them for rows with several outputs); the others name what it
  needs: inputs (`self`, `other`), `result` (`result1`, ... for further outputs), arguments,
  `<input>_shape`, `<input>_strides` (in elements), `xp` (the array module) or `needs` (which
  inputs want a gradient). The node
  saves exactly what the formulas of the inputs that require grad name — `x * 2` saves only
  `other` — as SavedTensors that check their version when unpacked.
- Inputs whose gradients come out of one computation share a formula keyed by all their names,
  `**{"input, weight, bias": lambda g, ...: (gi, gw, gb)}`, as derivatives.yaml writes them.
- The node is named after the op (`log_softmax` -> LogSoftmaxBackward0); `node=` gives PyTorch's
  name where it is irregular (`sum_dim` -> SumBackward1).
- A list input (cat, stack) is the forward's parameter `tensors`; its formula, keyed `tensors`,
  returns one gradient per tensor.
- Flags: `broadcast` (inputs may broadcast or differ in dtype; the node sums each gradient back
  to its input's shape and casts it to its dtype), `float_op` (integer input is computed in the
  default float dtype), `view` (the output shares the input's storage), `n_out` (number of
  outputs; -1: a list decided at call time), `ctx` (the forward returns `(output, ctx)`: what an
  array kernel keeps for its backward, named `ctx` in formulas and kept in a `Ctx`),
  `ctx_saves` (`(ctx value, inputs, args) -> arrays`: the extra outputs PyTorch's kernel saves
  that the Ctx holds, layer_norm's mean and rstd; used only to pack them under
  saved_tensors_hooks, as PyTorch packs them).
- `double` (rows with one input): PyTorch computes this row's gradient with a backward op of its
  own (tanh_backward, slice_backward), so a gradient built under create_graph has that op's node
  (TanhBackwardBackward0). A dict gives the op as a row of its own: `node=` its name, then one
  formula per input of it, keyed by the names this row's formula reads (`g`: the incoming
  gradient; `"again"`: the op itself applied to the new gradient, as threshold_backward's),
  `saved=` PyTorch's names of its saved values; `xp.backward_op(name, ...)` applies it. A name
  alone: one node of that name whose backward differentiates this row's formula.
  Rows whose gradient PyTorch writes with ordinary ops get those ops' nodes from the formula
  itself, run on Tensors (`xp`: mul_scalar is MulBackward1, unsqueeze_dims, ...).
"""
from __future__ import annotations

import operator

import numpy as np

from ..autograd.graph import FREED, RELEASABLE, UNPACKED, Ctx, Node, SavedArray, SavedTensor, _Rare  # noqa: F401  (Ctx: for the table)
from ..autograd.saved_index import SavedIndex, SavedIndices
from ..autograd.apply import (_F32, _F64, _ZD32, _ZD64, PATH_BINARY, PATH_GENERAL, PATH_UNARY,
                              PATH_VIEW, _zero_d, apply)
from ..autograd.grad_mode import GENERAL_PATH
from ..autograd.record import (SAVED_ARG, SAVED_CTX, SAVED_INPUT, SAVED_OUTPUT, SAVED_SHAPE,
                               SAVED_STRIDES, _edge)
from ..autograd.grad_mode import STATE as _GRAD
from ..naming import named
from ..tensor import Tensor
from .formulas import NUMPY, ROWS, TENSORS, array_formulas
from .derivatives import _reduce_to
_ND = np.ndarray
_NUMBERS = (int, float, bool)
_FAST = not GENERAL_PATH  # the written-out unpack of OpNode._backward (NBGRAD_GENERAL_PATH=1: off)


def _array_arg(x):
    """Whether a saved argument is an index or mask array (or a tuple holding one)."""
    t = type(x)
    if t is tuple:
        return any(type(i) is _ND or hasattr(i, "__cuda_array_interface__") for i in x)
    return t is _ND or hasattr(x, "__cuda_array_interface__")


class OpNode(Node):
    """A node made by a table row; its class (e.g. MulBackward0) carries the row."""

    __slots__ = ()
    _row = None

    def _backward(self, g, create_graph):
        __tracebackhide__ = True
        row = self._row
        if not create_graph and self._n_out == 1:
            xp = NUMPY if type(g) is _ND else array_formulas(g)
        elif create_graph:
            if row.double_row is not None:
                return [_apply_double(self, g)]
            if row.double is not None:
                return _double_node(self, g)
            xp = TENSORS
        else:
            g = list(g)
            xp = array_formulas(next(x for x in g if x is not None))
        # what the formulas index: xp, needs (joint formulas only), then the saved values in
        # the row's order, unpacked (hooks run) in the order they were packed, as PyTorch's
        saved = self._saved
        if saved is None:
            v = [xp, None]
        else:
            v = [xp, None, *saved]
            for j in row.unpack_at:
                s = v[j]
                t = type(s)
                if t is SavedTensor and _FAST and not create_graph and s._packed is None:
                    # SavedTensor.unpack below, written out for a saved array with no hooks
                    d = s._data
                    if d is not None and s._storage.version == s.saved_version:
                        v[j] = d
                        continue
                if t in UNPACKED:
                    v[j] = s.unpack(self, create_graph)
                elif t is float and row.scalar_as_0d and xp is NUMPY:
                    # x * 2.0's other, as in the forward: the cached 0-d array (apply._zero_d)
                    dt = g.dtype
                    z = (_ZD32.get(s) if dt is _F32 else _ZD64.get(s) if dt is _F64 else None)
                    v[j] = _zero_d(s, dt) if z is None else z
        if row.n_out == -1 and self._n_out == 1:  # unbind/split with one output: still a list
            g = [g]
        outs = row.grads(self._next, g, v)  # each input's gradient, None without an edge
        rare = self._site  # (meta: set only for a broadcasting op, kept there with the hooks)
        if type(rare) is _Rare and rare.meta is not None:
            for i, m in enumerate(rare.meta):
                if m is not None and outs[i] is not None:
                    outs[i] = _reduce_to(outs[i], m[0], m[1], xp)
        return outs

    def _release(self):
        """Free the saved tensors. A saved Python number (x * 2's `other`) and a saved index or
        mask array (gather's `index`) become FREED, so a second backward fails as PyTorch's does
        (it saves both as tensors)."""
        saved = self._saved
        if saved is None:
            return
        kinds = self._row.slot_kinds
        freed = None
        j = 0
        for s in saved:
            if s is not None:
                t = type(s)
                if t is SavedTensor:  # (SavedTensor.release, written out: most nodes save one)
                    s._data = s._packed = s._tensor = s._storage = None
                elif t is Ctx or t is SavedArray or t is SavedIndex or t is SavedIndices:
                    s.release()
                elif (t is float or t is int or t is bool) if kinds[j] == SAVED_INPUT else (
                        kinds[j] == SAVED_ARG and t is not int and t is not float
                        and _array_arg(s)):
                    if freed is None:
                        freed = list(saved)
                    freed[j] = FREED
            j += 1
        if freed is not None:
            self._saved = tuple(freed)

    def __dir__(self):
        # the saved values under torch's names (a kept shape is `_saved_self_sym_sizes`); the
        # slot `_saved` and `_saved_tensors` answer but are not listed, as in torch
        row = type(self)._row
        shown = {SAVED_SHAPE: "_sym_sizes", SAVED_STRIDES: "_sym_strides"}
        saved = {f"_saved_{n[:n.rindex('_')] + shown[src[0]] if src[0] in shown else n}"
                 for n, src in zip(row.names, row.sources)}
        own = {n for n in super().__dir__()  # (less the properties of _expose_saved)
               if not n.startswith(("_saved_", "_raw_saved_"))}
        return sorted(own - {"_saved", "_saved_tensors"} | saved |
                      {f"_raw_saved_{n}" for n, src in zip(row.names, row.sources)
                       if src[0] in (SAVED_INPUT, SAVED_OUTPUT)})

    def _kept_value(self, name):
        """The attribute `name` (`_saved_<name>`, `_raw_saved_<name>`: the properties
        `_expose_saved` puts on the row's node class)."""
        if name.startswith("_raw_saved_"):  # the SavedTensor object itself (torch's)
            row = type(self)._row
            key = name[11:]
            if key in row.index and \
                    row.sources[row.index[key]][0] in (SAVED_INPUT, SAVED_OUTPUT):  # a tensor
                s = self._saved[row.index[key]] if self._saved else None
                return SavedTensor._undefined(key) if s is None else s
        if name.startswith("_saved_"):
            row = type(self)._row
            key = name[7:]
            key = row.aliases.get(key, key)
            if key.endswith("_sym_sizes"):
                key = key[:-10] + "_shape"
            elif key.endswith("_sym_strides"):
                key = key[:-12] + "_strides"
            if key in row.index:
                s = self._saved[row.index[key]] if self._saved else None
                if type(s) is SavedTensor:
                    return s.unpack(self, True)
                if type(s) is SavedIndex:  # the index tensor, after the version check
                    s.unpack(self)
                    return s._tensor
                if type(s) is SavedIndices:
                    s.unpack(self)
                    return tuple(i._tensor if type(i) is SavedIndex else i for i in s.items)
                if s is FREED:
                    s.unpack(self)
                if isinstance(s, np.ndarray) or (key in row.inputs and s is not None):
                    return Tensor._make_fresh(np.asarray(s))
                return s
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")


def _expose_saved(row):
    """Put the saved values' attributes on `row`'s node class as properties: `_saved_<name>`
    under the row's names, PyTorch's aliases and `_sym_sizes` / `_sym_strides` for a kept shape or
    strides, and `_raw_saved_<name>` (all read by `OpNode._kept_value`). Properties, not a
    `__getattr__`: a class with `__getattr__` loses CPython's specialized attribute loads for every
    attribute of its instances (a node's `_next`, `_saved`, ... read ~5x slower in the engine)."""
    names = set()
    for n in row.index:
        names.add("_saved_" + n)
        names.add("_raw_saved_" + n)
        if n.endswith("_shape"):
            names.add(f"_saved_{n[:-6]}_sym_sizes")
        elif n.endswith("_strides"):
            names.add(f"_saved_{n[:-8]}_sym_strides")
    names.update("_saved_" + a for a in row.aliases)
    cls = row.node
    for name in names:
        if name not in ("_saved_tensors",) and not hasattr(Node, name):
            setattr(cls, name, property(lambda self, _n=name: self._kept_value(_n)))


def _apply_double(node, g):
    """The gradient of `node`'s input under create_graph, for a row whose `double` gives the
    formulas of PyTorch's backward op (slice_backward, threshold_backward): that op applied as a
    row of its own to `g` and the saved values, so its node has PyTorch's name and inputs, and
    the node's own backward runs those formulas."""
    row = node._row
    d = row.double_row
    saved = node._saved or ()
    index = row.index
    vals = [g]
    for n in d.order[1:]:
        s = saved[index[n]]
        # (a kernel's Ctx: a copy, which the new node releases on its own)
        vals.append(s.unpack(node, True) if type(s) in UNPACKED else
                    Ctx(s.get()) if type(s) is Ctx else s)
    k = len(d.inputs)
    return apply(d, tuple(vals[:k]), tuple(vals[k:]))


def _double_row(parent, spec):
    """The row of PyTorch's backward op of `parent` (one input): its forward is `parent`'s
    formula; `spec` gives the node name and a formula per input of it, keyed by the names the
    parent's formula reads (`g` for the incoming gradient). Its inputs are those keyed, in the
    formula's order, then the rest are its arguments."""
    spec = dict(spec)
    node = spec.pop("node")
    aliases = dict(spec.pop("saved", {}), grad_output="g")  # PyTorch's names of what it saves
    f = parent.formulas[0]
    names = [n for n in _params(f) if n not in _SPECIAL]
    if names[0] != "g" or not set(spec) <= set(names):
        raise TypeError(f"row {parent.name}: `double` formulas are keyed by the names its "
                        f"formula reads {names}, and `g` first")
    order = [n for n in names if n in spec] + [n for n in names if n not in spec]
    if spec["g"] == "again":
        spec["g"] = _again(parent.name, order[1:])
    wants_xp = "xp" in _params(f)

    def fwd(*vals):
        kw = dict(zip(order, vals))
        if wants_xp:
            kw["xp"] = array_formulas(vals[0])
        return f(**kw)

    d = Row(parent.name + "_backward", named(fwd, parent.name + "_backward"), spec, node=node,
            params=tuple(order))
    d.order = tuple(order)
    d.aliases = aliases
    _expose_saved(d)
    return d


def _self_adjoint(node):
    """`double` of a row whose backward op (threshold_backward(grad, self, threshold)) is, in
    the incoming gradient, that op again, and has zero derivative in `self` (PyTorch's
    zeros_like(grad))."""
    return dict(node=node, g="again", self=lambda gg, xp: xp.zeros_like(gg))


def _again(name, names):
    """The formula `g="again"` of a double row: row `name`'s backward op applied again, to the
    new gradient `gg` and the same saved values (`names`, in the row's order). Its parameters
    are declared in `params`, which `_params` reads before a code object's: `gg`, the names,
    then `xp`, as a written formula would have them."""
    def again(gg, *vals):  # vals: the saved values, then xp
        return vals[-1].backward_op(name, gg, *vals[:-1])
    again.params = ("gg",) + tuple(names) + ("xp",)
    return named(again, name + "_backward_again")


def _double_node(node, g):
    """The gradient of `node`'s input under create_graph, for a row whose formula PyTorch runs
    as one op (tanh_backward): computed without recording, then hung on one node named as
    PyTorch's (TanhBackwardBackward0) whose inputs are `g` and the saved tensors the formula
    reads, in that order."""
    row = node._row
    vals = [s.unpack(node, True) if type(s) in UNPACKED else s for s in node._saved or ()]
    prev = _GRAD.enabled
    _GRAD.enabled = False
    try:
        out = row.calls[0](row.formulas[0], g, [TENSORS, None] + vals)
    finally:
        _GRAD.enabled = prev
    tensors = [g] + [x for x in vals if isinstance(x, Tensor)]
    edges = tuple(_edge(t) for t in tensors)
    if all(c is None for c, _ in edges):
        return [out]
    # a kernel's Ctx is shared with `node`: the double node keeps its own (each releases its
    # own, as PyTorch's nodes each hold their saved variables)
    saved = (SavedTensor("grad_output", g),) + tuple(
        SavedTensor(n, x) if isinstance(x, Tensor) else Ctx(x.value) if type(x) is Ctx else x
        for n, x in zip(row.names, vals))
    dn = object.__new__(row.double)
    Node.__init__(dn, edges, saved)
    out._grad_fn, out._output_nr, out._requires_grad = dn, 0, True
    return [out]


class DoubleNode(Node):
    """A gradient computed under create_graph by a row with `double` (see _double_node). Its
    backward runs the row's formula again on Tensors and differentiates that."""

    __slots__ = ()
    _row = None

    def _backward(self, gg, create_graph):
        from ..autograd.engine import run_backward
        row = self._row
        saved = self._saved
        vals = [s.unpack(self, True) if type(s) in UNPACKED else s for s in saved]
        edges = iter(self._next)
        targets = []
        prev = _GRAD.enabled
        _GRAD.enabled = True
        try:
            for i, x in enumerate(vals):
                # each input that wants a gradient enters through an alias (a view of it), and
                # the gradient is taken at the alias: the partial derivative, not the paths
                # through its own history (the engine running this node follows those)
                if isinstance(x, Tensor) and next(edges)[0] is not None:
                    vals[i] = x.view_as(x)
                    targets.append(vals[i])
            out = row.calls[0](row.formulas[0], vals[0], [TENSORS, None] + vals[1:])
        finally:
            _GRAD.enabled = prev
        if not out.requires_grad:
            return [None] * len(self._next)
        if not isinstance(gg, Tensor):
            gg = Tensor._make_fresh(gg)
        res = iter(run_backward([out], [gg], None, create_graph, inputs=targets,
                                allow_unused=True, accumulate=False, api="grad"))
        grads = [None if c is None else next(res) for c, _ in self._next]
        return grads if create_graph else [None if r is None else r._data for r in grads]

    def __getattr__(self, name):
        if name.startswith("_saved_"):
            key = name[7:]
            for s in self._saved:
                if type(s) is SavedTensor and s.name == key:
                    return s.unpack(self, True)
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")


def node_name(op_name):
    """PyTorch's regular node name for an op: 'log_softmax' -> 'LogSoftmaxBackward0'."""
    return "".join(p[:1].upper() + p[1:] for p in op_name.split("_")) + "Backward0"


def _params(f):
    """The parameter names of a forward or formula: its declared `params` (a formula made by a
    function, `_again`), else its code's positional parameters."""
    declared = getattr(f, "params", None)
    if declared is not None:
        return declared
    code = f.__code__
    return code.co_varnames[:code.co_argcount]


def _caller(idx):
    """Call a formula with g and the values at positions `idx` of the unpacked list (no eval:
    a closure per arity, as cheap as the trampoline it replaces)."""
    n = len(idx)
    if n == 0:
        return lambda f, g, v: f(g)
    if n == 1:
        i, = idx
        return lambda f, g, v: f(g, v[i])
    if n == 2:
        i, j = idx
        return lambda f, g, v: f(g, v[i], v[j])
    if n == 3:
        i, j, k = idx
        return lambda f, g, v: f(g, v[i], v[j], v[k])
    get = operator.itemgetter(*idx)
    return lambda f, g, v: f(g, *get(v))


def _bound(f, idx):
    """Formula `f` called with g and the values at positions `idx` of the unpacked list: `(g,
    v) -> gradient` (None for an input without a formula)."""
    if f is None:
        return lambda g, v: None
    n = len(idx)  # (the formula called directly: one frame, not two through _caller's)
    if n == 0:
        return lambda g, v: f(g)
    if n == 1:
        i, = idx
        return lambda g, v: f(g, v[i])
    if n == 2:
        i, j = idx
        return lambda g, v: f(g, v[i], v[j])
    call = _caller(idx)
    return lambda g, v: call(f, g, v)


def _grads(formulas, joint, idxs):
    """`(next_functions, g, v) -> [gradient per input]`, made once per row (`Row.grads`, what
    OpNode._backward calls): each input's formula called with g and the values at its positions
    `idxs` of the unpacked list `v`, None for an input whose edge is None; or the row's joint
    formula (its positions last in `idxs`). A closure per count of inputs (one, two: no loop,
    and for one input the formula called directly), a loop for more."""
    if len(formulas) == 1 and joint is None:
        f, = formulas
        idx = idxs[0]
        n = len(idx)
        if f is None:
            return lambda nxt, g, v: [None]
        if n == 0:
            return lambda nxt, g, v: [f(g)]
        if n == 1:
            i, = idx
            return lambda nxt, g, v: [f(g, v[i])]
        if n == 2:
            i, j = idx
            return lambda nxt, g, v: [f(g, v[i], v[j])]
        call = _caller(idx)
        return lambda nxt, g, v: [call(f, g, v)]
    if joint is not None:  # one formula for all inputs, told which want a gradient (`needs`)
        call = _caller(idxs[-1])

        def grads(nxt, g, v):
            v[1] = tuple(c is not None for c, _ in nxt)
            return list(call(joint, g, v))
        return grads
    bound = tuple(_bound(f, idx) for f, idx in zip(formulas, idxs))
    if len(bound) == 2:
        b0, b1 = bound
        return lambda nxt, g, v: [None if nxt[0][0] is None else b0(g, v),
                                  None if nxt[1][0] is None else b1(g, v)]

    def grads(nxt, g, v):
        return [None if c is None else b(g, v) for (c, _), b in zip(nxt, bound)]
    return grads


_SPECIAL = ("xp", "needs")


class Row:
    """One op: forward, node class, and per-input derivative formulas (see the module doc)."""

    def __init__(self, name, fwd, formulas, node=None, n_out=1, view=False, broadcast=False,
                 float_op=False, ctx=False, double=None, params=None, ctx_saves=None,
                 scalar_as_0d=False, inplace_ufunc=None, overlap_check="partial",
                 unchecked_write=False):
        self.name = name
        self.fwd = fwd
        self.n_out = n_out
        self.view = view
        self.broadcast = broadcast
        self.float_op = float_op
        self.ctx = ctx
        self.ctx_saves = ctx_saves
        keyed = {}
        self.joint = None
        joint_inputs = ()
        for key, f in formulas.items():
            parts = tuple(s.strip() for s in key.split(","))
            if len(parts) > 1 or key == "tensors":  # several inputs, or a list of them (cat)
                if self.joint is not None:
                    raise TypeError(f"row {name}: one joint formula at most")
                self.joint, joint_inputs = f, parts
            else:
                keyed[key] = f
        names_of_inputs = set(keyed) | set(joint_inputs)
        if params is None and hasattr(fwd, "__code__"):
            params = _params(fwd)
        if params is None:  # a numpy function: the formulas' keys are its inputs
            self.inputs, self.args = tuple(keyed) or joint_inputs, ()
        else:
            k = 0
            while k < len(params) and params[k] in names_of_inputs:
                k += 1
            self.inputs, self.args = params[:k], params[k:]
            if set(self.inputs) != names_of_inputs:
                raise TypeError(f"row {name}: formulas for {sorted(names_of_inputs)} but the "
                                f"forward's leading parameters are {list(params)}")
        self.listed = self.inputs == ("tensors",)
        if self.listed:
            self.inputs = ()  # one edge per tensor of the list, all served by the joint formula
        # which branch of nbgrad.autograd.apply serves it (PATH_* there)
        self.path = (PATH_VIEW if view else
                     PATH_BINARY if broadcast and len(self.inputs) == 2 else
                     PATH_UNARY if len(self.inputs) == 1 and n_out == 1 and not self.listed else
                     PATH_GENERAL)
        self.formulas = tuple(keyed.get(n) for n in self.inputs)
        names, uses = [], []
        for f in self.formulas + ((self.joint,) if self.joint else ()):
            used = _params(f)[1:] if f else ()
            uses.append(used)
            for n in used:
                if n not in _SPECIAL and n not in names:
                    names.append(n)
        self.names = tuple(names)
        self.index = {n: i for i, n in enumerate(names)}
        self.sources = tuple(self._source(n) for n in names)
        pos = {n: i + 2 for i, n in enumerate(names)}  # OpNode._backward's list: xp, needs, saved
        pos.update(xp=0, needs=1)
        self.calls = tuple(_caller([pos[n] for n in u]) if f else None
                           for f, u in zip(self.formulas, uses))
        self.grads = _grads(self.formulas, self.joint, [[pos[n] for n in u] for u in uses])
        self.single = self.joint is None and len(self.formulas) == 1
        self.uses = uses
        # a Python float operand becomes a cached 0-d array of the tensor's dtype, in the forward
        # and when a saved one meets g (nbgrad.autograd.apply._zero_d: the ufunc is faster)
        self.scalar_as_0d = scalar_as_0d
        # the numpy ufunc that writes the in-place form straight into the target (add_: np.add)
        self.inplace_ufunc = inplace_ufunc
        # an in-place op's input sharing the target's storage: "partial" refuses a partial
        # overlap (the very same elements are fine), "any" refuses the very same elements too
        # (index_put_, but a masked fill), "same_is_noop" does nothing for them (copy_)
        if overlap_check not in ("partial", "any", "same_is_noop"):
            raise TypeError(f"row {name}: overlap_check={overlap_check!r}")
        self.overlap_check = overlap_check
        # written without PyTorch's check of the target for internal overlap (fill_, zero_, ...)
        self.unchecked_write = unchecked_write
        self.slot_kinds = tuple(kind for kind, _ in self.sources)  # (OpNode._release)
        # the order saved values are packed and unpacked in under saved_tensors_hooks (PyTorch's:
        # inputs by name, then outputs; a kernel's ctx holds outputs); None: the saved order
        order = tuple(sorted(range(len(names)), key=lambda j: (
            self.sources[j][0] == SAVED_OUTPUT or names[j] == "ctx", names[j])))
        self.unpack_order = None if order == tuple(range(len(names))) else order
        self.unpack_at = tuple(j + 2 for j in order  # (OpNode._backward's list: xp, needs, saved)
                               if self.sources[j][0] not in (SAVED_SHAPE, SAVED_STRIDES))
        self.plans = {}
        self.savers = {}  # mask -> what makes the saved tuple (nbgrad.autograd.record._saver)
        # `double`: PyTorch runs this row's formula as one op with its own derivative
        # (tanh_backward): under create_graph the gradient is one node of that name. A name
        # alone: that node's backward differentiates the formula (DoubleNode); a dict (the
        # node's name and a formula per input of the backward op): a row of its own
        if double is not None and not (self.single and not broadcast and n_out == 1):
            raise TypeError(f"row {name}: `double` needs one input, no broadcasting")
        self.aliases = {}  # `_saved_<name>` attributes under PyTorch's names: theirs -> ours
        self.double_spec = double
        self.double = self.double_row = None
        if isinstance(double, dict):
            self.double_row = _double_row(self, double)
        elif double is not None:
            self.double = type(double, (DoubleNode,), {"__slots__": (), "_row": self})
        self.node = type(node or node_name(name), (OpNode,),
                         {"__slots__": (), "_row": self, "_n_out": n_out})
        _expose_saved(self)

    def vjp(self, i, g, *saved):
        """Input `i`'s first-order formula on numpy arrays, given the row's saved values in its
        order: what a node of this row computes for that input, without the node (a fused
        chain's backward, nbgrad.autograd.fused)."""
        return self.calls[i](self.formulas[i], g, [NUMPY, None, *saved])

    def _source(self, n):
        """`(kind, k)` of a name a formula uses (SAVED_* in nbgrad.autograd.record)."""
        if n in self.inputs:
            return (SAVED_INPUT, self.inputs.index(n))
        if n == "result":
            return (SAVED_OUTPUT, 0)
        if n.startswith("result") and n[6:].isdigit():
            return (SAVED_OUTPUT, int(n[6:]))
        if n in self.args:
            return (SAVED_ARG, self.args.index(n))
        if n.endswith("_shape") and n[:-6] in self.inputs:
            return (SAVED_SHAPE, self.inputs.index(n[:-6]))
        if n.endswith("_strides") and n[:-8] in self.inputs:  # in elements, as torch's
            return (SAVED_STRIDES, self.inputs.index(n[:-8]))
        if n == "ctx" and self.ctx:
            return (SAVED_CTX, 0)
        raise NameError(f"formula of {self.name} uses unknown name {n!r}")

    def plan(self, mask):
        """What to save when the inputs in bitmask `mask` require grad: per name to save,
        `(index, kind, k, name)` with `(kind, k)` from `sources`."""
        p = self.plans.get(mask)
        if p is None:
            need = set()
            if self.joint is not None:
                need.update(self.uses[-1])
            else:
                for i, used in enumerate(self.uses):
                    if mask >> i & 1:
                        need.update(used)
                # outputs are saved whichever inputs want a gradient, as torch's generated code
                # saves them (pow(x, t)'s result, read by t's formula: a write into it fails)
                need.update(n for n, (kind, _) in zip(self.names, self.sources)
                            if kind == SAVED_OUTPUT)
            p = self.plans[mask] = tuple((j, *self.sources[j], n)
                                         for j, n in enumerate(self.names) if n in need)
        return p

    def __repr__(self):
        return f"<Row {self.name}: {self.node.__name__}({', '.join(self.inputs)})>"


_FLAGS = ("node", "n_out", "view", "broadcast", "float_op", "ctx", "double", "ctx_saves",
          "scalar_as_0d", "inplace_ufunc", "overlap_check", "unchecked_write")


def op(name, fwd, **kw):
    """Define a row and register it under `name` (see the module doc); returns the Row.

    Keyword arguments are the flags (node, n_out, view, broadcast, float_op, ctx, double,
    ctx_saves, scalar_as_0d, inplace_ufunc, overlap_check, unchecked_write) and, for every
    other key, the formula of the input(s) it names;
    `grad_version=n`: PyTorch's formula writes its gradients in place n times (zeros, then
    index_put_ or scatter_), so they have _version n (the engine starts their count there)."""
    if name in ROWS:
        raise KeyError(f"op row {name!r} is defined twice")
    grad_version = kw.pop("grad_version", 0)
    flags = {k: kw.pop(k) for k in _FLAGS if k in kw}
    row = ROWS[name] = Row(name, fwd, kw, **flags)
    if grad_version:
        row.node._grad_version = grad_version
    return row
