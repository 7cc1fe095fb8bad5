"""What the panel shows for a model: module structure, gradient flow, the bugs models have.

A :class:`ModelTracker` lives while the extension is loaded. It records, as plain numbers and weak
references only:

- per ``nn.Module`` call (global forward pre/post hooks, torch's
  ``register_module_forward_pre_hook`` / ``register_module_forward_hook``): the range of graph-node
  sequence numbers (``node._seq``) made inside it, whether grad mode was on, whether its output
  requires grad, and whether one of its inputs was cut from a graph a sibling call made (a
  ``.detach()``, ``.data``, a numpy round trip);
- per parameter (a tensor hook, the public ``register_hook``): the norm and fraction of exact zeros
  of each gradient, the update/weight ratio between two backward calls (the optimizer step), and
  gradients accumulated by a second backward without ``zero_grad``;
- per loss module call: the loss value, and a target that broadcasts against the input.

:func:`report` turns that, the namespace and a snapshot into a :class:`ModelReport` after a cell;
:func:`fold` rewrites a snapshot with modules folded to one box each. Nothing here holds a tensor.
"""

from __future__ import annotations

import math
import warnings
import weakref
from collections import deque
from dataclasses import dataclass, field, replace

import numpy as np

from . import adapter as A

HISTORY = 100  # gradient norms / ratios kept per parameter (the sparkline)
MAX_CALLS = 4096  # module calls remembered (enough for the last steps of a loop)
MAX_STEPS = 5000  # per-step loss / grad-norm values kept for one cell's curves
WATCH_BACKWARDS = 1  # a cell's module hooks stay on until this many backward calls were seen
WATCH_CALLS = 16  # ... or this many top-level module calls (an evaluation loop)
SAMPLE_EVERY = 50  # training steps between two gradient samples after that
LOOP_STEPS = 5  # a cell with at least this many backward calls is a training-loop cell
KEEP_NOTE = 5  # a container that newly holds this many graphs gets a note
FOLD_ABOVE = 40  # graphs with more nodes start with their modules folded
_CONTAINER_ITEMS = 10000  # items of one list / dict looked at for graphs kept alive
_WALK_NODES = 50000  # graph nodes walked per cell for the bytes those graphs hold
_BROADCAST_LOSSES = ("MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss")
_MODE_LAYERS = ("Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "BatchNorm1d",
                "BatchNorm2d", "BatchNorm3d")


def _module_api():
    from nbgrad.nn.modules import module as m

    return m


@dataclass
class Call:
    """One module call: nodes with ``start < _seq <= end`` were made inside it."""

    start: int
    end: int
    ref: object  # weakref to the module
    cls: str
    where: object  # raw provenance capture of the user line that called it
    grad_on: bool
    out_requires_grad: bool
    cell: int
    cut: tuple | None = None  # (where raw, "shared" | "copy"): an input cut from a sibling's graph


@dataclass
class ParamStat:
    """What the tracker saw of one parameter's gradients (no tensor: a weak reference)."""

    ref: object
    module: object  # weakref to the module owning it
    norms: deque = field(default_factory=lambda: deque(maxlen=HISTORY))
    ratios: deque = field(default_factory=lambda: deque(maxlen=HISTORY))
    zeros: float = 0.0
    prev: object = None  # the weights before the optimizer step after a watched backward
    accumulated: int = 0  # watched backward calls summed into .grad since it was last reset
    max_accumulated: int = 0  # the most seen this cell
    hits: int = 0  # watched backward calls this cell
    missed: bool = False  # backward calls ran unwatched since .grad was last reset
    nonfinite: bool = False
    armed: object = None  # the handle of its one-shot gradient hook, while armed
    sample: int = 0  # the arming it belongs to (the gradient norms of one step are summed)
    prev_nodes: int = 0  # the engine's node count when ``prev`` was copied
    summed_into: object = None  # weakref to the .grad a watched backward summed into
    summed_at: int = 0  # the training step of that backward
    hook: object = None  # its gradient hook function (made once)


class ModelTracker:
    """The hooks of the model panel; ``install()`` / ``uninstall()`` with the extension.

    Cost: module hooks are on in a cell until ``WATCH_BACKWARDS`` backward calls were seen, or
    ``WATCH_CALLS`` top-level module calls (the first training steps are *watched*: module calls
    and their node-number ranges,
    provenance, cut inputs, modes, one-shot gradient hooks on every parameter, the update ratio
    at the next step). After that a step costs one forward pre-hook on each trained model
    (counting steps, noting mode mix-ups; every ``SAMPLE_EVERY``-th step arms the one-shot
    gradient hooks again) and one forward hook on each loss module (its value). Module clusters
    of a later step come from the watched step's, matched by node names.
    """

    def __init__(self):
        self.calls: deque = deque(maxlen=MAX_CALLS)
        self.n_calls = 0  # calls ever appended to self.calls
        self.pending_ratio: list = []  # stats whose weights were copied before a step
        self.params: dict[int, ParamStat] = {}  # id(param) -> stat
        self.templates: dict = {}  # id(root module) -> (nodes made, [Call] relative, names)
        self.roots: dict = {}  # id(model or layer) -> handle of its counting / mode hook
        self.mode_layers: dict = {}  # id(Dropout / BatchNorm layer) -> weakref to its model
        self.samples = 0  # armings so far
        self.loss_hooks: dict = {}  # id(loss module) -> handle of its hook reading the loss
        self._mods: weakref.WeakSet = weakref.WeakSet()  # modules hooked one by one
        self._on: dict = {}  # id(module) or "global" -> (pre handle, post handle)
        self.enabled = False
        self._counter = self._grad_on = None  # readers of the engine's node counter, grad mode
        self.global_hooks = False
        self.cell = 0
        self.kept: dict = {}  # container name -> graphs it kept alive at the last report
        self.reset_cell()

    # -- lifecycle ----------------------------------------------------------------------------

    def install(self) -> None:
        self._counter = A.node_counter()
        self._grad_on = A.grad_enabled()
        self.global_hooks = hasattr(_module_api(), "register_module_forward_pre_hook")
        self._install_warnings()
        self._enable()

    def watch(self, modules) -> None:
        """Without nn's global hooks: the modules (and submodules) to hook one by one."""
        if self.global_hooks:
            return
        for top in modules:
            for mod in _submodules(top):
                self._mods.add(mod)
        if self.enabled:
            self._enable()

    def _enable(self) -> None:
        if self.global_hooks:
            if "global" not in self._on:
                m = _module_api()
                self._on["global"] = (m.register_module_forward_pre_hook(self._pre),
                                      m.register_module_forward_hook(self._post))
        else:
            for mod in list(self._mods):
                if id(mod) not in self._on:
                    self._on[id(mod)] = (mod.register_forward_pre_hook(self._pre),
                                         mod.register_forward_hook(self._post))
        self.enabled = True

    def _disable(self) -> None:
        for handles in self._on.values():
            for h in handles:
                try:
                    h.remove()
                except Exception:  # noqa: BLE001 - a handle of a module already gone
                    pass
        self._on = {}
        self.enabled = False
        self.depth = 0

    def uninstall(self) -> None:
        self._disable()
        self._mods = weakref.WeakSet()
        self._disarm()
        for h in [*self.roots.values(), *self.loss_hooks.values()]:
            h.remove()
        self.roots.clear()
        self.mode_layers.clear()
        self.loss_hooks.clear()
        self._uninstall_warnings()
        self.params.clear()
        self.calls.clear()

    def reset_cell(self) -> None:
        """Called before each cell: per-cell counters start again, and watching."""
        self.cell += 1
        self.depth = 0
        self.roots_seen = 0
        self.steps: dict = {}  # id(trained model) -> its calls with grad this cell
        self.loss_steps = 0  # loss-module outputs with grad this cell
        self.trained: dict = {}  # id(model) -> weakref: the models armed this cell
        self.backward_seen = False
        self.watched_backwards = 0  # backward calls the one-shot hooks saw this cell
        self.last_sample = 0
        self.frames = [_Frame(0, True, None)]  # the cell itself is the root frame
        self.losses: list = []  # the loss of every step (loss modules' outputs)
        self.step_norms: list = []  # [(top-level call index, total squared grad norm)]
        self.notes: dict = {}  # key -> text, in order
        self.eval_forward: dict = {}  # id(model) -> (weakref, where): forward in eval, grad on
        for st in self.params.values():
            st.hits = 0
            st.max_accumulated = 0
        if self._counter is not None and not self.enabled:
            self._enable()

    # -- module hooks (on while watching) ----------------------------------------------------

    def _pre(self, module, args):
        d = self.depth = self.depth + 1
        if d == 1:
            if self.watched_backwards >= WATCH_BACKWARDS or self.roots_seen >= WATCH_CALLS:
                self._disable()  # the first steps are done: counting hooks take over
                self._start_counting()
                return
            self.roots_seen += 1
            if self.pending_ratio:
                self._ratios()
            if type(module).__name__ in _BROADCAST_LOSSES and len(args) >= 2:
                self._broadcast_check(module, args)
        self._watched_pre(module, args, d)

    def _watched_pre(self, module, args, depth):
        grad_on = self._grad_on()
        parent = self.frames[-1]
        frame = _Frame(self._counter(), grad_on, A.capture_where())
        ins = [a for a in args if _is_tensor(a)]
        frame.inputs = {id(a) for a in ins}
        if grad_on and parent.child_outputs:
            for a in ins:
                if a.requires_grad or id(a) in parent.inputs:
                    continue
                shared = _storage_ptr(a) in parent.child_outputs
                if shared or parent.depth > 0:  # the cell's own frame: only a shared storage
                    frame.cut = (frame.where, "shared" if shared else "copy")
                    break
        frame.depth = depth
        frame.calls_before = self.n_calls
        if depth == 1:
            if grad_on != module.training:
                self._mode_check(module, frame, grad_on)
            if grad_on and self._arm(module) and id(module) not in self.roots:
                self.steps[id(module)] = self.steps.get(id(module), 0) + 1  # (else its hook)
        self.frames.append(frame)

    def _broadcast_check(self, module, args) -> None:
        a, b = args[0], args[1]
        if _is_tensor(a) and _is_tensor(b) and tuple(a.shape) != tuple(b.shape):
            self.note(("broadcast", id(module)), (module, type(module).__name__),
                      "target broadcasts against its input at {where}: \u201cUsing a target "
                      f"size ({b.shape}) that is different to the input size ({a.shape}). "
                      "This will likely lead to incorrect results due to broadcasting. "
                      "Please ensure they have the same size.\u201d (PyTorch's warning)",
                      where=A.capture_where())

    def _mode_check(self, module, frame, grad_on) -> None:
        """A model called in train mode under no_grad, or in eval mode with grad on."""
        if not _has_mode_layers(module):
            return
        if grad_on:  # eval mode, grad on: a problem only if a backward follows
            self.eval_forward[id(module)] = (weakref.ref(module), frame.where)
            return
        self.note(("train-nograd", id(module)), (module, type(module).__name__),
                  "was evaluated under no_grad in train mode at {where}: {layers} as in "
                  "training; call .eval() before evaluating",
                  where=frame.where, layers=_mode_layer_names(module))

    def _post(self, module, args, output):
        d = self.depth
        if d <= 0 or len(self.frames) < 2:  # hooks turned on inside a forward
            return
        self.depth = d - 1
        frame = self.frames.pop()
        out = output
        if isinstance(output, (tuple, list)):
            out = next((o for o in output if _is_tensor(o)), None)
        elif not _is_tensor(output):
            out = None
        out_rg = bool(out is not None and out.requires_grad)
        end = self._counter()
        self.calls.append(Call(frame.start, end, weakref.ref(module), type(module).__name__,
                               frame.where, frame.grad_on, out_rg, self.cell, frame.cut))
        self.n_calls += 1
        if out_rg:
            parent = self.frames[-1]
            if len(parent.child_outputs) > 256:
                parent.child_outputs.clear()
            parent.child_outputs.add(_storage_ptr(out))
        if d > 1:
            return
        if _is_loss(module) and id(module) not in self.loss_hooks:
            self.loss_hooks[id(module)] = module.register_forward_hook(self._loss_hook)
            self._loss_hook(module, args, output)
        tpl = self.templates.get(id(module))
        if tpl is None or tpl[0] != end - frame.start:  # a new structure: remember it
            k = min(self.n_calls - frame.calls_before, len(self.calls))
            mine = [self.calls[-i] for i in range(k, 0, -1)]
            self.templates[id(module)] = _template(mine, frame.start, end, out)

    def _loss_hook(self, module, args, output):
        """On each loss module seen, every call: its value (the Training tab's curve); a loss
        with grad is a training step (see :meth:`_step`)."""
        if type(output) in _TENSOR_TYPES:
            a = output._data
            if a.size == 1 and len(self.losses) < MAX_STEPS:
                self.losses.append(float(a.reshape(-1)[0]))
            if output.requires_grad:
                self.loss_steps += 1
                if not self.enabled:
                    self._step(self.loss_steps, self.trained)

    def _root_pre(self, module, args):
        """On a model trained without a loss module, every call with grad: a training step."""
        if self._grad_on():
            k = id(module)
            n = self.steps[k] = self.steps.get(k, 0) + 1
            if not self.enabled:
                self._step(n, {k: weakref.ref(module)})

    def step_count(self) -> int:
        """Training steps counted this cell (loss modules with grad, or the models' calls)."""
        return max(self.loss_steps, *self.steps.values(), 0)

    def _step(self, n, models) -> None:
        """A training step once watching is over: the update ratio of the last gradient sample
        is read, and every ``SAMPLE_EVERY``-th step arms the gradient hooks of ``models``."""
        if self.pending_ratio:
            self._ratios()
        if n == 2 or n % SAMPLE_EVERY == 0:  # the second step: a gradient summed into?
            for ref in list(models.values()):
                mod = ref()
                if mod is not None:
                    self._arm(mod)

    def _mode_pre(self, module, args):
        """On each Dropout / BatchNorm layer of a trained model, once watching is over: train
        mode under no_grad, or eval mode while training, noted on its model."""
        if self.enabled:
            return
        grad_on = self._grad_on()
        if module.training == grad_on:
            return
        root = self.mode_layers.get(id(module))
        root = root() if root is not None else None
        if root is None:
            return
        where = A.capture_where()
        if grad_on:
            if self.backward_seen:
                self.eval_forward[id(root)] = (weakref.ref(root), where)
                self.eval_trained()
        else:
            self._mode_check(root, _Frame(0, False, where), False)

    def _start_counting(self) -> None:
        """Watching is over: steps are counted by the loss modules' hooks, or (no loss module
        used with grad) by a hook on each trained model; mode layers get their check."""
        for k, ref in list(self.trained.items()):
            mod = ref()
            if mod is None:
                continue
            if not self.loss_steps and k not in self.roots:
                self.roots[k] = mod.register_forward_pre_hook(self._root_pre)
                n = self.steps[k] = self.steps.get(k, 0) + 1  # the call being made now
                self._step(n, {k: ref})
            for sub in _submodules(mod):
                if type(sub).__name__ in _MODE_LAYERS and id(sub) not in self.mode_layers:
                    self.mode_layers[id(sub)] = weakref.ref(mod)
                    self.roots[("mode", id(sub))] = sub.register_forward_pre_hook(
                        self._mode_pre)

    # -- gradients: one-shot hooks armed on watched steps ------------------------------------

    def _arm(self, module) -> bool:
        """Hook each parameter of ``module`` for its next gradient only; from now on a hook on
        ``module`` counts its training steps."""
        self.samples += 1
        new = trained = False
        for p in module.parameters():
            if not p.requires_grad:
                continue
            trained = True
            st = self.params.get(id(p))
            if st is None:
                st = self.params[id(p)] = ParamStat(weakref.ref(p, self._forget(id(p))), None)
                st.hook = self._grad_hook(st)
                new = True
            if st.armed is None:
                st.armed = p.register_hook(st.hook)
                st.sample = self.samples
        if new:  # which module owns each parameter (the eval-mode note asks it)
            for mod in _submodules(module):
                for p in mod._parameters.values():
                    if p is not None and id(p) in self.params:
                        self.params[id(p)].module = weakref.ref(mod)
        if trained:
            self.trained[id(module)] = weakref.ref(module)
        return trained

    def _disarm(self) -> None:
        for st in self.params.values():
            if st.armed is not None:
                st.armed.remove()
                st.armed = None

    def _forget(self, key):
        def gone(_ref, params=self.params):
            params.pop(key, None)
        return gone

    def _grad_hook(self, st: ParamStat):
        tracker = self

        def nbgrad_panel_grad_stats(grad):
            handle, st.armed = st.armed, None
            if handle is not None:
                handle.remove()
            p = st.ref()
            if p is None:
                return None
            a = grad._data.reshape(-1)
            sq = float(a @ a) if a.dtype.kind == "f" else float((a * a).sum())
            st.norms.append(math.sqrt(sq) if sq == sq else float("nan"))
            st.zeros = 1.0 - np.count_nonzero(a) / max(a.size, 1)
            if not math.isfinite(sq):
                st.nonfinite = True
            old = p._grad  # the hook runs before the new gradient is summed in
            if old is None or not old._data.any():  # zero_grad: None, or zeroed in place
                st.accumulated, st.missed = 1, False
            else:
                st.accumulated += 1
                step = tracker.step_count()
                st.missed = st.missed or step > st.hits + 1
                st.summed_into, st.summed_at = weakref.ref(old), step
            st.max_accumulated = max(st.max_accumulated, st.accumulated)
            st.hits += 1
            tracker.backward_seen = True
            if st.sample != tracker.last_sample:  # a new backward call watched
                tracker.last_sample = st.sample
                tracker.watched_backwards += 1
            tracker._step_norm(st.sample, sq)
            st.prev = p._data.copy()  # the update ratio is read at the next step
            st.prev_nodes = tracker._counter()
            tracker.pending_ratio.append(st)
            if tracker.eval_forward:
                mod = st.module() if st.module is not None else None
                if mod is not None and not mod.training:
                    tracker.eval_trained()
            return None

        return nbgrad_panel_grad_stats

    def _step_norm(self, i, sq) -> None:
        """Sum a parameter's squared norm into the total of the sample it was armed for."""
        norms = self.step_norms
        if norms and norms[-1][0] == i:
            norms[-1] = (i, norms[-1][1] + sq)
        elif len(norms) < MAX_STEPS:
            norms.append((i, sq))

    def _ratios(self) -> None:
        """||weight change|| / ||weight|| of the parameters copied after a watched backward,
        once a forward ran since (not in the backward that copied them)."""
        now = self._counter()
        later = []
        for st in self.pending_ratio:
            if st.prev_nodes >= now:
                later.append(st)
                continue
            p = st.ref()
            if p is None or st.prev is None or st.prev.shape != p._data.shape:
                continue
            w = p._data.reshape(-1)
            d = w - st.prev.reshape(-1)
            dn = float(d @ d)
            if dn:  # the weights moved: an optimizer step
                wn = float(w @ w)
                st.ratios.append(math.sqrt(dn / wn) if wn else float("inf"))
            st.prev = None
        self.pending_ratio = later

    def eval_trained(self) -> None:
        """A backward reached a model whose forward ran in eval mode with grad on."""
        for key, (mref, where) in list(self.eval_forward.items()):
            mod = mref()
            if mod is not None and not mod.training:
                self.note(("eval-train", key), (mod, type(mod).__name__),
                          "ran its forward in eval mode at {where} and was then trained: "
                          "{layers} as at test time; call .train() before training",
                          where=where, layers=_mode_layer_names(mod))
        self.eval_forward.clear()

    def recent_calls(self, snap=None) -> list:
        """The watched calls, and for the graphs of ``snap`` made in unwatched steps, the
        watched step's calls shifted to where the same node names sit."""
        out = list(self.calls)
        if snap is None:
            return out
        seq_names = {n.seq: n.name for n in snap.nodes.values()
                     if n.seq and not n.is_accumulate}
        for _total, calls, names in self.templates.values():
            if not names:
                continue
            r0, first = min(names.items())
            anchors = 0
            for q, name in seq_names.items():
                if name != first or anchors >= 64:
                    continue
                s = q - r0
                hits = [seq_names.get(s + r) == nm for r, nm in names.items()
                        if s + r in seq_names]
                if hits and all(hits) and len(hits) * 2 >= len(names):
                    anchors += 1
                    out += [replace(c, start=c.start + s, end=c.end + s) for c in calls]
        return out

    # -- notes --------------------------------------------------------------------------------

    def note(self, key, who, text, where=None, **kw):
        """A note for this cell, once per key; ``who`` is (module, class) named at report time,
        or None (the text says who)."""
        if key in self.notes or len(self.notes) > 50:
            return
        self.notes[key] = (weakref.ref(who[0]) if who else None, who[1] if who else "", text,
                           where, kw)

    # -- warnings -----------------------------------------------------------------------------

    def _install_warnings(self) -> None:
        """See the warnings shown while loaded (F.mse_loss's broadcasting warning has no
        module to hook); the original ``showwarning`` still shows them."""
        orig = warnings.showwarning

        def showwarning(message, category, filename, lineno, file=None, line=None):
            try:
                self._warned(str(message))
            except Exception:  # noqa: BLE001 - a warning is shown whatever happens here
                pass
            return orig(message, category, filename, lineno, file, line)

        showwarning.nbgrad_original = orig
        warnings.showwarning = showwarning

    def _uninstall_warnings(self) -> None:
        orig = getattr(warnings.showwarning, "nbgrad_original", None)
        if orig is not None:
            warnings.showwarning = orig

    def _warned(self, text: str) -> None:
        if not text.startswith("Using a target size") or any(
                k[0] == "broadcast" for k in self.notes):
            return
        self.note(("broadcast", "warning"), None, "a loss target broadcasts against its input at "
                  "{where}: \u201c" + text.replace("{", "{{").replace("}", "}}")
                  + "\u201d (PyTorch's warning)", where=A.capture_where(skip=(warnings.__file__,)))


def _template(calls, start, end, out) -> tuple:
    """A top-level call's structure: its node count, its calls relative to its start, and the
    names of the nodes it made by relative number (found from its output's graph)."""
    names = {}
    fn = A.grad_fn(out) if out is not None else None
    stack, seen = ([fn] if fn is not None else []), set()
    while stack and len(seen) < 4 * (end - start) + 16:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        s = A.sequence_number(node)
        if not start < s <= end:
            continue
        names[s - start] = A.node_name(node)
        stack.extend(A.next_nodes(node))
    return (end - start, [replace(c, start=c.start - start, end=c.end - start) for c in calls],
            names)


class _Frame:
    __slots__ = ("start", "grad_on", "where", "inputs", "child_outputs", "cut", "depth",
                 "calls_before")

    def __init__(self, start, grad_on, where):
        self.start, self.grad_on, self.where = start, grad_on, where
        self.inputs: set = set()
        self.child_outputs: set = set()
        self.cut = None
        self.depth = 0
        self.calls_before = 0


_is_tensor = A.is_tensor
_TENSOR_TYPES = (A.tensor_type(),)


def _storage_ptr(t) -> int:
    """Which storage ``t`` views (its identity: a ``.detach()`` or ``.data`` shares it)."""
    return id(A.storage(t))


def _is_loss(module) -> bool:
    from nbgrad.nn.modules.loss import _Loss

    return isinstance(module, _Loss)


def _submodules(top):
    try:
        return [m for _, m in top.named_modules()]
    except Exception:  # noqa: BLE001
        return []


def _mode_layer_names(module) -> str:
    """ "its Dropout layer behaves", "its Dropout and BatchNorm1d layers behave"."""
    names = sorted({type(m).__name__ for m in _submodules(module)
                    if type(m).__name__ in _MODE_LAYERS})
    count = sum(1 for m in _submodules(module) if type(m).__name__ in _MODE_LAYERS)
    return "its " + " and ".join(names) + (" layers behave" if count > 1 else " layer behaves")


def _has_mode_layers(module) -> bool:
    return any(type(m).__name__ in _MODE_LAYERS for m in _submodules(module))


def _where_str(raw) -> str:
    from . import inspect as _inspect

    return _inspect._loc_str(raw) if raw is not None else ""


# --- the report --------------------------------------------------------------------------------


@dataclass
class ParamRow:
    """One row of the Gradients tab."""

    name: str
    shape: tuple
    norm: float | None
    ratio: float | None
    zeros: float
    history: list
    accumulated: int
    nonfinite: bool


@dataclass
class ModelReport:
    """Everything model-specific one panel shows. Plain data."""

    clusters: dict = field(default_factory=dict)  # path -> {"title", "parent", "keys": [...]}
    params: list = field(default_factory=list)  # [ParamRow]
    notes: list = field(default_factory=list)  # one sentence each
    losses: list = field(default_factory=list)  # per step of this cell
    grad_norms: list = field(default_factory=list)  # total gradient norm of each watched step
    grad_norm_steps: list = field(default_factory=list)  # the top-level call index of each
    steps: int = 0  # backward calls this cell
    kept_alive: list = field(default_factory=list)  # [(variable, graphs, saved bytes, items)]
    nan: dict | None = None

    @property
    def is_loop(self) -> bool:
        return self.steps >= LOOP_STEPS

    def is_empty(self) -> bool:
        return not (self.clusters or self.params or self.notes or self.kept_alive or self.nan)

    def has_news(self) -> bool:
        """Something for a panel even when the cell drew no graph: a backward, or a note."""
        return bool(self.steps or self.notes)


def module_names(ns: dict, skip=()) -> tuple[dict, dict, list]:
    """``({id(module): path}, {id(param): path}, [top-level modules])`` of the namespace."""
    mods, params, tops = {}, {}, []
    for name, v in list(ns.items()):
        if name[:1] == "_" or name in skip:
            continue
        try:
            if not A.is_module(v):
                continue
            tops.append(v)
            for i, (sub, m) in enumerate(v.named_modules()):
                if i > 500:
                    break
                mods.setdefault(id(m), f"{name}.{sub}" if sub else name)
            for i, (pname, p) in enumerate(v.named_parameters()):
                if i > 2000:
                    break
                params.setdefault(id(p), f"{name}.{pname}")
        except Exception:  # noqa: BLE001 - one odd object never silences the panel
            continue
    return mods, params, tops


def report(tracker: ModelTracker, ns: dict, skip=()) -> ModelReport:
    """What this cell did to the namespace's models: gradients after its backward calls and the
    notes the hooks took; :func:`with_graph` adds what needs the cell's snapshot."""
    rep = ModelReport()
    mods, pnames, _tops = module_names(ns, skip)
    calls = tracker.recent_calls()
    counted = max(tracker.loss_steps, max(tracker.steps.values(), default=0))
    rep.steps = max(counted if tracker.backward_seen else 0,
                    max((st.hits for st in tracker.params.values()), default=0))
    rep.losses = list(tracker.losses)
    rep.grad_norm_steps = [i for i, _ in tracker.step_norms]
    rep.grad_norms = [math.sqrt(s) if s == s else float("nan") for _, s in tracker.step_norms]
    backward_models = set()
    summed: dict = {}  # ("at least " or "", backward calls) -> parameters summed into
    for pid, st in tracker.params.items():
        name = pnames.get(pid)
        p = st.ref()
        if name is None or p is None or not rep.steps:
            continue
        if st.hits:
            backward_models.add(name.split(".", 1)[0])
        rep.params.append(ParamRow(
            name, tuple(int(s) for s in p.shape), st.norms[-1] if st.norms else None,
            st.ratios[-1] if st.ratios else None, st.zeros, list(st.norms),
            st.max_accumulated, st.nonfinite))
        if st.max_accumulated >= 2 and st.hits:
            n, least = st.max_accumulated, "at least " if st.missed else ""
            later = tracker.step_count() - st.summed_at
            if st.summed_into is not None and st.summed_into() is p._grad and later > 0:
                # the same .grad still: the steps since were summed into it too
                n, least = st.accumulated + later, ""
            summed.setdefault((least, n), []).append(name)
        if st.nonfinite and st.hits:
            rep.notes.append(f"{name}.grad has NaN or Inf values")
    rep.params.sort(key=lambda r: r.name)
    for (least, n), names in summed.items():
        grads = ", ".join(f"{x}.grad" for x in sorted(names))
        rep.notes.append(f"{grads} accumulated from {least}{n} backward calls since zero_grad "
                         "(fine if you meant to accumulate gradients)")
    # parameters of a model that had a backward this cell but got no gradient
    if backward_models:
        by_module = {}
        for name, p in _named_params(ns, backward_models):
            if p.requires_grad and id(p) in tracker.params and \
                    tracker.params[id(p)].hits == 0:
                by_module.setdefault(name.rsplit(".", 1)[0], []).append(name)
        mod_of = {path: mid for mid, path in mods.items()}
        for path, names in by_module.items():
            why = _why_no_grad(mod_of.get(path), calls, mods)
            rep.notes.append(f"{', '.join(names)} got no gradient: {why}")
    for _key, (mref, cls, text, where, kw) in tracker.notes.items():
        m = mref() if mref is not None else None
        path = mods.get(id(m)) if m is not None else None
        who = (f"{path} ({cls}) " if path else f"a {cls} ") if cls else ""
        rep.notes.append(who + text.format(where=_where_str(where) or "?", **kw))
    return rep


def with_graph(rep: ModelReport | None, tracker: ModelTracker, ns: dict, snap,
               skip=()) -> ModelReport | None:
    """``rep`` (or a new report) with the snapshot's module clusters, the origin of a NaN in a
    tensor this cell made or changed, and the containers keeping graphs alive; None if empty."""
    rep = rep or ModelReport()
    mods, pnames, _tops = module_names(ns, skip)
    for t in snap.tensors:  # a parameter the graph reaches is drawn with its path
        if not t.name:
            path = pnames.get(int(t.key[1:]))
            if path is not None:
                t.name = path
    rep.clusters = clusters(snap, tracker.recent_calls(snap), mods)
    changed = {n for t in snap.tensors if t.named and t.version_delta != 0
               for n in t.name.split(" = ")}
    rep.nan = nan_origin(ns, skip, only=changed)
    if rep.nan:
        n = rep.nan
        rep.notes.insert(0, f"{n['tensor']} has {n['kind']}: the first op that produced it is "
                         f"{n['op']}" + (f" at {n['where']}" if n["where"] else "")
                         + (f" ({n['source']})" if n["source"] else ""))
    if not any(n.startswith("a loss target") or "target broadcasts" in n for n in rep.notes):
        rep.notes += broadcast_losses(snap)
    rep.kept_alive = kept_alive(ns, skip)
    before, tracker.kept = tracker.kept, {k[0]: k[1] for k in rep.kept_alive}
    for name, graphs, nbytes, kind, _nodes in rep.kept_alive:
        if graphs >= KEEP_NOTE and graphs > before.get(name, 0):
            from .render import _in_bytes

            rep.notes.append(f"{name} ({kind}) keeps {graphs} graphs alive, "
                             f"{_in_bytes(nbytes)} (see Memory): append loss.item() to keep "
                             "only the number")
    return None if rep.is_empty() else rep


def _named_params(ns, top_names):
    for top in top_names:
        m = ns.get(top)
        try:
            for pname, p in m.named_parameters():
                yield f"{top}.{pname}", p
        except Exception:  # noqa: BLE001
            continue


def _why_no_grad(module_id, calls, mods) -> str:
    """Where the path from a module's parameters to the loss was cut."""
    mine = [c for c in calls if module_id is not None and id(c.ref()) == module_id]
    if not mine:
        return "its module was not called since the panel was loaded"
    last = mine[-1]
    if not last.grad_on:
        return f"its module ran under no_grad at {_where_str(last.where) or '?'}"
    if not last.out_requires_grad:
        return "its module's output did not require grad (detached inside its forward)"
    for c in calls:
        if c.start >= last.end and c.cut is not None:
            how = ("detached (.detach() or .data)" if c.cut[1] == "shared"
                   else "cut from the graph (a .detach(), .data or a numpy round trip)")
            m = c.ref()
            user = f"{mods.get(id(m), 'a')} ({c.cls})"
            return (f"its output was {how} before {user} used it at "
                    f"{_where_str(c.cut[0]) or '?'}")
    return ("its output never reached the loss (a .detach(), .data, a numpy round trip or an "
            "unused layer)")


def clusters(snap, calls, mods: dict) -> dict:
    """``{path: {"title", "parent", "keys"}}``: the snapshot's nodes grouped by the innermost
    module call that made them, and each parameter's box with its module."""
    seqs = {k: n.seq for k, n in snap.nodes.items()
            if getattr(n, "seq", 0) and not n.is_accumulate}
    if not seqs:
        return {}
    lo, hi = min(seqs.values()), max(seqs.values())
    near = [c for c in calls if c.end >= lo and c.start < hi]
    out: dict = {}

    def cluster_of(c):
        m = c.ref()
        path = mods.get(id(m)) if m is not None else None
        if path is None:
            return None
        if path not in out:
            out[path] = {"title": f"{path} ({c.cls})", "parent": None, "keys": []}
        return path

    # innermost first: the narrowest call containing a node wins
    near.sort(key=lambda c: c.end - c.start)
    for key, s in seqs.items():
        for c in near:
            if c.start < s <= c.end:
                path = cluster_of(c)
                if path is not None:  # the node, and the tensors it saved
                    out[path]["keys"] += [key] + [sv.key for sv in snap.nodes[key].saved]
                break
    # outer modules of the ones found (``model`` around ``model.0``), even with no node of their own
    for c in near:
        cluster_of(c)
    by_tensor = {t.key: t for t in snap.tensors}
    for n in snap.nodes.values():
        t = by_tensor.get(n.variable) if n.variable else None
        if t is not None and t.name:
            owner = t.name.split(" = ")[0].rsplit(".", 1)[0]
            if owner in out:
                out[owner]["keys"] += [n.key, t.key]
    for path, c in out.items():
        parent = path.rsplit(".", 1)[0] if "." in path else None
        while parent is not None and parent not in out:
            parent = parent.rsplit(".", 1)[0] if "." in parent else None
        c["parent"] = parent
    return {p: c for p, c in out.items() if c["keys"] or any(
        o["parent"] == p for o in out.values())}


def default_folded(rep: ModelReport, n_nodes: int, loop: bool = False) -> list:
    """Modules folded when a panel first shows: none for a small graph (unless it is the last
    step of a training loop), else every module one level inside the outermost (torchvista's
    view of a model)."""
    if (n_nodes <= FOLD_ABOVE and not loop) or not rep.clusters:
        return []
    roots = [p for p, c in rep.clusters.items() if c["parent"] is None]
    out = []
    for r in roots:
        kids = [p for p, c in rep.clusters.items() if c["parent"] == r]
        out += kids or [r]
    return out


def fold(snap, rep: ModelReport, folded) -> object:
    """A copy of ``snap`` where each module in ``folded`` is one box (its nodes and parameters
    inside): what the graph draws; the other tabs keep the full snapshot."""
    from .inspect import NodeInfo

    folded = [p for p in folded if p in rep.clusters]
    if not folded:
        return snap
    owner: dict = {}  # key -> folded path
    for path in sorted(folded, key=len, reverse=True):  # outer folds win
        for p, c in rep.clusters.items():
            if p == path or p.startswith(path + "."):
                for k in c["keys"]:
                    owner[k] = path

    box = box_id

    def remap(k):
        return box(owner[k]) if k in owner else k

    nodes: dict = {}
    boxes: dict = {}
    for key, n in snap.nodes.items():
        if key in owner:
            path = owner[key]
            b = boxes.get(path)
            if b is None:
                b = boxes[path] = NodeInfo(key=box(path), name=rep.clusters[path]["title"],
                                           where="", source="", module=path)
                nodes[b.key] = b
            b.folded += 1
            b.stale = b.stale or n.stale
            b.failing = b.failing or n.failing
            b.saved += [s for s in n.saved if s.is_stale and not s.released]
            for x in n.next:
                x = remap(x)
                if x != b.key and x not in b.next:
                    b.next.append(x)
            continue
        nn = replace(n, next=list(dict.fromkeys(remap(x) for x in n.next)))
        nodes[key] = nn
    for b in boxes.values():
        b.where = f"{b.folded} ops folded"
    tensors = [t if t.grad_fn_key not in owner else replace(t, grad_fn_key=remap(t.grad_fn_key))
               for t in snap.tensors if t.key not in owner]
    return replace(snap, nodes=nodes, tensors=tensors)


def cluster_dot(rep: ModelReport, shown: set, folded=()) -> list:
    """DOT ``subgraph cluster_...`` blocks (nested as the modules are) naming the shown keys."""
    if not rep.clusters:
        return []
    folded = set(folded)
    kids: dict = {}
    for p, c in rep.clusters.items():
        kids.setdefault(c["parent"], []).append(p)
    out = []

    def emit(path, pad):
        c = rep.clusters[path]
        if any(path == f or path.startswith(f + ".") for f in folded):
            return
        keys = [k for k in c["keys"] if k in shown]
        sub = kids.get(path, [])
        if not keys and not sub:
            return
        cid = cluster_id(path)
        out.append(f'{pad}subgraph "{cid}" {{')
        out.append(f'{pad}  id="{cid}"; label="{_esc(c["title"])}"; labeljust=l; fontsize=10; '
                   'style="rounded,dashed"; color="#8a8aa8"; fontcolor="#44446a";')
        if keys:
            out.append(pad + "  " + "; ".join(f'"{k}"' for k in dict.fromkeys(keys)) + ";")
        for s in sub:
            emit(s, pad + "  ")
        out.append(pad + "}")

    for root in kids.get(None, []):
        emit(root, "  ")
    return out


_LOSS_NODES = ("MseLossBackward0", "L1LossBackward0", "SmoothL1LossBackward0",
                "HuberLossBackward0")


def broadcast_losses(snap) -> list:
    """Notes for loss nodes of the snapshot whose target was broadcast against the input (seen
    in their saved tensors' shapes: a warning caught by the user, or shown once, still shows)."""
    out = []
    for n in snap.nodes.values():
        if n.name not in _LOSS_NODES:
            continue
        shapes = {s.name: s.shape for s in n.saved if not s.released}
        a, b = shapes.get("self"), shapes.get("target")
        if a is not None and b is not None and tuple(a) != tuple(b):
            out.append(f"a loss target broadcasts against its input at {n.where or '?'}: "
                       f"\u201cUsing a target size (nbgrad.Size({list(b)})) that is different to "
                       f"the input size (nbgrad.Size({list(a)})). This will likely lead to "
                       "incorrect results due to broadcasting. Please ensure they have the same "
                       "size.\u201d (PyTorch's warning)")
            break
    return out


def box_id(path: str) -> str:
    """The graph id of a folded module's box."""
    return "m_" + "".join(ch if ch.isalnum() else "_" for ch in path)


def cluster_id(path: str) -> str:
    """The graph id of a module's cluster (graphviz needs the ``cluster`` prefix)."""
    return "cluster_" + "".join(ch if ch.isalnum() else "_" for ch in path)


def _esc(s: str) -> str:
    return str(s).replace("\\", "\\\\").replace('"', '\\"')


# --- NaN origin and graphs kept alive ----------------------------------------------------------


def _nonfinite_kind(a) -> str | None:
    try:
        if a.dtype.kind not in "fc" or np.isfinite(a).all():
            return None
        return "NaN" if np.isnan(a).any() else "Inf"
    except Exception:  # noqa: BLE001
        return None


def nan_origin(ns: dict, skip=(), only=None) -> dict | None:
    """The first op (lowest sequence number) whose output holds NaN/Inf, found from a named
    non-finite tensor (of the names in ``only``, when given) through the saved tensors of its
    graph (no anomaly mode needed)."""
    from . import inspect as _inspect

    for name, t in _inspect.named_tensors(ns, skip=skip):
        if only is not None and name not in only:
            continue
        fn = t.grad_fn
        if fn is None or t.numel() > 1_000_000:
            continue
        kind = _nonfinite_kind(A.array(t))
        if kind is None:
            continue
        best = fn
        queue, seen = [fn], {id(fn)}
        head = 0
        while head < len(queue) and head < 5000:
            node = queue[head]
            head += 1
            nxt = A.next_nodes(node)
            saved = {}
            for st in A.saved_tensors(node):
                if st.released:
                    continue
                try:
                    data = saved[st.name] = A.saved_value(node, st.name)
                except Exception:  # noqa: BLE001
                    continue
                if _nonfinite_kind(data) is None:
                    continue
                src = node if st.is_output else _input_node(node, st.name, nxt)
                if src is not None and A.sequence_number(src) < A.sequence_number(best):
                    best = src
            if A.sequence_number(node) < A.sequence_number(best) and \
                    _out_of_domain(A.node_name(node), saved):
                best = node
            for nf in nxt:
                if id(nf) not in seen:
                    seen.add(id(nf))
                    queue.append(nf)
        where, source = _inspect._where(best)
        return {"tensor": name, "kind": kind, "op": A.node_name(best), "where": where,
                "source": source}
    return None


_LOGS = {"LogBackward0": 0.0, "Log2Backward0": 0.0, "Log10Backward0": 0.0,
         "Log1PBackward0": -1.0}


def _out_of_domain(name: str, saved: dict) -> bool:
    """Whether an op whose output was not kept made NaN/Inf from finite inputs it saved: a log
    of 0 or less, a division by 0 (the common ways a model makes its first NaN)."""
    try:
        if name in _LOGS and "self" in saved:
            return bool((saved["self"] <= _LOGS[name]).any())
        if name == "DivBackward0" and "other" in saved:
            return bool((saved["other"] == 0).any())
    except Exception:  # noqa: BLE001
        return False
    return False


def _input_node(node, saved_name, nxt):
    """The node that made the input a saved tensor called ``saved_name`` came from."""
    real = [nf for nf, _ in node.next_functions]
    if saved_name in ("self", "input") and real and real[0] is not None:
        return real[0]
    if saved_name == "other" and len(real) > 1 and real[1] is not None:
        return real[1]
    return nxt[0] if len(nxt) == 1 else None


def kept_alive(ns: dict, skip=()) -> list:
    """``[(variable, graphs, bytes, container type, nodes)]``: the lists / tuples / dicts /
    deques of the namespace holding two or more tensors with a ``grad_fn``
    (``history.append(loss)``); bytes: the tensors' own and their graphs' unreleased saved
    tensors."""
    out = []
    budget = [_WALK_NODES]
    for name, v in list(ns.items()):
        if name[:1] == "_" or name in skip or type(v) not in (list, tuple, dict, deque):
            continue
        try:
            items = list(v.values() if type(v) is dict else v)[:_CONTAINER_ITEMS]
        except Exception:  # noqa: BLE001
            continue
        held = [t for t in items if A.is_tensor(t) and A.grad_fn(t) is not None]
        if len(held) < 2:
            continue
        roots = [A.grad_fn(t) for t in held]
        seen: set = set()
        buffers: set = set()  # a saved tensor shared by several graphs counts once
        nbytes = sum(int(t.numel()) * int(t.element_size()) for t in held)
        queue = list(roots)
        seen.update(id(r) for r in roots)
        while queue and budget[0] > 0:
            node = queue.pop()
            budget[0] -= 1
            for st in A.saved_tensors(node):
                if not st.released and (st.data_ptr, st.shape) not in buffers:
                    buffers.add((st.data_ptr, st.shape))
                    nbytes += int(st.nbytes or 0)
            for nf in A.next_nodes(node):
                if id(nf) not in seen:
                    seen.add(id(nf))
                    queue.append(nf)
        out.append((name, len(roots), nbytes, type(v).__name__, len(seen)))
    return out
