"""Repeated structure in a graph: a loop that built the same sub-graph many times, drawn once.

Nodes made by the same code (same op, same line and instruction: a :class:`NodeInfo`'s ``site``)
in the same order, again and again, are the copies of one loop body. :func:`find` looks for such
runs in the nodes of a snapshot ordered by creation (``seq``); :func:`fold` keeps one copy (the
last, or the one holding a stale saved tensor) with the count, and moves every edge of the other
copies onto it. Pure functions of plain data, shared by the DOT, the text tree and the widget.
"""

from __future__ import annotations

from dataclasses import dataclass, field

MIN_COPIES = 3  # fewer copies than this are drawn as they are
MAX_PERIOD = 64  # nodes in one copy at most
MAX_LABEL = 70


def copy_with(obj, **changes):
    """``dataclasses.replace(obj, **changes)`` for the snapshot's plain dataclasses (no
    ``__post_init__``, no slots) without its walk over the fields at every call: a fold copies
    every node of a graph."""
    new = object.__new__(type(obj))
    new.__dict__.update(obj.__dict__)
    new.__dict__.update(changes)
    return new


@dataclass
class Repeat:
    """``count`` copies of one sub-graph: ``copies[i]`` lists the keys of copy i by position."""

    key: str  # graph id of the block ("r" + its first node's key)
    count: int
    label: str  # "t = x * i; total = total + (t * t).sum()": the copy's source lines
    copies: list = field(default_factory=list)  # [[node key, ...] per copy], oldest first
    keep: int = -1  # the copy drawn (index into copies)
    more: bool = False  # the oldest copy leads to nodes the cap hid: at least ``count`` copies

    @property
    def title(self) -> str:
        return f"{self.count}{'+' if self.more else ''} x {self.label}"


def find(snap) -> list:
    """The runs of :data:`MIN_COPIES` or more copies of one sub-graph among ``snap.nodes``."""
    order = sorted((n for n in snap.nodes.values() if n.site and n.seq and not n.is_accumulate),
                   key=lambda n: n.seq)
    if len(order) < 2 * MIN_COPIES:
        return []
    sig = [(n.site, n.name) for n in order]
    m = len(sig)
    nxt = [-1] * m  # the next position with the same signature (the candidate periods)
    last: dict = {}
    for k in range(m - 1, -1, -1):
        nxt[k] = last.get(sig[k], -1)
        last[sig[k]] = k
    out = []
    i = 0
    while i < m:
        found = None
        j = nxt[i]
        while j != -1 and j - i <= MAX_PERIOD and m - i >= MIN_COPIES * (j - i):
            p = j - i
            k = 1
            while i + (k + 1) * p <= m and sig[i + k * p:i + (k + 1) * p] == sig[i:i + p]:
                k += 1
            if k >= MIN_COPIES:
                found = (p, k)
                break
            j = nxt[j]
        if found is None:
            i += 1
            continue
        p, k = found
        copies = [[n.key for n in order[i + c * p:i + (c + 1) * p]] for c in range(k)]
        copies = _same_shape(copies, snap.nodes)
        if len(copies) >= MIN_COPIES:
            r = _repeat(copies, snap.nodes)
            r.more = bool(snap.truncated and set(copies[0]) & set(snap.hidden_edges))
            out.append(r)
        i += k * p
    return out


def _same_shape(copies, nodes) -> list:
    """The longest run of copies whose nodes read the same kinds of nodes from outside the run
    (a copy reading a different op than the others is not the same sub-graph), from the newest
    copy backwards. Edges between copies (``total = total + ...``) are not compared: the first
    copy has none."""
    inside = {k for c in copies for k in c}

    def shape(copy):
        return [tuple(nodes[x].name for x in nodes[k].next if x not in inside and x in nodes)
                for k in copy]  # (a node the cap hid is not compared)

    want = shape(copies[-1])
    run = [copies[-1]]
    for c in reversed(copies[:-1]):
        if shape(c) != want:
            break
        run.append(c)
    run.reverse()
    return run


def _repeat(copies, nodes) -> Repeat:
    keep = len(copies) - 1
    for i, c in enumerate(copies):  # the copy holding what must stay red
        if any(nodes[k].stale or nodes[k].failing for k in c):
            keep = i
            break
    lines = []
    for k in copies[keep]:
        src = nodes[k].source or nodes[k].where
        if src and src not in lines:
            lines.append(src)
    label = "; ".join(lines) or " \u2192 ".join(dict.fromkeys(nodes[k].name for k in copies[keep]))
    if len(label) > MAX_LABEL:
        label = label[:MAX_LABEL - 1] + "\u2026"
    return Repeat(key="r" + copies[0][0], count=len(copies), label=label, copies=copies,
                  keep=keep)


def active(snap, expanded=()) -> list:
    """The repeats of ``snap`` drawn folded: those whose key is not in ``expanded``."""
    expanded = set(expanded)
    return [r for r in getattr(snap, "repeats", None) or ()
            if r.key not in expanded and r.copies[r.keep][0] in snap.nodes]


def fold(snap, repeats) -> object:
    """A copy of ``snap`` with each of ``repeats`` drawn once: the kept copy's nodes carry the
    repeat's key, the other copies' nodes are gone and their edges lead to the kept copy."""
    if not repeats:
        return snap
    memo = (id(snap), tuple((r.key, r.keep) for r in repeats))
    if _FOLDED[0] == memo and _FOLDED[1] is snap:  # the DOT and the text tree ask in turn
        return _FOLDED[2]
    out = _fold(snap, repeats)
    _FOLDED[:] = [memo, snap, out]
    return out


_FOLDED: list = [None, None, None]  # the last fold(): (key, snapshot, result)


def _fold(snap, repeats):
    to: dict = {}  # key of a dropped node -> the kept node at its position
    kept: dict = {}  # key of a kept node -> repeat key
    for r in repeats:
        mine = r.copies[r.keep]
        for c, copy in enumerate(r.copies):
            for pos, k in enumerate(copy):
                if c == r.keep:
                    kept[k] = r.key
                else:
                    to[k] = mine[pos]
    stale = {to[k] for k, n in snap.nodes.items() if k in to and n.stale}
    extra: dict = {}  # kept key -> the named outputs of its dropped copies
    for k, n in snap.nodes.items():
        if k in to and n.outputs:
            extra.setdefault(to[k], []).extend(n.outputs)
    nodes: dict = {}
    for key, n in snap.nodes.items():
        if key in to:
            continue
        nodes[key] = copy_with(n, next=list(dict.fromkeys(to.get(x, x) for x in n.next)),
                             repeat=kept.get(key, ""), stale=n.stale or key in stale,
                             outputs=list(dict.fromkeys(n.outputs + extra.get(key, []))))
    # The leaves of the dropped copies (a parameter per copy: ``for t in ps``) go with them: their
    # AccumulateGrad feeds only dropped nodes. The kept copy's is drawn inside its cluster.
    used = {x for n in nodes.values() for x in n.next}
    fed = {x for d in to for x in snap.nodes[d].next}  # read by a dropped copy
    gone = {k for k, n in nodes.items() if n.is_accumulate and k in fed and k not in used}
    leaves = {nodes[k].variable for k in gone}
    for k in gone:
        del nodes[k]
    for r in repeats:  # a leaf of the kept copy alone (not a weight every copy reads)
        for k in r.copies[r.keep]:
            for x in snap.nodes[k].next:
                if x in nodes and nodes[x].is_accumulate and x not in fed and not nodes[x].repeat:
                    nodes[x] = copy_with(nodes[x], repeat=r.key)
    # so do the named leaves no drawn node reaches any more (``ps[3]`` of a dropped copy, or of
    # one the cap hid): they stay rows of the Tensors tab
    reached = {n.variable for n in nodes.values() if n.variable}
    leaves |= {t.key for t in snap.tensors if t.requires_grad and not t.grad_fn
               and not t.is_view and t.key not in reached}
    tensors = [t if t.grad_fn_key not in to else copy_with(t, grad_fn_key=to[t.grad_fn_key])
               for t in snap.tensors if t.key not in leaves]
    return copy_with(snap, nodes=nodes, tensors=tensors)


def cluster_id(key: str) -> str:
    return "cluster_" + key


def cluster_dot(snap, repeats, expanded=()) -> list:
    """DOT clusters: one per folded repeat around its kept copy ("50 x ..."), and one per
    expanded repeat around all its copies (click its title to fold it again)."""
    from .render import _q

    out = []
    for r in repeats:  # the kept copy's nodes, and the module boxes made of them
        keys = [k for k, n in snap.nodes.items() if n.repeat == r.key]
        if keys:
            out.append(f'  subgraph "{cluster_id(r.key)}" {{ id="{cluster_id(r.key)}"; '
                       f'label={_q(r.title)}; labeljust=l; fontsize=11; fontcolor="#1a4d8f"; '
                       'style="rounded,filled"; fillcolor="#eef4fc"; color="#1a4d8f"; '
                       + " ".join(f'"{k}";' for k in keys) + " }")
    for r in getattr(snap, "repeats", None) or ():
        if r.key not in set(expanded):
            continue
        keys = [k for c in r.copies for k in c if k in snap.nodes]
        if keys:
            out.append(f'  subgraph "{cluster_id(r.key)}" {{ id="{cluster_id(r.key)}"; '
                       f'label={_q(r.title + " (expanded)")}; labeljust=l; fontsize=11; '
                       'style="rounded,dashed"; color="#1a4d8f"; fontcolor="#1a4d8f"; '
                       + " ".join(f'"{k}";' for k in keys) + " }")
    return out
