"""The grad_fn graph of a :class:`~nbgrad.notebook.inspect.Snapshot` as an indented text tree:
what the panel shows where no picture can be drawn (pygraphviz missing, a layout over its time)
and the picture's alt text."""

from __future__ import annotations

from . import repeats


def _shape_str(shape) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"


def text_tree(snap) -> str:
    """The graph as an indented tree, outputs first (the order backward walks it)."""
    if _TREE[0] is snap:  # the live tab, the static copy and its image's alt text ask in turn
        return _TREE[1]
    out = _text_tree(snap)
    _TREE[:] = [snap, out]
    return out


_TREE: list = [None, ""]


def _text_tree(snap) -> str:
    lines = []
    done = set()
    reps = repeats.active(snap)
    snap = repeats.fold(snap, reps)
    by_rep = {r.key: r for r in reps}
    for r in reps:
        lines.append(f"{r.title}: one copy drawn, marked [x{r.count}]")
    tensors = {t.key: t for t in snap.tensors}

    def node_line(n) -> str:
        s = n.name
        if n.repeat in by_rep:
            s += f"  [x{by_rep[n.repeat].count}" + (", each copy feeds the next]"
                                                     if n.key in n.next else "]")
        if n.is_accumulate and n.variable in tensors:
            v = tensors[n.variable]
            s += f"  ({v.name or 'leaf'} {_shape_str(v.shape)})"
        if n.where and not n.is_accumulate:
            s += f"  @ {n.where}"
        if n.failing:
            s += "  <-- backward fails here"
        elif n.stale:
            s += "  <-- will fail in backward"
        return s

    def saved_lines(n, pad):
        for s in n.saved:
            if s.released:
                state = "freed"
            elif s.is_stale:
                mods = "; ".join(f"{op} at {w}" if w else op for _, op, w in s.modified_by)
                state = f"STALE saved v{s.saved_version}, now v{s.version}" + (
                    f" (modified by {mods})" if mods else "")
            else:
                state = f"v{s.saved_version}"
            who = f"{s.name} = {s.alias}" if s.alias else s.name
            lines.append(pad + f"  saved {who} {_shape_str(s.shape)}: {state}")

    def walk(root_key):
        # iterative (graphs can be deeper than Python's recursion limit); a node with a single
        # input continues a chain at the same indent, so a long chain does not drift right
        stack = [(root_key, "", True, False)]
        while stack:
            key, prefix, last, chained = stack.pop()
            n = snap.nodes.get(key)
            branch = "" if chained else ("`- " if last else "|- ")
            if n is None:
                lines.append(prefix + branch + "...")
                continue
            if key in done:
                lines.append(prefix + branch + n.name + "  (shown above)")
                continue
            done.add(key)
            lines.append(prefix + branch + node_line(n))
            sub = prefix if chained else prefix + ("   " if last else "|  ")
            saved_lines(n, sub)
            nxt = [x for x in n.next if x != key]  # (a repeat's copy feeding the next copy)
            if len(nxt) == 1:
                stack.append((nxt[0], sub, True, True))
            else:
                for i in range(len(nxt) - 1, -1, -1):
                    stack.append((nxt[i], sub, i == len(nxt) - 1, False))

    for t in snap.tensors:
        if not t.named or (not t.grad_fn and not t.is_view and not t.requires_grad):
            continue
        head = f"{t.name} {_shape_str(t.shape)} {t.dtype} v{t.version}"
        if t.view_of:
            head += f"  (view of {t.view_of})"
        if not t.grad_fn:
            lines.append(head + ("  leaf" if t.requires_grad else ""))
            continue
        lines.append(head)
        walk(t.grad_fn_key)
    if snap.truncated:
        from .render import hidden_summary  # (render imports this module)
        lines.append(hidden_summary(snap))
    return "\n".join(lines)
