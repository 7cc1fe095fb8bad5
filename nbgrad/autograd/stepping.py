"""`tensor.backward()` one node at a time: the engine's walk, paused between nodes.

`BackwardWalk(loss)` does what `engine.run_backward([loss], [None], retain_graph=False,
create_graph=False)` does, in the same order and with the same calls, but one node per `step()`,
so that a teacher can show each node's incoming gradient, the formula it applies and what it
sends along each edge (`nbgrad/notebook/stepper.py` draws it; `%nbgrad step loss`):

- the order is the engine's: dependency counts over the reachable graph, then ready nodes
  highest sequence number first (`engine.run_backward`'s heap; its chain shortcut runs the node
  the heap would give);
- each node runs through the engine's own functions: `_run_prehooks` (tensor hooks,
  retain_grad), `node._backward` (or `anomaly.run_node` under detect_anomaly),
  `_run_posthooks`, `node._release()` (saved tensors freed as it goes, unless `retain_graph`);
- gradients reaching a node along several edges are added in arrival order, `a + b` as the
  engine's `old += gi` / `old + gi` (the same IEEE additions, so the leaves' `.grad` are bit for
  bit those of `loss.backward()`); each contribution is kept (through `keep`) to show the sum;
- an error a node raises (a saved tensor modified in place) stops the walk at that node with the
  very exception `backward()` raises there.

Between steps grad mode, the `RUNNING` count and numpy's warning state are the user's: the
engine's process-wide switches are set only while a node runs (a backward paused on another
thread would leave the user's next cells in no-grad mode).

Gradient buffers are owned as the engine owns them (its `shared` set and `bumps` counts: an
arriving gradient is added in place into a buffer only the engine holds, a first gradient only
the engine holds becomes `.grad` without a copy at `_version` 0, a view's memory is shared as
`engine._ownership` decides), so `.grad`'s object, memory and `_version` are those of
`backward()`. What a step shows is what `keep` made of a gradient before it was added into:
`keep` must copy (the default does).
"""
from __future__ import annotations

from heapq import heappop, heappush

import numpy as np

from . import anomaly, engine
from .grad_mode import STATE
from .graph import AccumulateGrad, _Rare
from ..backend import loud, quiet


def _copy(a):
    return None if a is None else a.copy()


class Step:
    """One node of the walk, as plain data (what `keep` made of its arrays), no node kept.

    `index` (0-based position in the engine's order), `name` (`MulBackward0`), `key`
    (`"n<id(node)>"`, the panel's key of that node), `seq` (its sequence number), `grad_in`
    (what `keep` made of the gradient it ran on, a list per output for multi-output nodes; None:
    no gradient reached it and it passed nothing on, as the engine's), `parts` (per output, the
    `(sender key, sender name, kept gradient)` that were added up, in arrival order), `grads_out`
    (per edge `(child key or None, child name, kept gradient or None)`), `error` (the exception it
    raised, or None), `leaf` (AccumulateGrad: the id of its leaf tensor)."""

    __slots__ = ("index", "name", "key", "seq", "grad_in", "parts", "grads_out", "error", "leaf")

    def __init__(self, index, name, key, seq):
        self.index, self.name, self.key, self.seq = index, name, key, seq
        self.grad_in = None
        self.parts = []
        self.grads_out = []
        self.error = None
        self.leaf = None

    def __repr__(self):
        return f"<Step {self.index}: {self.name}>"


def _key(node):
    return f"n{id(node)}"


class BackwardWalk:
    """`root.backward()` (implicit gradient of ones, a scalar root) paused before each node.

    Args:
        root: a Tensor that requires grad, one element (as `backward()` without `gradient`).
        retain_graph: keep saved tensors (as `backward(retain_graph=True)`).
        keep: `keep(array) -> object`, what a step keeps of each gradient it shows (default: a
            copy; the notebook keeps the values of small ones and a summary of the others).

    Raises RuntimeError as `root.backward()` does before running anything (no grad_fn; not a
    scalar). `step()` runs the next node and returns its `Step`; `run()` runs to the end or the
    first error; `done`, `error`, `steps` (those run), `pending()` (the next node, or None)."""

    def __init__(self, root, retain_graph=False, keep=_copy):
        __tracebackhide__ = True
        self.keep = keep
        self.release = not retain_graph
        roots = engine._make_root_grads([root], [None], False)
        node, nr = engine._root_edge(root)
        if node is None:
            raise RuntimeError("element 0 of tensors does not require grad and does not have a "
                               "grad_fn")
        self.root_grad = roots[0][1]
        # readers see PyTorch's nodes: a fused decomposition (autograd/fused.py) is built now,
        # as the panel's first look at the graph builds it, so the walk runs the chain's nodes
        seen = {node}
        stack = [node]
        while stack:
            for c, _ in stack.pop().next_functions:
                if c is not None and c not in seen:
                    seen.add(c)
                    stack.append(c)
        if engine.BACKWARD_OBSERVERS:
            for cb in tuple(engine.BACKWARD_OBSERVERS):
                cb([root], "backward")
        # dependency counts over the reachable graph, as the engine counts them
        deps = {node: 0}
        stack = [node]
        while stack:
            n = stack.pop()
            for c, _ in n._next:
                if c is not None:
                    d = deps.get(c)
                    if d is None:
                        deps[c] = 1
                        stack.append(c)
                    else:
                        deps[c] = d + 1
        self.deps = deps
        self.buffers = {}  # node -> summed gradient (a list per output for multi-output nodes)
        # as the engine's: nodes whose buffer something else may hold (loss.backward(): none at
        # first), and in-place additions into a buffer (its .grad's _version)
        self.shared = set()
        self.bumps = {}
        self.parts = {}  # node -> per output [(sender key, sender name, kept gradient)]
        self._arrive(node, nr, self.root_grad, None, "backward()", False)
        deps[node] = -1
        self.ready = [(-node._seq, node)]
        self.steps = []
        self.error = None
        self.done = False
        self.nodes_total = len(deps)

    def _arrive(self, c, nr, g, sender_key, sender_name, shared, bump=0):
        """Gradient `g` reaches output `nr` of node `c`: added to what came before, left to
        right in arrival order, as `engine.run_backward`'s edge loop adds it (`old += gi` into
        a buffer only the engine holds, else `old + gi`; `_accumulate`). `shared`: something
        else may hold `g`; `bump`: its version (a formula that wrote it in place)."""
        part = (sender_key, sender_name, self.keep(g))
        if c._n_out == 1:
            self.parts.setdefault(c, [[]])[0].append(part)
            old = self.buffers.get(c)
            if old is None:
                self.buffers[c] = g
                if shared:
                    self.shared.add(c)
                if bump:
                    self.bumps[c] = bump
            elif (old.base is None and old.flags.writeable if type(old) is np.ndarray
                  else isinstance(old, np.generic)) and old.dtype is g.dtype and \
                    old.shape == g.shape and c not in self.shared:
                if type(old) is np.ndarray:
                    old += g
                else:
                    self.buffers[c] = old + g
                self.bumps[c] = self.bumps.get(c, 0) + 1
            else:
                self.buffers[c] = old + g
                self.shared.discard(c)
                self.bumps.pop(c, None)
        else:
            lst = self.buffers.get(c)
            if lst is None:
                lst = self.buffers[c] = [None] * c._n_out
                self.parts[c] = [[] for _ in range(c._n_out)]
            lst[nr] = engine._add(lst[nr], g)
            self.parts[c][nr].append(part)

    def pending(self):
        """The node that runs next, or None when the walk is over."""
        if self.done or not self.ready:
            return None
        return self.ready[0][1]

    def pending_grad(self):
        """The gradient the next node will run on (a list per output for multi-output nodes),
        or None; and its parts (per output, the sender key, name, kept gradient)."""
        node = self.pending()
        if node is None:
            return None, []
        return self.buffers.get(node), self.parts.get(node, [])

    def step(self):
        """Run the next node as the engine runs it; returns its Step (None when over)."""
        __tracebackhide__ = True
        if self.done or not self.ready:
            self.done = True
            return None
        node = heappop(self.ready)[1]
        gs = self.buffers.pop(node, None)
        st = Step(len(self.steps), node.name(), _key(node), node._seq)
        st.parts = self.parts.pop(node, [])
        keep = self.keep
        if gs is not None:
            st.grad_in = [None if g is None else keep(g) for g in gs] \
                if node._n_out > 1 else keep(gs)
        if type(node) is AccumulateGrad:
            st.leaf = id(node.variable)
        self.steps.append(st)
        out = None
        hooked = False
        prev = STATE.enabled
        STATE.enabled = False
        engine.RUNNING[0] += 1
        token = quiet()
        try:
            if gs is not None:
                hooks = node._site
                if type(hooks) is not _Rare:  # (a node's hooks: kept with its where)
                    hooks = None
                if hooks is not None and hooks.pre:
                    new, kept = engine._run_prehooks(node, gs, node._n_out > 1, False)
                    if new is not gs:  # a hook's result: its own version
                        self.bumps.pop(node, None)
                    gs = new
                    if kept:  # (a hook kept what it was given)
                        self.shared.add(node)
                if type(node) is AccumulateGrad:
                    owned = engine._ownership(node, gs, self.shared, [None])  # (gs held once)
                    node._backward(gs, False, owned, self.bumps.get(node, 0))
                else:
                    if anomaly.STATE.enabled:
                        out = anomaly.run_node(node, gs, False, anomaly.STATE.check_nan)
                    else:
                        out = node._backward(gs, False)
                    if hooks is not None and hooks.post:
                        out = engine._run_posthooks(node, out, gs)
                        hooked = True
                if self.release and node._saved is not None:
                    node._release()
        except Exception as exc:  # noqa: BLE001 - the walk stops where backward() would raise
            st.error = exc
            self.error = exc
            self.done = True
            self._drop()
            return st
        finally:
            engine.RUNNING[0] -= 1
            STATE.enabled = prev
            loud(token)
        gv = node._grad_version
        dup = out is not None and len(out) > 1 and engine._twice(out)
        own = node in self.shared
        for i, (c, nr) in enumerate(node._next):
            gi = out[i] if out is not None else None
            if c is None:
                st.grads_out.append((None, "", None if gi is None else keep(gi)))
                continue
            st.grads_out.append((_key(c), c.name(), None if gi is None else keep(gi)))
            if gi is not None:
                self._arrive(c, nr, gi, st.key, st.name, hooked or dup or gi is gs and own,
                             gv if gv and gi is not gs else
                             self.bumps.get(node, 0) if gi is gs else 0)
            d = self.deps[c] - 1
            self.deps[c] = d
            if d == 0:
                heappush(self.ready, (-c._seq, c))
        if not self.ready:
            self.done = True
            self._drop()
        return st

    def run(self):
        """Run every remaining node (or up to the first error); returns the steps run now."""
        out = []
        while not self.done:
            st = self.step()
            if st is None:
                break
            out.append(st)
        return out

    def _drop(self):
        """Over: keep no node, no gradient (the steps are plain data)."""
        self.ready = []
        self.buffers = {}
        self.parts = {}
        self.deps = {}
        self.shared = set()
        self.bumps = {}
        self.root_grad = None
