"""What the model panel observes while a cell runs: hooks on nn.Modules and on parameters.

A :class:`ModelTracker` lives while the extension is loaded. It records, as plain numbers and weak
references only:

- per ``nn.Module`` call (global forward pre/post hooks, torch's
  ``register_module_forward_pre_hook`` / ``register_module_forward_hook``): the range of graph-node
  sequence numbers (``node._seq``) made inside it, whether grad mode was on, whether its output
  requires grad, and whether one of its inputs was cut from a graph a sibling call made (a
  ``.detach()``, ``.data``, a numpy round trip);
- per parameter (its ``.grad`` read once a backward call is over, ``grad_batch``; a one-shot tensor
  hook, the public ``register_hook``, where the engine needs one): the norm and fraction of exact
  zeros of each gradient, the update/weight ratio between two backward calls (the optimizer
  step), and gradients accumulated by a second backward without ``zero_grad``;
- per loss module call: the loss value, and a target that broadcasts against the input.

``model_report`` turns what it saw into the panel's :class:`~.model_report.ModelReport` after a
cell. Nothing here holds a tensor.
"""

from __future__ import annotations

import math
import weakref
from collections import deque
from dataclasses import dataclass, field


from . import adapter as A
from . import grad_light, model_warnings
from .grad_batch import GradBatch, eval_check, ratios, record, seen
from .model_lean import Call, LeanSteps, _LeanCall

HISTORY = 100  # gradient norms / ratios kept per parameter (the sparkline)
MAX_CALLS = 4096  # module calls remembered (enough for the last steps of a loop)
MAX_STEPS = 5000  # per-step loss / grad-norm values kept for one cell's curves
WATCH_BACKWARDS = 1  # a cell's module hooks stay on until this many backward calls were seen
WATCH_CALLS = 16  # ... or this many top-level module calls (an evaluation loop)
SAMPLE_EVERY = 50  # training steps between two gradient samples after that
_BROADCAST_LOSSES = ("MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss")
_MODE_LAYERS = ("Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "BatchNorm1d",
                "BatchNorm2d", "BatchNorm3d")


@dataclass(slots=True)
class ParamStat:
    """What the tracker saw of one parameter's gradients (no tensor: a weak reference)."""

    ref: object
    module: object  # weakref to the module owning it
    norms: deque = field(default_factory=lambda: deque(maxlen=HISTORY))
    ratios: object = ()  # a deque like norms from the first ratio on (most cells train no step)
    zeros: float = 0.0
    prev: object = None  # the weights before the optimizer step after a watched backward
    accumulated: int = 0  # watched backward calls summed into .grad since it was last reset
    max_accumulated: int = 0  # the most seen this cell
    hits: int = 0  # watched backward calls this cell
    missed: bool = False  # backward calls ran unwatched since .grad was last reset
    nonfinite: bool = False
    armed: object = None  # while armed: the handle of its one-shot gradient hook, or
    # grad_batch.UNHOOKED (read after the next backward call that reaches it)
    sample: int = 0  # the arming it belongs to (the gradient norms of one step are summed)
    with_ratio: bool = True  # its armed hook copies the weights for the update ratio
    prev_nodes: int = 0  # the engine's node count when ``prev`` was copied
    prev_version: int = 0  # the parameter's version then (an optimizer step's write bumps it)
    summed_into: object = None  # weakref to the .grad the last watched backward summed into
    # (None when that backward found .grad None or zeros: it started a new sum)
    summed_version: int = 0  # that .grad's version before the sum
    summed_at: int = 0  # the training step of the last watched backward
    hook: object = None  # its gradient hook function (made once)


class ModelTracker(LeanSteps):
    """The hooks of the model panel; ``install()`` / ``uninstall()`` with the extension.

    Cost: module hooks are on in a cell until ``WATCH_BACKWARDS`` backward calls were seen, or
    ``WATCH_CALLS`` top-level module calls (the first training steps are *watched*: module calls
    and their node-number ranges, provenance, cut inputs, modes, a one-shot gradient watch on every
    parameter, the update ratio at the next step). After that a step costs one forward hook on
    each loss module (its value; without one, a forward pre-hook on each trained model counts
    the steps) and mode checks on Dropout / BatchNorm layers; the second step and every
    ``SAMPLE_EVERY``-th arm the one-shot gradient watch again (the second without copying the
    weights). Every module call, watched or not, is recorded as its node range, its module and
    the module the user called (a counter read before and after, a weak reference): a graph's
    module clusters come from the calls that made its nodes, never from names. ``light``
    (``record=off``): only the first step's top-level calls are watched, inner calls by their
    node range, no parameter is hooked (``grad_light`` reads the gradients). Measured by
    ``bench_model_panel.py`` and ``bench_torch_panel.py``.
    """

    def __init__(self):
        self.calls: deque = deque(maxlen=MAX_CALLS)
        self.pending_ratio: list = []  # stats whose weights were copied before a step
        self.ratio_flat = None  # (copy, stats): the last batch of them, copied together
        self.batch = GradBatch(self)  # gradients read once the backward pass is over
        self.params: dict[int, ParamStat] = {}  # id(param) -> stat
        self._keys: dict = {}  # id of its weak reference -> id(param), for _forget
        self._gone = self._forget  # (one bound method for every weak reference's callback)
        self.roots: dict = {}  # id(model or layer) -> handle of its counting / mode hook
        self.mode_layers: dict = {}  # id(Dropout / BatchNorm layer) -> weakref to its model
        self.samples = 0  # armings so far
        self._counted_now = None  # id of a model whose step was counted as its hook was added
        self._loss_seen = None  # weakref to the loss read by hand as its hook was added
        self.loss_hooks: dict = {}  # id(loss module) -> handle of its hook reading the loss
        self._mods: weakref.WeakSet = weakref.WeakSet()  # modules hooked one by one
        self._on: dict = {}  # id(module) or "global" -> (pre handle, post handle)
        self.lean: dict = {}  # id(trained model) -> handles of its lean-step hooks (this cell)
        self.known: dict = {}  # id(trained model) -> (weakref, its cell's twins): model_lean
        self._lean_stack: list = []  # (token, node count) of the lean model calls running now
        self.enabled = False  # the module hooks are installed
        self.light = False  # record=off: no parameter hooked (grad_light), submodules by range
        self.watching = True  # this cell's first steps: module calls are watched in full
        self.root = None  # weakref to the module of the outermost call running now
        self.installed = False
        self.global_hooks = False
        self.cell = 0
        self.kept: dict = {}  # container name -> graphs it kept alive at the last report
        self.kept_walks: dict = {}  # model_report.kept_alive's cache of walked containers
        self.reset_cell()

    # -- lifecycle ----------------------------------------------------------------------------

    def install(self) -> None:
        self.installed = True
        self.global_hooks = all(hasattr(A.module_hook_api(e), "register_module_forward_pre_hook")
                                for e in A.engines())
        model_warnings.install(self)
        A.observe_backward(self._on_backward)
        A.observe_steps(self._on_step)
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
            for e in A.engines():  # (torch's too, from the cell after the user imported it)
                if ("global", e.ENGINE) not in self._on:
                    m = A.module_hook_api(e)
                    self._on[("global", e.ENGINE)] = (m.register_module_forward_pre_hook(self._pre),
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
        self._lean_off()
        self._disable()
        self._mods = weakref.WeakSet()
        self._disarm()
        for h in [*self.roots.values(), *self.loss_hooks.values()]:
            h.remove()
        self.roots.clear()
        self.mode_layers.clear()
        self.loss_hooks.clear()
        model_warnings.uninstall()
        A.unobserve_backward(self._on_backward)
        A.unobserve_steps(self._on_step)
        self.params.clear()
        self._keys.clear()
        self.calls.clear()
        self.known.clear()

    def reset_cell(self) -> None:
        """Called before each cell: per-cell counters start again, and watching."""
        self.cell += 1
        self._lean_off()
        self.go_lean = False  # watching is over: the next top-level call's end starts lean steps
        self.depth = 0
        self.watching = True
        self._counted_now = None
        self.roots_seen = 0
        self.steps: dict = {}  # id(trained model) -> its calls with grad this cell
        self.loss_steps = 0  # loss-module outputs with grad this cell
        self.trained: dict = {}  # id(model) -> weakref: the models armed this cell
        self.backward_seen = False
        self.watched_backwards = 0  # backward calls the one-shot hooks saw this cell
        self.last_sample = 0
        self.frames = [_Frame(0, True, None)]  # the cell itself is the root frame
        self.losses: list = []  # the loss of every step (loss modules' outputs)
        self.loss_checked: set = set()  # loss modules whose target was checked after watching
        self.backward_losses: list = []  # the scalar each backward call started from
        self.step_norms: list = []  # [(arming, total squared grad norm, step)]: step = the
        # backward call (from 1) whose gradients were summed
        self.notes: dict = {}  # key -> text, in order
        self.eval_forward: dict = {}  # id(model) -> (weakref, where): forward in eval, grad on
        self.n_backward = 0  # backward calls this cell: "step k" is the k-th
        self.nan = None  # the first non-finite loss a backward started from: see _nan_step
        self.nan_leaves: dict = {}  # id(leaf) -> [weakref, kind, since, step seen, where raw]
        self.finite_at: dict = {}  # id(leaf) -> (the last step it was seen finite, weakref)
        self.light_steps: dict = {}  # light: id(optimizer) -> True in its first step, 2 after
        self.light_grads: dict = {}  # light: id(param) -> (weakref to .grad, version) at step 2
        self.light_params: dict = {}  # light: id(trained model) -> the ParamStats of its params
        self.light_ids: dict = {}  # light: id(param) -> its ParamStat, of those
        self.light_flat: dict = {}  # light: the weights before / after an optimizer's first step
        self.light_start: dict = {}  # light: id(param) -> (weakref to .grad, version) before
        if self.light:
            grad_light.start_cell(self)  # (.grad of each known parameter: read only if it moves)
        for st in self.params.values():
            st.hits = 0
            st.max_accumulated = 0
        if self.installed and (not self.enabled or len(self._on) < len(A.engines())):
            self._enable()

    # -- module hooks (on while watching) ----------------------------------------------------

    def _pre(self, module, args):
        d = self.depth = self.depth + 1
        if d == 1:
            self.root = weakref.ref(module)
            if self.light and self.watching and id(module) in self.known and \
                    self._lean_known(module, args):  # (light: its twins from an earlier cell)
                return
            if self.watching and (self.watched_backwards >= WATCH_BACKWARDS
                                  or self.roots_seen >= WATCH_CALLS
                                  or (self.light and id(module) in self.trained)):
                self.watching = False  # the first steps are done: counting hooks take over
                self._start_counting()
                if self.light and self.trained:  # light: lean from this call on (its own hooks;
                    self._start_lean()  # nn's global ones, already read for it, are removed)
                    if id(module) in self.lean:  # (torch runs no hook added now in this call)
                        self._counted_now = None  # (and this call was counted just now)
                        return self._lean_enter(module, args)
                self.go_lean = self.watched_backwards >= WATCH_BACKWARDS and bool(self.trained)
        if not self.watching or (self.light and d > 1):  # (light: the model's call alone)
            self.frames.append(A.node_count(module))  # a call recorded by its node range only
            return
        if d == 1:
            self.roots_seen += 1
            if self.pending_ratio:
                self._ratios()
            if type(module).__name__ in _BROADCAST_LOSSES and len(args) >= 2:
                self._broadcast_check(module, args)
        self._watched_pre(module, args, d)

    def _watched_pre(self, module, args, depth):
        grad_on = A.grad_on(module)
        parent = self.frames[-1]
        ins = [a for a in args if _is_tensor(a)]
        frame = _Frame(A.node_count(module), grad_on, A.capture_where(), {id(a) for a in ins})
        if grad_on and parent.child_outputs:
            for a in ins:
                if a.requires_grad or id(a) in parent.inputs:
                    continue
                shared = _storage_ptr(a) in parent.child_outputs
                rec = A.cut_of(a)  # where a .detach() / .data / from_numpy made it, if recorded
                if shared or parent.depth > 0:  # the cell's own frame: only a shared storage
                    frame.cut = ((rec[1], rec[0], True) if rec is not None else
                                 (frame.where, "shared" if shared else "copy", True))
                    break
                if rec is not None and rec[0] != "from_numpy" and frame.cut is None:
                    frame.cut = (rec[1], rec[0], False)  # a detach somewhere: a weaker lead
        frame.depth = depth
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
        if d == 1:  # (torch runs a hook added during a call from the next call on)
            self._counted_now = None
        frame = self.frames.pop()
        if type(frame) is int:  # not watched: the node range, the module and its root
            self.calls.append(Call(frame, A.node_count(module), weakref.ref(module),
                                   type(module).__name__, None, True, True, self.cell,
                                   root=self.root, depth=d, watched=False))
            if d == 1 and self.go_lean:
                self._start_lean()
            return
        out = output
        if isinstance(output, (tuple, list)):
            out = next((o for o in output if _is_tensor(o)), None)
        elif not _is_tensor(output):
            out = None
        out_rg = bool(out is not None and out.requires_grad)
        end = A.node_count(module)
        out_cut = A.cut_of(out) if out is not None and not out_rg and frame.grad_on else None
        self.calls.append(Call(frame.start, end, weakref.ref(module), type(module).__name__,
                               frame.where, frame.grad_on, out_rg, self.cell, frame.cut,
                               out_cut, root=self.root, depth=d))
        if out_rg:
            outs = self.frames[-1].child_outputs
            if outs is None:
                outs = self.frames[-1].child_outputs = set()
            elif len(outs) > 256:
                outs.clear()
            outs.add(_storage_ptr(out))
        if d > 1:
            return
        if A.is_loss(module) and id(module) not in self.loss_hooks:
            self.loss_hooks[id(module)] = module.register_forward_hook(self._loss_hook)
            self._loss_hook(module, args, output)  # (this call's: torch reads a module's hooks
            # before its global ones run, nbgrad after: then the new one skips this output)
            self._loss_seen = weakref.ref(output) if _is_tensor(output) else None

    def _on_backward(self, outputs, api) -> None:
        """The engine's observer: before each ``backward()``, the scalar it starts from (a
        functional loss, ``F.cross_entropy(...).backward()``, has no module to hook); from the
        first non-finite one on, where the NaN / Inf came from (:meth:`_nan_step`)."""
        self.batch.before_backward(outputs, api)  # (its gradients read once it is over)
        if api != "backward":
            return
        self.n_backward += 1
        if len(outputs) != 1:
            return
        try:
            a = A.array(outputs[0])
            if a.size != 1:
                return
            v = float(a.reshape(-1)[0])
            if len(self.backward_losses) < MAX_STEPS:
                self.backward_losses.append(v)
            if not math.isfinite(v) or self.nan is not None:
                self._nan_step(outputs[0], v)
        except Exception:  # noqa: BLE001 - the backward runs whatever happens here
            pass

    def _nan_step(self, out, value) -> None:
        """A backward is about to start from a non-finite loss (or one did earlier in this
        cell): its graph still holds what backward frees. The first time, the op that made the
        first non-finite value (``nan_origin_graph``); every time, which leaves (parameters)
        hold NaN / Inf now: one that the previous step saw finite became so in that step's
        update (the optimizer's write: its last in-place op)."""
        from .model_report import _nonfinite_kind, graph_leaves, nan_origin_graph

        k = self.n_backward
        fn = A.grad_fn(out)
        if fn is None:
            return
        for leaf in graph_leaves(fn):
            key = id(leaf)
            kind = _nonfinite_kind(A.array(leaf))
            if kind is None:
                self.finite_at[key] = (k, weakref.ref(leaf))
                continue
            if key in self.nan_leaves:
                continue
            seen = self.finite_at.get(key, (None,))[0]
            self.nan_leaves[key] = [weakref.ref(leaf), kind, k - 1 if seen == k - 1 else None,
                                    k, _last_write(leaf)]
        if self.nan is None and not math.isfinite(value):
            node, why = nan_origin_graph(fn)
            self.nan = {"step": k, "loss": "NaN" if value != value else "Inf",
                        "op": A.node_name(node) if node is not None else None,
                        "where": A.raw_where(node) if node is not None else None, "why": why,
                        "leaves": [r[0] for r in self.nan_leaves.values() if r[3] == k]}

    def check_leaves_now(self) -> None:
        """After the cell: the leaves the last step saw finite, read once more (the update after
        the last backward call made them non-finite: since that step)."""
        from .model_report import _nonfinite_kind

        k = self.n_backward
        for key, (k_seen, ref) in list(self.finite_at.items()):
            leaf = ref()
            if key in self.nan_leaves or k_seen != k or leaf is None:
                continue
            kind = _nonfinite_kind(A.array(leaf))
            if kind is not None:
                self.nan_leaves[key] = [ref, kind, k, k + 1, _last_write(leaf)]

    def _loss_hook(self, module, args, output):
        """On each loss module seen, every call: its value (the Training tab's curve); a loss
        with grad is a training step (see :meth:`_step`)."""
        seen, self._loss_seen = self._loss_seen, None
        if seen is not None and seen() is output:  # (read when the hook was added)
            return
        if not self.watching and id(module) not in self.loss_checked:  # (a lean cell's first
            self.loss_checked.add(id(module))  # call of it: the global hooks did not see it)
            if type(module).__name__ in _BROADCAST_LOSSES and len(args) >= 2:
                self._broadcast_check(module, args)
        if _is_tensor(output):
            a = A.array(output)
            if a.size == 1 and len(self.losses) < MAX_STEPS:
                self.losses.append(float(a.item()))
            if output.requires_grad:
                self.loss_steps += 1
                if not self.watching:
                    self._step(self.loss_steps, self.trained)

    def _root_pre(self, module, args):
        """On a model trained without a loss module, every call with grad: a training step."""
        if A.grad_on(module):
            k = id(module)
            if self._counted_now == k:  # counted when this hook was registered, in this call
                self._counted_now = None
                return
            n = self.steps[k] = self.steps.get(k, 0) + 1
            if not self.watching and (n == 2 or n % SAMPLE_EVERY == 0 or self.pending_ratio):
                self._step(n, {k: weakref.ref(module)})  # (else a step with nothing to do)

    def step_count(self) -> int:
        """Training steps counted this cell (loss modules with grad, or the models' calls)."""
        return max(self.loss_steps, *self.steps.values(), 0)

    def _step(self, n, models) -> None:
        """A training step once watching is over: the update ratio of the last gradient sample
        is read, and every ``SAMPLE_EVERY``-th step arms the gradient hooks of ``models``."""
        if self.pending_ratio:
            self._ratios()
        if self.light:  # (no hook: the gradients are read at the optimizer step, after the cell)
            if n == 2:
                grad_light.mark(self)
        elif n == 2 or n % SAMPLE_EVERY == 0:  # the second step: a gradient summed into? (and
            for ref in list(models.values()):  # a second point for each sparkline; its update
                mod = ref()  # ratio is the first step's, just read: no copy of the weights)
                if mod is not None:
                    self._arm(mod, with_ratio=n != 2)

    def _mode_pre(self, module, args):
        """On each Dropout / BatchNorm layer of a trained model, once watching is over: train
        mode under no_grad, or eval mode while training, noted on its model (while watching,
        the global hooks' own check does it)."""
        if self.watching:
            return
        grad_on = A.grad_on(module)
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

    def _start_counting(self, skip=None) -> None:
        """Watching is over: steps are counted by the loss modules' hooks, or (no loss module
        used with grad) by a hook on each trained model; mode layers get their check (not
        ``skip``, a model an earlier cell counted and checked already: model_lean)."""
        for k, ref in list(self.trained.items()):
            mod = ref()
            if mod is None or k == skip:
                continue
            if not self.loss_steps and k not in self.roots:
                self.roots[k] = mod.register_forward_pre_hook(self._root_pre)
                n = self.steps[k] = self.steps.get(k, 0) + 1  # the call being made now (its
                self._counted_now = k  # new hook may run in this very call: not twice)
                self._step(n, {k: ref})
            for sub in _submodules(mod):
                if type(sub).__name__ in _MODE_LAYERS and id(sub) not in self.mode_layers:
                    self.mode_layers[id(sub)] = weakref.ref(mod)
                    self.roots[("mode", id(sub))] = sub.register_forward_pre_hook(
                        self._mode_pre)

    # -- gradients: one-shot hooks armed on watched steps ------------------------------------

    def _arm(self, module, with_ratio: bool = True) -> bool:
        """Watch each parameter of ``module`` for its next gradient only (and, ``with_ratio``,
        the update/weight ratio of the step after it): read once the next backward call that
        reaches it is over (``grad_batch``), or by a one-shot hook; from now on a hook on
        ``module`` counts its training steps."""
        self.samples += 1
        trained = False
        params = self.params
        batch = self.batch
        light = [] if self.light else None
        for p in module.parameters():
            if not p.requires_grad:
                continue
            trained = True
            st = params.get(id(p))
            if st is None:
                ref = weakref.ref(p, self._gone)
                st = params[id(p)] = ParamStat(ref, None)
                self._keys[id(ref)] = id(p)
            if light is not None:  # (record=off: no hook; grad_light reads these parameters)
                light.append(st)
                self.light_ids[id(p)] = st
            elif st.armed is None:
                st.sample = self.samples
                st.with_ratio = with_ratio
                if not batch.arm(st, p):
                    self.hook(st, p)
        if trained:
            self.trained[id(module)] = weakref.ref(module)
            if light is not None:
                self.light_params[id(module)] = light
        return trained

    def find_owners(self) -> None:
        """Which module owns each parameter of the models armed this cell (``st.module``: the
        eval-mode check asks it, rarely: found then, not at each arming)."""
        params = self.params
        for ref in list(self.trained.values()):
            for mod in _submodules(ref()) if ref() is not None else ():
                own = mod.__dict__.get("_parameters")  # (both engines keep a plain dict; read
                # directly: parameters(recurse=False) costs a generator chain per module)
                for p in (own.values() if type(own) is dict else mod.parameters(recurse=False)):
                    if p is not None and id(p) in params:
                        params[id(p)].module = weakref.ref(mod)

    def hook(self, st: ParamStat, p) -> None:
        """Arm ``p``'s one-shot gradient hook (its function made once)."""
        if st.hook is None:
            st.hook = self._grad_hook(st)
        st.armed = p.register_hook(st.hook)

    def _disarm(self) -> None:
        self.batch.disarm()
        for st in self.params.values():
            if st.armed is not None:
                st.armed.remove()
                st.armed = None

    def _forget(self, ref) -> None:
        """A watched parameter is gone: its stat goes (one callback for all: no closure each)."""
        st = self.params.pop(self._keys.pop(id(ref), None), None)
        if st is not None:  # (its hook closes over it: freed now, not by a collection)
            st.hook = st.armed = None

    def _grad_hook(self, st: ParamStat):
        tracker = self

        def nbgrad_panel_grad_stats(grad):
            handle, st.armed = st.armed, None
            if handle is not None:
                handle.remove()
            p = st.ref()
            if p is None:
                return None
            old = A.grad(p)  # runs before the new gradient is summed in
            # zero_grad: None, or zeroed in place
            seen(tracker, st, old, old is None or not A.array(old).any())
            if old is not None or not tracker.batch.defer(st, grad):  # (.grad: the new one
                record(tracker, st, p, grad)  # once the pass is over, when not summed into one)
            if tracker.eval_forward:
                eval_check(tracker, st)
            return None

        return nbgrad_panel_grad_stats

    def _on_step(self, optimizer, phase) -> None:
        if self.light and self.light_steps.get(id(optimizer)) != 2:  # (2: its first step read)
            grad_light.on_step(self, optimizer, phase)

    def _step_norm(self, i, sq) -> None:
        """Sum a parameter's squared norm into the total of the backward call running (of the
        sample it was armed for, where backward calls are not seen: a hook armed in an earlier
        cell, whose backward stopped before reaching it, fires in this cell's first step)."""
        norms = self.step_norms
        step = max(self.n_backward, 1)
        if norms and (norms[-1][2] == step if self.n_backward else norms[-1][0] == i):
            norms[-1] = (i, norms[-1][1] + sq, step)
        elif len(norms) < MAX_STEPS:
            norms.append((i, sq, step))

    def _ratios(self) -> None:
        """||weight change|| / ||weight|| of the parameters copied after a watched backward,
        once a forward ran since (``grad_batch.ratios``)."""
        ratios(self)

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

    def recent_calls(self, snap=None, since: int | None = None) -> list:
        """The module calls remembered (the last ``MAX_CALLS``), oldest first; a lean step's
        call is the top-level call and the calls inside its twin, shifted (see
        :meth:`_start_lean`), the newest ones only; with one engine (node numbers grow as calls
        end), none that ended before node number ``since``."""
        out, budget = [], MAX_CALLS
        since = since if since is not None and len(A.engines()) == 1 else None
        for c in reversed(self.calls):
            if since is not None and c.end < since:
                break
            if type(c) is _LeanCall:
                inner = c.expand() if budget > 0 else [c.top()]
                budget -= len(inner)
                out.extend(reversed(inner))
            else:
                out.append(c)
        out.reverse()
        return out

    # -- notes --------------------------------------------------------------------------------

    def note(self, key, who, text, where=None, **kw):
        """A note for this cell, once per key; ``who`` is (module, class) named at report time,
        or None (the text says who)."""
        if key in self.notes or len(self.notes) > 50:
            return
        self.notes[key] = (weakref.ref(who[0]) if who else None, who[1] if who else "", text,
                           where, kw)

class _Frame:
    __slots__ = ("start", "grad_on", "where", "inputs", "child_outputs", "cut", "depth")

    def __init__(self, start, grad_on, where, inputs=frozenset()):
        self.start, self.grad_on, self.where = start, grad_on, where
        self.inputs = inputs  # ids of its tensor arguments
        self.child_outputs = None  # storage addresses of its calls' outputs (a set, once one)
        self.cut = None
        self.depth = 0


_is_tensor = A.is_tensor


_storage_ptr = A.buffer_key  # which memory a tensor views (see adapter.buffer_key)


def _last_write(t):
    """``(op name, raw where)`` of the last in-place write into ``t`` (an optimizer's), or None."""
    try:
        hist = A.version_history(t)
    except Exception:  # noqa: BLE001
        return None
    return (str(hist[-1][1]), hist[-1][2]) if hist else None


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
