"""What the model panel shows after a cell, built from what the hooks saw (``model_hooks``).

:func:`report` turns a :class:`~.model_hooks.ModelTracker`, the namespace and a snapshot into a
:class:`ModelReport`: module clusters, the Gradients tab's rows, the notes (no gradient and why,
accumulated gradients, NaN origin, mode mix-ups, graphs kept alive by containers). :mod:`.model_fold`
rewrites a snapshot with modules folded to one box each; :func:`cluster_dot` gives their DOT
clusters. Plain data only: nothing here holds a tensor.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from itertools import islice

import numpy as np

from . import adapter as A
from . import grad_sums
from .model_hooks import ModelTracker
from .repeats import copy_with

LOOP_STEPS = 5  # a cell with at least this many backward calls is a training-loop cell
KEEP_NOTE = 5  # a container that newly holds this many graphs gets a note
FOLD_ABOVE = 40  # graphs with more nodes start with their modules folded
_CONTAINER_ITEMS = 10000  # items of one list / dict looked at for graphs kept alive
_WALK_NODES = 50000  # graph nodes walked per cell for the bytes those graphs hold


def _where_str(raw) -> str:
    from . import inspect as _inspect

    return _inspect._loc_str(raw) if raw is not None else ""


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
    grad_norm_steps: list = field(default_factory=list)  # the step (backward call) of each
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


@dataclass
class Scan:
    """One pass over the namespace after a cell: what the model report reads from it."""

    mods: dict = field(default_factory=dict)  # id(module) -> its path ("model.0")
    params: dict = field(default_factory=dict)  # id(parameter) -> its path ("model.0.weight")
    tops: list = field(default_factory=list)  # the top-level modules
    containers: list = field(default_factory=list)  # [(name, list / tuple / dict / deque)]


_CONTAINERS = (list, tuple, dict, deque)


def scan(ns: dict, skip=()) -> Scan:
    """The namespace's modules (with their submodules' and parameters' paths) and containers, in
    one pass that judges each value by its type once per type (the cost per name is a dict
    lookup: a session of thousands of names pays little for it)."""
    out = Scan()
    kinds: dict = {}  # type -> "module" | "container" | None
    for _ in range(3):
        try:
            entries = list(ns.items())
            break
        except RuntimeError:  # another thread changed the namespace mid-copy
            entries = []
    for name, v in entries:
        cls = type(v)
        kind = kinds.get(cls, 0)
        if kind == 0:
            try:
                kind = ("container" if cls in _CONTAINERS
                        else "module" if A.is_module(v) else None)
            except Exception:  # noqa: BLE001 - one odd object never silences the panel
                kind = None
            kinds[cls] = kind
        if kind is None or type(name) is not str or name[:1] == "_" or name in skip:
            continue
        if kind == "container":
            out.containers.append((name, v))
            continue
        try:
            mods, params = {}, {}
            for i, (sub, m) in enumerate(v.named_modules()):
                if i > 500:
                    break
                mods.setdefault(id(m), f"{name}.{sub}" if sub else name)
            for i, (pname, p) in enumerate(A.named_parameters(v)):
                if i > 2000:
                    break
                params.setdefault(id(p), f"{name}.{pname}")
        except Exception:  # noqa: BLE001 - one odd object never silences the panel
            continue
        out.tops.append(v)
        for k, path in mods.items():
            out.mods.setdefault(k, path)
        for k, path in params.items():
            out.params.setdefault(k, path)
    return out


def report(tracker: ModelTracker, ns: dict, skip=(), scanned: Scan | None = None,
           failed: bool = False) -> ModelReport:
    """What this cell did to the namespace's models: gradients after its backward calls and the
    notes the hooks took; :func:`with_graph` adds what needs the cell's snapshot. ``scanned``:
    this cell's :func:`scan` of ``ns`` (made here when not given); ``failed``: the cell ended
    with an autograd error (a backward may have stopped before reaching some parameters)."""
    rep = ModelReport()
    scanned = scanned or scan(ns, skip)
    mods, pnames = scanned.mods, scanned.params
    counted = max(tracker.loss_steps, max(tracker.steps.values(), default=0))
    rep.steps = tracker.n_backward or max(  # (an engine whose backward calls are not seen)
        counted if tracker.backward_seen else 0,
        max((st.hits for st in tracker.params.values()), default=0))
    # the values backward started from (what is optimised: a functional loss too), else the
    # loss modules' outputs
    rep.losses = list(tracker.backward_losses) or list(tracker.losses)
    rep.grad_norm_steps = [k for _, _, k in tracker.step_norms]
    rep.grad_norms = [math.sqrt(s) if s == s else float("nan") for _, s, _ in tracker.step_norms]
    backward_models = set()
    summed: dict = {}  # ("at least " or "", backward calls) -> parameters summed into
    for pid, st in tracker.params.items():
        name = pnames.get(pid)
        p = st.ref()
        if name is None or p is None or not rep.steps:
            continue
        if st.hits:
            backward_models.add(name.split(".", 1)[0])
        n = grad_sums.accumulated(tracker, st, p)
        least = "at least " if st.missed else ""
        if n >= 2 and st.hits:
            summed.setdefault((least, n), []).append(name)
        rep.params.append(ParamRow(  # (the Gradients tab's "accumulated xN" is the note's N)
            name, tuple(int(s) for s in p.shape), st.norms[-1] if st.norms else None,
            st.ratios[-1] if st.ratios else None, st.zeros, list(st.norms), n, st.nonfinite))
        if st.nonfinite and st.hits:
            rep.notes.append(f"{name}.grad has NaN or Inf values")
    rep.params.sort(key=lambda r: r.name)
    for (least, n), names in summed.items():
        grads = ", ".join(f"{x}.grad" for x in sorted(names))
        rep.notes.append(f"{grads} accumulated from {least}{n} backward calls since zero_grad "
                         "(fine if you meant to accumulate gradients)")
    # parameters of a model that had a backward this cell but got no gradient, and of the other
    # models called with grad on in this cell (their output never reached a backward)
    others = set()
    if backward_models:
        others = {mods[k].split(".", 1)[0] for k in tracker.trained if k in mods} - backward_models
    if backward_models:
        by_module = {}
        for name, p in _named_params(ns, backward_models | others):
            if p.requires_grad and id(p) in tracker.params and \
                    tracker.params[id(p)].hits == 0:
                by_module.setdefault(name.rsplit(".", 1)[0], []).append(name)
        mod_of = {path: mid for mid, path in mods.items()}
        calls = tracker.recent_calls() if by_module else []  # (a copy of up to MAX_CALLS)
        for path, names in by_module.items():
            why, cut = _why_no_grad(mod_of.get(path), calls, mods)
            outer = path
            while not cut and "." in outer:  # cut around it: in a module that holds it
                outer = outer.rsplit(".", 1)[0]
                why2, cut = _why_no_grad(mod_of.get(outer), calls, mods, who=outer)
                why = why2 if cut else why
            if not cut and failed and tracker.n_backward:  # (not "never reached the loss")
                why = "the backward stopped with an error before reaching it (see the Error tab)"
            rep.notes.append(f"{', '.join(names)} got no gradient: {why}")
    rep.notes[:0] = nan_notes(tracker, pnames, scanned)
    for _key, (mref, cls, text, where, kw) in tracker.notes.items():
        m = mref() if mref is not None else None
        path = mods.get(id(m)) if m is not None else None
        who = (f"{path} ({cls}) " if path else f"a {cls} ") if cls else ""
        rep.notes.append(who + text.format(where=_where_str(where) or "?", **kw))
    return rep


def nan_notes(tracker: ModelTracker, pnames: dict, scanned: Scan | None = None) -> list:
    """The loop's NaN / Inf in words: the step whose loss first was non-finite and the op that
    made the first non-finite value in it; which parameters (and buffers) hold NaN / Inf, since
    which step and written by what. Steps count the backward calls of the cell from 1."""
    if tracker.nan is None and not tracker.nan_leaves:
        return []
    tracker.check_leaves_now()
    out = []
    n = tracker.n_backward
    nan = tracker.nan
    if nan is not None:
        text = f"the loss is {nan['loss']} from step {nan['step']} of {n} on"
        if nan["op"] is not None:
            where, source = _where_of(nan["where"])
            text += (f"; the first non-finite value was made by {nan['op']}"
                     + (f" at {where}" if where else "") + (f" ({source})" if source else "")
                     + f" in step {nan['step']}")
        elif nan["why"] == "leaf":
            text += (f"; in step {nan['step']} it was already computed from leaves holding "
                     "NaN/Inf")
        out.append(text)
    groups: dict = {}
    for ref, kind, since, seen, write in tracker.nan_leaves.values():
        leaf = ref()
        if leaf is None:
            continue
        name = pnames.get(id(leaf)) or f"a leaf of shape {list(A.shape(leaf))}"
        if since is not None:
            how = f"since step {since}"
            if write is not None:
                where, source = _where_of(write[1])
                how += (f" (written by {write[0]}" + (f" at {where}" if where else "")
                        + (f": {source}" if source else "") + ")")
        else:
            how = f"already when step {seen} ran"
        groups.setdefault((kind, how), []).append(name)
    for (kind, how), names in groups.items():
        names = sorted(names)
        verb = "holds" if len(names) == 1 else "hold"
        out.append(f"{', '.join(names)} {verb} {kind} {how}")
    bufs = []
    for top in (scanned.tops if scanned is not None else ()):
        try:
            for bname, b in top.named_buffers():
                if A.is_tensor(b) and _nonfinite_kind(A.array(b)) is not None:
                    bufs.append(f"{scanned.mods.get(id(top), '?')}.{bname}")
        except Exception:  # noqa: BLE001 - a module that cannot list its buffers
            continue
    if bufs:
        out.append(f"buffers holding NaN/Inf now: {', '.join(sorted(set(bufs))[:8])}")
    return out


def _where_of(raw) -> tuple:
    from . import inspect as _inspect

    return _inspect._where_of(raw)


def with_graph(rep: ModelReport | None, tracker: ModelTracker, ns: dict, snap, skip=(),
               scanned: Scan | None = None, named=None) -> ModelReport | None:
    """``rep`` (or a new report) with the snapshot's module clusters, the origin of a NaN in a
    tensor this cell made or changed, and the containers keeping graphs alive; None if empty.
    ``scanned`` (this cell's :func:`scan`) and ``named`` (its named tensors) are made here when
    not given."""
    rep = rep or ModelReport()
    scanned = scanned or scan(ns, skip)
    rep.clusters = graph_clusters(tracker, ns, snap, skip, scanned)
    changed = {n for t in snap.tensors if t.named and t.version_delta != 0
               for n in t.name.split(" = ")}
    rep.nan = None if tracker.nan is not None else nan_origin(ns, skip, only=changed,
                                                                named=named)
    if rep.nan:
        n = rep.nan
        if n["op"] is not None:
            text = (f"{n['tensor']} has {n['kind']}: the first op that produced it is {n['op']}"
                    + (f" at {n['where']}" if n["where"] else "")
                    + (f" ({n['source']})" if n["source"] else ""))
        elif n["leaves"]:
            text = (f"{n['tensor']} has {n['kind']}: {', '.join(x for x in n['leaves'] if x)} "
                    "held NaN/Inf already")
        else:
            text = (f"{n['tensor']} has {n['kind']}: its graph's saved tensors were freed by "
                    "backward, so where it was first made is not known")
        rep.notes.insert(0, text)
    if not any(n.startswith("a loss target") or "target broadcasts" in n for n in rep.notes):
        rep.notes += broadcast_losses(snap)
    rep.kept_alive = kept_alive(ns, skip, scanned.containers, tracker.kept_walks)
    before, tracker.kept = tracker.kept, {k[0]: k[1] for k in rep.kept_alive}
    for name, graphs, nbytes, kind, _nodes in rep.kept_alive:
        if graphs >= KEEP_NOTE and graphs > before.get(name, 0):
            from .render import _in_bytes

            rep.notes.append(f"{name} ({kind}) keeps {graphs} graphs alive, "
                             f"{_in_bytes(nbytes)} (see Memory): append loss.item() to keep "
                             "only the number")
    return None if rep.is_empty() else rep


def graph_clusters(tracker: ModelTracker, ns: dict, snap, skip=(),
                   scanned: Scan | None = None) -> dict:
    """The module clusters of ``snap`` (:func:`clusters`); the parameters its graph reaches get
    their module path as name. ``scanned``: the namespace's :func:`scan`, made here if None."""
    scanned = scanned or scan(ns, skip)
    lo = min((n.seq for n in snap.nodes.values() if n.seq and not n.is_accumulate), default=None)
    return clusters(snap, tracker.recent_calls(snap, since=lo), scanned.mods, scanned.params)


def _named_params(ns, top_names):
    for top in top_names:
        m = ns.get(top)
        try:
            for pname, p in A.named_parameters(m):
                yield f"{top}.{pname}", p
        except Exception:  # noqa: BLE001
            continue


_CUT_HOW = {"detach": "detached", "detach_": "detached in place (.detach_())",
            "data": "taken out of the graph through .data",
            "from_numpy": "turned into numpy and back (from_numpy)"}


def _why_no_grad(module_id, calls, mods, who=None) -> tuple[str, bool]:
    """Where the path from a module's parameters to the loss was cut: where the ``.detach()``,
    ``.data`` or numpy round trip ran when the core recorded it (provenance on), else where the
    next module used the cut tensor. ``(text, whether a cut was found)``; ``who``: the path of an
    outer module asked about instead (the text then names it)."""
    seen = [c for c in calls if module_id is not None and id(c.ref()) == module_id]
    mine = [c for c in seen if c.watched]
    if not mine:  # (record=off: calls inside a model are known by their node range only)
        return ("its path to the loss was cut (with record=off, where is not known)" if seen
                else "its module was not called since the panel was loaded"), False
    last = mine[-1]
    mod = f"{who} ({last.cls})" if who else "its module"
    if not last.grad_on:
        return f"{mod} ran under no_grad at {_where_str(last.where) or '?'}", True
    out = f"the output of {mod}" if who else "its module's output"
    if not last.out_requires_grad:
        if last.out_cut is not None and last.out_cut[0] in _CUT_HOW:
            return (f"{out} was {_CUT_HOW[last.out_cut[0]]} inside its forward at "
                    f"{_where_str(last.out_cut[1]) or '?'}"), True
        return f"{out} did not require grad (detached inside its forward)", True
    out = f"the output of {mod}" if who else "its output"
    later = [c for c in calls if c.watched and c.start >= last.end and c.cut is not None]
    for c in sorted(later, key=lambda c: not c.cut[2])[:1]:  # what the storages confirm first
        where, how = _where_str(c.cut[0]) or "?", c.cut[1]
        m = c.ref()
        user = f"{mods.get(id(m), 'a')} ({c.cls})"
        if how in _CUT_HOW:
            return f"{out} was {_CUT_HOW[how]} at {where}, before {user} used it", True
        how = ("detached (.detach() or .data)" if how == "shared"
               else "cut from the graph (a .detach(), .data or a numpy round trip)")
        return f"{out} was {how} before {user} used it at {where}", True
    return ("its output never reached the loss (a .detach(), .data, a numpy round trip or an "
            "unused layer)"), False


def clusters(snap, calls, mods: dict, pnames: dict | None = None) -> dict:
    """``{key: {"title", "parent", "keys"}}``: the snapshot's nodes grouped by the innermost
    module call that made them (its node range), each parameter's box with the module that owns
    it. A cluster's key is the path from the module the user called (its name in the namespace,
    ``mods``: ``id -> path``) down to the module (``lm.head``; its title ``lm.head (Linear)``),
    one for all the calls of a module. A module no call of which made a drawn node has no
    cluster.
    Unnamed parameters get their path as name (``pnames``, then their module's)."""
    seqs = sorted((n.seq, k) for k, n in snap.nodes.items()
                  if getattr(n, "seq", 0) and not n.is_accumulate)
    if not seqs:
        return {}
    lo, hi = seqs[0][0], seqs[-1][0]
    calls = [c for c in calls if c.end >= lo]  # (ended before the first node: none of ours)
    parent: dict = {}  # index of a call -> index of the call it ran in (post order: the next
    open_: dict = {}  # call one level up to end after it)
    for i in range(len(calls) - 1, -1, -1):
        c = calls[i]
        j = open_.get(c.depth - 1)
        if j is not None and calls[j].start <= c.start and c.end <= calls[j].end:
            parent[i] = j
        open_[c.depth] = i
        for d in [d for d in open_ if d > c.depth]:
            del open_[d]
    near = [i for i, c in enumerate(calls) if c.end >= lo and c.start < hi]
    # innermost first: the narrowest call containing a node wins
    near.sort(key=lambda i: (calls[i].end - calls[i].start, -calls[i].depth))
    from bisect import bisect_right

    seq_list = [s for s, _ in seqs]
    made: dict = {}  # index of a call -> keys of the nodes it made (innermost)
    taken: set = set()
    for i in near:
        c = calls[i]
        for s, k in seqs[bisect_right(seq_list, c.start):bisect_right(seq_list, c.end)]:
            if k not in taken:
                taken.add(k)
                made.setdefault(i, []).append(k)
    shown = set(made)
    for i in list(made):  # the calls around them (``model`` around ``model.0``)
        while i in parent and parent[i] not in shown:
            i = parent[i]
            shown.add(i)
    within: dict = {}  # id(module) -> {id(submodule): its path inside it}
    keys: dict = {}  # index -> cluster key, or None (an unnamed module)
    out: dict = {}
    owner: dict = {}  # id(parameter) -> (cluster key, parameter name)

    def rel(outer, m):
        subs = within.get(id(outer))
        if subs is None:
            subs = within[id(outer)] = _subpaths(outer)
        return subs.get(id(m))

    def key_of(i):
        if i in keys:
            return keys[i]
        keys[i] = None
        c = calls[i]
        m = c.ref()
        if m is None:
            return None
        base = None
        j = parent.get(i)
        up = calls[j].ref() if j is not None else None
        if up is not None and j in shown:
            r = rel(up, m)
            pk = key_of(j)
            if r is not None and pk is not None:
                base = f"{pk}.{r}" if r else pk
        if base is None:
            root = c.root() if c.root is not None else None
            top = mods.get(id(root)) if root is not None else None
            r = rel(root, m) if top is not None else None
            base = (f"{top}.{r}" if r else top) if r is not None else mods.get(id(m))
        if base is None:
            return None
        key = keys[i] = base
        if key in out:  # the module called again: one cluster for its calls
            return key
        out[key] = {"title": f"{key} ({c.cls})", "parent": None, "keys": []}
        try:
            own = m.__dict__.get("_parameters")  # (both engines keep a plain dict: read directly,
            # parameters(recurse=False) costs a generator chain per module)
            for pname, p in (own.items() if type(own) is dict
                             else m.named_parameters(recurse=False)):
                if p is not None:
                    owner.setdefault(id(p), (key, pname))
        except Exception:  # noqa: BLE001 - a module that cannot list its parameters
            pass
        return key

    for i in sorted(shown, key=lambda i: (calls[i].start, calls[i].depth)):
        key_of(i)
    for i, ks in made.items():
        key = keys.get(i)
        if key is not None:  # the nodes, and the tensors they saved
            out[key]["keys"] += [x for k in ks
                                 for x in [k] + [sv.key for sv in snap.nodes[k].saved]]
    by_tensor = {t.key: t for t in snap.tensors}
    for n in snap.nodes.values():
        t = by_tensor.get(n.variable) if n.variable else None
        if t is None:
            continue
        hit = owner.get(int(t.key[1:]))
        if hit is not None:
            out[hit[0]]["keys"] += [n.key, t.key]
        if not t.name:
            path = (pnames or {}).get(int(t.key[1:]))
            t.name = path or (f"{hit[0]}.{hit[1]}" if hit is not None else "")
    for key, c in out.items():
        up = key.rsplit(".", 1)[0] if "." in key else None
        while up is not None and up not in out:
            up = up.rsplit(".", 1)[0] if "." in up else None
        c["parent"] = up
    return {p: c for p, c in out.items() if c["keys"] or any(
        o["parent"] == p for o in out.values())}


def _subpaths(root) -> dict:
    """``{id(module): path inside root}`` ("" for the root itself, "fc1", "blocks.0.attn")."""
    try:
        return {id(m): name for i, (name, m) in enumerate(root.named_modules()) if i <= 2000}
    except Exception:  # noqa: BLE001
        return {}


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


def cluster_dot(rep: ModelReport, shown: set, folded=()) -> list:
    """DOT ``subgraph cluster_...`` blocks (nested as the modules are) naming the shown keys."""
    if not rep.clusters:
        return []
    folded = set(folded)
    kids: dict = {}
    for p, c in rep.clusters.items():
        kids.setdefault(c["parent"], []).append(p)
    out = []

    def emit(path, pad) -> list:
        c = rep.clusters[path]
        if folded and (path in folded or any(  # (a folded module or one inside it)
                path[:i] in folded for i, ch in enumerate(path) if ch == ".")):
            return []
        keys = [k for k in c["keys"] if k in shown]
        inner = [line for s in kids.get(path, []) for line in emit(s, pad + "  ")]
        if not keys and not inner:  # nothing of it drawn (folded away, or in a hidden copy)
            return []
        cid = cluster_id(path)
        lines = [f'{pad}subgraph "{cid}" {{',
                 f'{pad}  id="{cid}"; label="{_esc(c["title"])}"; labeljust=l; fontsize=10; '
                 'style="rounded,dashed"; color="#8a8aa8"; fontcolor="#44446a";']
        if keys:
            lines.append(pad + "  " + "; ".join(f'"{k}"' for k in dict.fromkeys(keys)) + ";")
        return lines + inner + [pad + "}"]

    for root in kids.get(None, []):
        out += emit(root, "  ")
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
        bad = a.dtype.kind in "fc" and not np.isfinite(a).all()
        return ("NaN" if np.isnan(a).any() else "Inf") if bad else None
    except Exception:  # noqa: BLE001
        return None


def nan_origin(ns: dict, skip=(), only=None, named=None) -> dict | None:
    """The first op (lowest sequence number) whose output holds NaN/Inf, found from a named
    non-finite tensor (of the names in ``only``, when given) through the saved tensors of its
    graph (no anomaly mode needed). ``named``: ``ns``'s named tensors, when already listed.
    ``op`` is None when the graph cannot tell (its saved tensors were freed by backward);
    ``leaves``: the names of the graph's leaves that hold NaN/Inf themselves."""
    from . import inspect as _inspect

    if named is None:
        named = _inspect.named_tensors(ns, skip=skip)
    if only is not None:
        named = [(name, t) for name, t in named if name in only] if only else []
    names = {id(t): name for name, t in named}
    for name, t in named:
        fn = t.grad_fn
        if fn is None or t.numel() > 1_000_000:
            continue
        kind = _nonfinite_kind(A.array(t))
        if kind is None:
            continue
        best, _why = nan_origin_graph(fn)
        where, source = _inspect._where(best) if best is not None else ("", "")
        leaves = [names.get(id(v), "") for v in graph_leaves(fn)
                  if _nonfinite_kind(A.array(v)) is not None]
        return {"tensor": name, "kind": kind, "op": A.node_name(best) if best else None,
                "where": where, "source": source, "leaves": leaves}
    return None


def graph_leaves(fn, limit: int = 5000) -> list:
    """The leaf tensors (``AccumulateGrad``'s variables) of the graph under ``fn``."""
    out, seen, stack = [], {id(fn)}, [fn]
    while stack and len(seen) < limit:
        node = stack.pop()
        v = A.leaf_variable(node)
        if v is not None:
            out.append(v)
        for nf in A.next_nodes(node):
            if id(nf) not in seen:
                seen.add(id(nf))
                stack.append(nf)
    return out


def nan_origin_graph(fn) -> tuple:
    """``(node, why)``: the op of the graph under ``fn`` that made its first non-finite value
    from finite inputs (the lowest sequence number among the nodes whose output a saved tensor
    shows non-finite, or that saved the 0 of a log or a division), or ``(None, why)``: a leaf
    holds NaN/Inf already (``"leaf"``), or backward freed what would tell (``"freed"``)."""
    best = None
    queue, seen = [fn], {id(fn)}
    head = 0
    released = leaf_bad = False
    while head < len(queue) and head < 5000:
        node = queue[head]
        head += 1
        nxt = A.next_nodes(node)
        v = A.leaf_variable(node)
        if v is not None and _nonfinite_kind(A.array(v)) is not None:
            leaf_bad = True
        saved = {}
        for st in A.saved_tensors(node):
            if st.released:
                released = True
                continue
            try:
                data = saved[st.name] = A.saved_value(node, st.name)
            except Exception:  # noqa: BLE001
                continue
            if _nonfinite_kind(data) is None:
                continue
            src = node if st.is_output else _input_node(node, st.name, nxt)
            if src is not None and A.leaf_variable(src) is None and (
                    best is None or A.sequence_number(src) < A.sequence_number(best)):
                best = src
        if (best is None or A.sequence_number(node) < A.sequence_number(best)) and \
                _out_of_domain(A.node_name(node), saved):
            best = node
        for nf in nxt:
            if id(nf) not in seen:
                seen.add(id(nf))
                queue.append(nf)
    if leaf_bad:
        return None, "leaf"
    if best is None:
        return (None, "freed") if released else (fn, "")
    return best, ""


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


def kept_alive(ns: dict, skip=(), containers=None, cache: dict | None = None) -> list:
    """``[(variable, graphs, bytes, container type, nodes)]``: the lists / tuples / dicts /
    deques of the namespace holding two or more tensors with a ``grad_fn``
    (``history.append(loss)``); bytes: the tensors' own and their graphs' unreleased saved
    tensors. ``containers``: ``[(name, container)]`` of ``ns`` when already listed
    (:func:`scan`). ``cache`` (kept by the caller from one cell to the next): a container
    holding the same graphs as last time, all of whose saved tensors were already released, is
    not walked again (a graph never changes, and a released saved tensor stays released)."""
    out = []
    budget = [_WALK_NODES]
    if containers is None:
        containers = scan(ns, skip).containers
    old = dict(cache) if cache is not None else {}
    if cache is not None:
        cache.clear()
    for name, v in containers:
        try:
            items = list(islice(v.values() if type(v) is dict else v, _CONTAINER_ITEMS))
        except Exception:  # noqa: BLE001
            continue
        held = [t for t in items if A.is_tensor(t) and A.grad_fn(t) is not None]
        if len(held) < 2:
            continue
        roots = [A.grad_fn(t) for t in held]
        key = (id(v), tuple(map(id, roots)))
        hit = old.get(name)
        if hit is not None and hit[0] == key:
            cache[name] = hit
            out.append(hit[1])
            continue
        seen: set = set()
        buffers: set = set()  # a saved tensor shared by several graphs counts once
        nbytes = sum(int(t.numel()) * int(t.element_size()) for t in held)
        queue = list(roots)
        seen.update(id(r) for r in roots)
        final = True  # every saved tensor released, the whole graph walked
        while queue and budget[0] > 0:
            node = queue.pop()
            budget[0] -= 1
            for st in A.saved_tensors(node):
                if not st.released:
                    final = False
                    if (st.data_ptr, st.shape) not in buffers:
                        buffers.add((st.data_ptr, st.shape))
                        nbytes += int(st.nbytes or 0)
            for nf in A.next_nodes(node):
                if id(nf) not in seen:
                    seen.add(id(nf))
                    queue.append(nf)
        entry = (name, len(roots), nbytes, type(v).__name__, len(seen))
        if cache is not None and final and not queue:
            cache[name] = (key, entry)
        out.append(entry)
    return out
