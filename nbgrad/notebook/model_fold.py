"""A snapshot with modules folded to one box each (what the graph draws when a module of the model
panel is folded): plain data in, plain data out (``model_report`` makes the clusters)."""

from __future__ import annotations

from .model_report import box_id
from .repeats import copy_with


def fold(snap, rep, folded) -> object:
    """A copy of ``snap`` where each module in ``folded`` is one box (its nodes and parameters
    inside): what the graph draws; the other tabs keep the full snapshot."""
    from .inspect import NodeInfo

    folded = [p for p in folded if p in rep.clusters]
    if not folded:
        return snap
    owner = _fold_owners(rep.clusters, folded)  # key -> folded path

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
        nodes[key] = copy_with(n, next=list(dict.fromkeys(remap(x) for x in n.next)))
    for b in boxes.values():
        b.where = f"{b.folded} ops folded"
    tensors = [t if t.grad_fn_key not in owner else copy_with(t, grad_fn_key=remap(t.grad_fn_key))
               for t in snap.tensors if t.key not in owner]
    return copy_with(snap, nodes=nodes, tensors=tensors)


def _fold_owners(clusters: dict, folded: list) -> dict:
    """``{key: folded path}``: each key of a module inside (or equal to) a folded one goes to
    the outermost folded module holding it (outer folds win; of two, the later in ``folded``
    among the equally long). One pass over the clusters, each looking up its dot prefixes."""
    order = sorted(folded, key=len, reverse=True)
    rank = {p: i for i, p in enumerate(order)}  # the later a path here, the more it wins
    owner: dict = {}
    won: dict = {}
    for p, c in clusters.items():
        best = rank.get(p, -1)
        for i, ch in enumerate(p):
            if ch == ".":
                best = max(best, rank.get(p[:i], -1))
        if best < 0:
            continue
        path = order[best]
        for k in c["keys"]:
            if won.get(k, -1) < best:
                owner[k] = path
                won[k] = best
    return owner
