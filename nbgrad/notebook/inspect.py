"""A pure snapshot of nbgrad's live autograd state, as plain data.

Nothing here displays anything, imports IPython or keeps a tensor alive: every function reads live
objects and returns dataclasses of ints, strings and tuples. ``render`` turns a :class:`Snapshot`
into DOT, SVG, HTML or a text tree; ``extension`` decides when to take one.

Reads the core only through the contract in ``docs/internals.md``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import islice

from . import adapter as A
from . import repeats as _repeats

# What a snapshot shows at most, unless told otherwise.
DEFAULT_MAX_NODES = 300
_MAX_CONTAINER_ITEMS = 16  # tensors looked at inside one list / tuple / dict of the namespace
_MAX_COVER_ELEMENTS = 256  # storages up to this many elements get an element-by-element map


@dataclass
class SavedInfo:
    """One tensor saved by a node for its backward (``SavedTensor``)."""

    key: str  # graph id, unique in a snapshot
    name: str  # PyTorch's name: self, other, result, ...
    shape: tuple
    dtype: str
    nbytes: int
    data_ptr: int
    saved_version: int
    version: int
    is_stale: bool
    released: bool
    is_output: bool
    modified_by: list = field(default_factory=list)  # [(version, op_name, where str)]
    alias: str | None = None  # the named tensor viewing the same storage, if any
    modified_source: str = ""  # the source line of the last modification, when known


@dataclass
class NodeInfo:
    """One ``grad_fn`` node."""

    key: str
    name: str
    where: str  # "cell [3] line 1", "file.py:12" or ""
    source: str  # the source line of ``where``, or ""
    next: list = field(default_factory=list)  # keys of next_functions nodes (None skipped)
    saved: list = field(default_factory=list)  # [SavedInfo]
    variable: str | None = None  # AccumulateGrad: key of the leaf tensor's box
    outputs: list = field(default_factory=list)  # names of named tensors whose grad_fn this is
    stale: bool = False  # one of its saved tensors was modified in place since it was saved
    failing: bool = False  # the node named by the autograd error this cell raised
    seq: int = 0  # the core's creation sequence number (``node._seq``): which module call made it
    site: int = 0  # the code that made it (same op, same line and instruction: same site), or 0
    repeat: str = ""  # a folded repeat's key: this node stands for its copies (``repeats``)
    module: str = ""  # a folded module's path: this box stands for its ``folded`` nodes
    folded: int = 0
    grads: dict = field(default_factory=dict)  # values mode: child key -> [gradient per edge]

    @property
    def is_accumulate(self) -> bool:
        return self.name == "AccumulateGrad"


@dataclass
class TensorInfo:
    """One tensor: a named one of the namespace, or an unnamed base / leaf the graph reaches."""

    key: str
    name: str  # "x", "x = y" for aliases, "" when unnamed
    shape: tuple
    dtype: str
    device: str
    requires_grad: bool
    is_leaf: bool
    grad_fn: str | None  # node name
    grad_fn_key: str | None
    version: int
    version_delta: int | None  # change since the previous snapshot; None when first seen
    storage: str  # storage key "S1", "S2", ...
    storage_ptr: int
    offset: int
    stride: tuple
    nbytes: int  # bytes of this tensor's own elements
    is_view: bool
    view_of: str | None  # name (or key) of the base
    base_key: str | None
    grad: str | None  # "[3] float32" or None
    retains_grad: bool
    named: bool = True
    values: str = ""  # values mode: "data ...\ngrad ..." (render_values)


@dataclass
class StorageInfo:
    """One storage and every shown tensor that views it."""

    key: str
    ptr: int
    nbytes: int
    size: int  # elements
    device: str
    version: int  # the one counter every view shares
    views: list = field(default_factory=list)  # [(tensor name, offset, shape, stride, covers)]


@dataclass
class Snapshot:
    """Everything one panel shows. Plain data: it holds no tensor and no node."""

    tensors: list = field(default_factory=list)  # [TensorInfo], named first
    nodes: dict = field(default_factory=dict)  # key -> NodeInfo, walk order
    storages: list = field(default_factory=list)  # [StorageInfo]
    memory: dict = field(default_factory=dict)
    error: dict | None = None
    truncated: bool = False
    hidden_nodes: int = 0  # nodes reached but not shown (cap)
    hidden_edges: list = field(default_factory=list)  # keys of shown nodes that lead to hidden
    hidden_kinds: list = field(default_factory=list)  # [(node name, count)] of the hidden ones
    hidden_exact: bool = True  # False: counting stopped early, hidden_nodes is a lower bound
    max_nodes: int = DEFAULT_MAX_NODES
    earlier: list = field(default_factory=list)  # names of graphs earlier cells made, folded
    skipped: int = 0  # tensors that could not be read (an odd subclass), left out
    model: object = None  # a ``model.ModelReport`` when the namespace holds nn.Modules
    repeats: list = field(default_factory=list)  # [repeats.Repeat]: copies of one sub-graph

    @property
    def stale_saved(self) -> list:
        return [(n, s) for n in self.nodes.values() for s in n.saved
                if s.is_stale and not s.released]

    def is_empty(self) -> bool:
        return not self.tensors and not self.nodes and self.error is None


# --- reading the core (through the adapter) ----------------------------------------------------

_WHERE_CACHE: dict = {}  # (id(code), lasti) -> (code, str, source): a line never moves
_CELL_OF: dict = {}  # id(code) -> (code, execution count of the run that compiled it)
_SITES_MARK = [0]


def stamp_cells() -> None:
    """Note the execution count of each place in user code the engine recorded since the last
    call (after each cell): a cell run again compiles new code under the same file name, which
    IPython then maps to the new count, while the nodes the first run made came from the first
    (every place shows the count of the run that made it)."""
    _SITES_MARK[0], raws = A.sites_since(_SITES_MARK[0])
    if len(_CELL_OF) > 65536:
        _CELL_OF.clear()
    for raw in raws:
        code = raw[0] if isinstance(raw, tuple) else None
        if code is None or id(code) in _CELL_OF:
            continue
        try:
            _CELL_OF[id(code)] = (code, A.location(raw).cell)
        except Exception:  # noqa: BLE001 - a place that cannot be read keeps its own count
            continue


def _where(obj) -> tuple[str, str]:
    return _where_of(A.raw_where(obj))


def _where_of(raw) -> tuple[str, str]:
    """("cell [3] line 1", its source line) of a raw provenance capture (or a Location)."""
    if raw is None:
        return "", ""
    code, lasti = getattr(raw, "code", None), getattr(raw, "lasti", None)
    if isinstance(raw, tuple) and len(raw) == 2:
        code, lasti = raw
    key = (id(code), lasti)
    hit = _WHERE_CACHE.get(key) if code is not None else None
    if hit is not None and hit[0] is code:
        return hit[1], hit[2]
    try:
        loc = A.location((code, lasti) if code is not None else raw)
        text = str(loc)
        stamped = _CELL_OF.get(id(code))
        if stamped is not None and stamped[0] is code and stamped[1] is not None:
            text = f"cell [{stamped[1]}] line {loc.lineno}"
        out = (text, (getattr(loc, "source", "") or ""))
    except Exception:  # a Location that cannot resolve must not break the panel
        return "", ""
    if code is not None and ("cell [" in out[0] or ".py:" in out[0]):
        if len(_WHERE_CACHE) > 20000:
            _WHERE_CACHE.clear()
        _WHERE_CACHE[key] = (code, *out)
    return out


def _loc_str(loc) -> str:
    try:
        return _where_of(loc)[0]
    except Exception:
        return ""


def _modified_by(entries) -> list:
    return [(int(v), str(op), _loc_str(loc)) for v, op, loc in entries or ()]


_SKIP = frozenset(("In", "Out", "exit", "quit", "get_ipython"))  # IPython's own names
MAX_LABEL = 60  # characters of a name shown; a 16 KB dict key is cut to this


def short(text: str, limit: int = MAX_LABEL) -> str:
    """``text`` cut to ``limit`` characters with an ellipsis."""
    return text if len(text) <= limit else text[:limit - 1] + "\u2026"


def _key_label(k) -> str | None:
    """How a dict key is written in a name (``d['w']``), or None for keys not worth naming."""
    if type(k) in (str, int, float, bool):
        return short(repr(k[:MAX_LABEL + 2] if type(k) is str else k))
    return None


def _items(v) -> list:
    """Up to 16 ``(label, item)`` of a list / tuple / dict, safe against other threads
    mutating it (a dict changing size mid-copy is retried, then skipped)."""
    for _ in range(3):
        try:
            if type(v) is dict:
                out = []
                for k, item in list(islice(v.items(), _MAX_CONTAINER_ITEMS)):
                    label = _key_label(k)
                    if label is not None:
                        out.append((f"[{label}]", item))
                return out
            return [(f"[{i}]", item) for i, item in enumerate(v[:_MAX_CONTAINER_ITEMS])]
        except RuntimeError:  # "dictionary changed size during iteration"
            continue
    return []


def named_tensors(ns: dict, tensor_types=None, modules=True, skip=()) -> list:
    """The tensors a user can name in ``ns``: ``[(name, tensor)]``, sorted by name.

    Looks at top-level values, one level into lists, tuples and dicts (``xs[0]``, ``d['w']``, at
    most 16 items each) and at ``nn.Module`` parameters (``model.fc.weight``, at most 64).
    Names starting with ``_`` (IPython's history), IPython's ``In`` / ``Out`` and the names in
    ``skip`` are left out; names are cut to :data:`MAX_LABEL` characters. An object that cannot
    be read (a raising ``__getattr__``, a mock) is skipped on its own.
    """
    tt = tensor_types or A.tensor_types()  # a tuple: nbgrad's, and torch's once imported
    check = isinstance if tensor_types else (lambda o, types: issubclass(type(o), types))
    if type(tt) is not tuple:
        tt = (tt,)
    containers = (list, tuple, dict)
    out = []
    entries = []
    for _ in range(3):
        try:
            entries = list(ns.items())
            break
        except RuntimeError:  # another thread changed the namespace mid-copy
            continue
    for name, v in entries:
        cls = type(v)
        if cls in tt:  # the common case first: a plain tensor under a plain name
            if type(name) is str and name[:1] != "_" and name not in _SKIP and name not in skip:
                out.append((name if len(name) <= MAX_LABEL else short(name), v))
            continue
        if type(name) is not str or name[:1] == "_" or name in _SKIP or name in skip:
            continue
        try:
            if check(v, tt):  # a subclass (judged by type: a Mock(spec=Tensor) is not one)
                out.append((short(name), v))
            elif cls in containers:
                label = short(name)
                out.extend((label + k, item) for k, item in _items(v) if check(item, tt))
            elif modules and A.is_module(v):
                for i, (pname, p) in enumerate(A.named_parameters(v)):
                    if i >= _MAX_CONTAINER_ITEMS * 4:
                        break
                    if check(p, tt):
                        out.append((short(f"{name}.{pname}", 2 * MAX_LABEL), p))
        except Exception:  # noqa: BLE001 - one odd object never silences the panel
            continue
    out.sort(key=lambda kv: kv[0])
    return out


# --- the snapshot ----------------------------------------------------------------------------


_COUNT_LIMIT = 2_000_000  # nodes counted past the cap for the "N more nodes" line (exact below)
_MAX_SOURCE = 200  # characters of a source line kept


def snapshot(
    named,
    *,
    previous: dict | None = None,
    max_nodes: int = DEFAULT_MAX_NODES,
    error: BaseException | None = None,
    memory_before: dict | None = None,
    show_saved: bool = True,
    earlier=(),
) -> Snapshot:
    """Read the live state of ``named`` tensors into a :class:`Snapshot`.

    Args:
        named: ``[(name, tensor)]``, e.g. from :func:`named_tensors` (the extension passes only
            what the cell made or changed); an empty name marks a tensor drawn without a label
            (``nbgrad.viz.graph``). A tensor that cannot be read is skipped and counted.
        previous: ``{name: (id(tensor), version)}`` from before the cell, to report each
            tensor's version change in this cell.
        max_nodes: the most ``grad_fn`` nodes walked; the rest is counted (exactly, up to two
            million) and summarised.
        error: the exception the cell raised, if any (explained when it carries
            ``nbgrad_context``).
        memory_before: :func:`memory_probe` taken before the cell, for "this cell allocated".
        show_saved: include the saved tensors of each node.
        earlier: names of tensors with a graph that this cell left alone (folded to one line).
    """
    snap = Snapshot(max_nodes=max_nodes)
    snap.earlier = list(earlier)
    previous = previous or {}

    # Tensors by identity; aliases (a = b) share one row.
    by_id: dict[int, list] = {}
    objs: dict[int, object] = {}
    fns: dict[int, object] = {}  # (held: an engine may make a new node object per read, and
    # keys are ids; torch 2.4 does)
    for name, t in named:
        i = id(t)
        if i not in by_id:
            by_id[i] = []
            objs[i] = t
        if name:
            by_id[i].append(name)

    storages: dict[int, StorageInfo] = {}
    by_storage_obj: dict[int, StorageInfo] = {}  # id(Storage) -> info: views ask only once
    keep_alive = []  # the Storage objects whose id() is used above, until the snapshot is done
    strs: dict = {}  # str() of dtypes and devices, computed once each

    def as_str(obj, conv=str):
        v = strs.get(obj)
        if v is None:
            v = strs[obj] = conv(obj)
        return v

    def storage_of(t, r) -> StorageInfo:
        sobj = r.storage(t)
        st = by_storage_obj.get(id(sobj)) if sobj is not None else None
        if st is not None:
            return st
        ptr = A.storage_ptr(sobj)
        st = storages.get(ptr)
        if st is None:
            nbytes = A.storage_nbytes(sobj)
            esize = max(int(t.element_size()), 1)
            st = StorageInfo(key=f"S{len(storages) + 1}", ptr=ptr, nbytes=nbytes,
                             size=nbytes // esize, device=as_str(t.device), version=r.version(t))
        if sobj is not None:
            by_storage_obj[id(sobj)] = st
            keep_alive.append(sobj)
        storages[ptr] = st
        return st

    tinfos: dict[int, TensorInfo] = {}

    def tensor_info(t, names) -> TensorInfo | None:
        i = id(t)
        try:
            r = A.reading(t)  # (a dozen questions to the same engine)
            st = storage_of(t, r)
            version = r.version(t)
            delta = None
            for n in names:
                prev = previous.get(n)
                if prev is not None and prev[0] == i:
                    delta = version - prev[1]
                    break
            fn = fns[i] = r.grad_fn(t)
            base = r.base(t)
            g = r.grad(t)
            info = TensorInfo(
                key=f"t{i}", name=" = ".join(names), shape=r.shape(t),
                dtype=as_str(t.dtype, A.dtype_str), device=as_str(t.device),
                requires_grad=bool(t.requires_grad), is_leaf=bool(t.is_leaf),
                grad_fn=A.node_name(fn) if fn is not None else None,
                grad_fn_key=f"n{id(fn)}" if fn is not None else None,
                version=version, version_delta=delta, storage=st.key, storage_ptr=st.ptr,
                offset=r.element_offset(t, st.ptr), stride=tuple(int(s) for s in t.stride()),
                nbytes=r.nbytes(t), is_view=base is not None, view_of=None,
                base_key=f"t{id(base)}" if base is not None else None,
                grad=(f"{list(A.shape(g))} {A.dtype_str(g.dtype)}" if g is not None else None),
                retains_grad=bool(getattr(t, "retains_grad", False)), named=bool(names))
        except Exception:  # noqa: BLE001 - an unreadable tensor (a raising subclass) is skipped
            snap.skipped += 1
            return None
        tinfos[i] = info
        objs[i] = t
        return info

    for i, names in by_id.items():
        tensor_info(objs[i], names)
    # Unnamed bases of named views are drawn too, so a view always joins its base.
    for i in list(tinfos):
        try:
            base = A.base(objs[i])
        except Exception:  # noqa: BLE001
            base = None
        if base is not None and id(base) not in tinfos:
            tensor_info(base, [])
    for info in tinfos.values():
        if info.base_key is not None:
            b = tinfos.get(int(info.base_key[1:]))
            info.view_of = (b.name or "(unnamed base)") if b is not None else None

    # The grad_fn graph, breadth first from the named tensors' grad_fns (sorted by name).
    roots = []
    for i in list(tinfos):
        fn = fns.get(i)
        if fn is not None:
            roots.append(fn)
    nodes: dict[str, NodeInfo] = snap.nodes
    live_nodes: dict[str, object] = {}
    queue = []
    seen = set()
    for n in roots:
        if id(n) not in seen:
            seen.add(id(n))
            queue.append(n)
    head = 0
    sites: dict = {}  # raw provenance -> a small int: nodes made by the same code share one
    while head < len(queue) and len(nodes) < max_nodes:
        node = queue[head]
        head += 1
        key = f"n{id(node)}"
        r = A.reading(node)
        raw = r.raw_where(node)
        where, source = _where_of(raw)
        info = NodeInfo(key=key, name=r.node_name(node), where=where,
                        source=short(source, _MAX_SOURCE), seq=r.sequence_number(node),
                        site=sites.setdefault(raw, len(sites) + 1) if raw is not None else 0)
        nodes[key] = info
        live_nodes[key] = node
        nxt = info.next
        for nf in r.next_nodes(node):
            nxt.append(f"n{id(nf)}")
            if id(nf) not in seen:
                seen.add(id(nf))
                queue.append(nf)
        var = r.leaf_variable(node) if info.is_accumulate else None
        if var is not None:
            if id(var) not in tinfos:
                tensor_info(var, [])
            info.variable = f"t{id(var)}"
    if head < len(queue):
        snap.truncated = True
        # Count what was left out: exactly (every node reached once), up to _COUNT_LIMIT.
        counts: dict[str, int] = {}
        names_of: dict[type, str] = {}  # node class -> name: one name() call per class
        shown = head
        while head < len(queue) and len(queue) < _COUNT_LIMIT:
            node = queue[head]
            head += 1
            cls = type(node)
            name = names_of.get(cls)
            if name is None:
                name = names_of[cls] = A.node_name(node)
            counts[name] = counts.get(name, 0) + 1
            for nf in A.next_nodes(node):
                if id(nf) not in seen:
                    seen.add(id(nf))
                    queue.append(nf)
        snap.hidden_exact = head >= len(queue)
        snap.hidden_nodes = len(queue) - shown
        snap.hidden_kinds = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        snap.hidden_edges = sorted({k for k, n in nodes.items()
                                    if any(x not in nodes for x in n.next)})
    del queue, seen

    for info in tinfos.values():
        if info.grad_fn_key in nodes and info.name:
            nodes[info.grad_fn_key].outputs.append(info.name)

    # Saved tensors, matched to the named tensor viewing the same storage with the same shape.
    by_storage: dict[tuple, str] = {}
    for info in tinfos.values():
        if info.name:
            by_storage.setdefault((info.storage_ptr, info.shape), info.name)
    if show_saved:
        for key, node in live_nodes.items():
            info = nodes[key]
            for j, st in enumerate(A.saved_tensors(node)):
                try:
                    s = SavedInfo(
                        key=f"{key}s{j}", name=str(st.name),
                        shape=tuple(st.shape) if st.shape is not None else (),  # None once freed
                        dtype=A.dtype_str(st.dtype) if st.dtype is not None else "",
                        nbytes=int(st.nbytes or 0), data_ptr=int(st.data_ptr or 0),
                        saved_version=int(st.saved_version), version=int(st.version),
                        is_stale=bool(st.is_stale), released=bool(st.released),
                        is_output=bool(st.is_output))
                except Exception:  # noqa: BLE001
                    continue
                if s.is_stale:
                    try:
                        mods = st.modified_by()
                        s.modified_by = _modified_by(mods)
                        s.modified_source = short(_where_of(mods[-1][2])[1], _MAX_SOURCE) \
                            if mods else ""
                    except Exception:
                        s.modified_by = []
                    if not s.released:
                        info.stale = True
                s.alias = by_storage.get((s.data_ptr, s.shape))
                info.saved.append(s)
    del live_nodes

    if error is not None:
        snap.error = error_info(error)
        _from_graph(snap)
        ctx = snap.error.get("context") or {}
        if ctx.get("node_name"):
            failing = [n for n in nodes.values()
                       if n.name == ctx["node_name"]
                       and (not ctx.get("node_where") or n.where == ctx["node_where"])]
            if not failing:
                failing = [n for n in nodes.values() if n.name == ctx["node_name"] and n.stale]
            for n in failing[:1]:
                n.failing = True

    # Views: each storage with the shown tensors that view it.
    n_views: dict[int, int] = {}
    for info in tinfos.values():
        n_views[info.storage_ptr] = n_views.get(info.storage_ptr, 0) + 1
    for info in sorted(tinfos.values(), key=lambda x: (not x.named, x.name)):
        st = storages[info.storage_ptr]
        covers = None
        if st.size and st.size <= _MAX_COVER_ELEMENTS and n_views[info.storage_ptr] > 1:
            covers = _covered(info.offset, info.shape, info.stride, st.size)
        st.views.append((info.name or "(unnamed)", info.offset, info.shape, info.stride, covers))
    snap.storages = sorted({id(s): s for s in storages.values()}.values(), key=lambda s: s.key)
    snap.tensors = sorted(tinfos.values(), key=lambda x: (not x.named, x.name))
    snap.memory = memory_info(snap, memory_before)
    snap.repeats = _repeats.find(snap)
    return snap


def _covered(offset: int, shape: tuple, stride: tuple, size: int) -> list:
    """Storage element indices a strided view covers (sorted, de-duplicated)."""
    idx = {offset}
    for n, s in zip(shape, stride):
        if n == 0:
            return []
        idx = {i + k * s for i in idx for k in range(n)}
        if len(idx) > _MAX_COVER_ELEMENTS:
            break
    return sorted(i for i in idx if 0 <= i < size)


def versions_of(snap: Snapshot) -> dict:
    """``{name: (id, version)}`` of the named tensors, for the next snapshot's ``previous``."""
    out = {}
    for t in snap.tensors:
        if t.named:
            for n in t.name.split(" = "):
                out[n] = (int(t.key[1:]), t.version)
    return out


_INPLACE_KINDS = {
    "leaf_inplace": "a leaf that requires grad; writing into it would change the value its "
                    "gradient is taken at.",
    "view_of_leaf_inplace": "a view of a leaf that requires grad; the write goes into the leaf.",
    "no_grad_view_inplace": "a view made under no_grad of a tensor that requires grad; autograd "
                            "cannot track the write back into its base.",
    "multi_output_view_inplace": "one of several views returned by one op (unbind, split, "
                                 "chunk); such views cannot be modified in place.",
}
_INTERIOR = (
    "an in-place op on a leaf that requires grad (e.g. `a[:] = 0`, done under no_grad or not) "
    "gave it a grad_fn (CopySlices): it is no longer a leaf, so its .grad cannot be kept.",
    "fix: modify leaves under `with nbgrad.no_grad():`, or work on a copy made with "
    "`.detach()` (not `.data`, which hides the change from autograd's checks).")
_INPLACE_FIX = {
    "leaf_inplace": "wrap it in `with nbgrad.no_grad():` (an update of a parameter), or work "
                    "on `.detach()` (not `.data`, which hides the change from autograd's checks).",
    "view_of_leaf_inplace": "wrap it in `with nbgrad.no_grad():`, or take the view of "
                            "`.detach()` (not `.data`).",
    "no_grad_view_inplace": "make the view outside no_grad, or modify it under no_grad too.",
    "multi_output_view_inplace": "use the out-of-place op, or clone() the view first.",
}


def error_info(exc: BaseException) -> dict:
    """The explanation of an autograd error as plain data: message, kind, provenance lines."""
    try:
        msg = str(exc)
    except Exception:  # noqa: BLE001 - an exception whose __str__ raises
        msg = f"{type(exc).__name__} (its message could not be read)"
    try:
        ctx = A.error_context(exc)  # nbgrad's context, or what torch's message says
    except Exception:  # noqa: BLE001
        ctx = None
    out = {"type": type(exc).__name__, "message": msg, "headline": msg.split("\n", 1)[0],
           "context": None, "lines": []}
    if not isinstance(ctx, dict):
        if "moved into the graph interior" in msg:
            out["lines"] = list(_INTERIOR)
        return out
    plain = {k: (_loc_str(v) if hasattr(v, "lineno") else v) for k, v in ctx.items()}
    if "modified_by" in ctx:
        plain["modified_by"] = _modified_by(ctx["modified_by"])
    out["context"] = plain
    lines = out["lines"]
    kind = plain.get("kind")
    if kind == "saved_modified":
        where_src = ctx.get("node_where")
        src = getattr(where_src, "source", "") if where_src is not None else ""
        mods = ctx.get("modified_by") or ()
        msrc = getattr(A.location(mods[-1][2]), "source", "") if mods else ""
        out["lines"] = _saved_modified_lines(plain, src, msrc)
    elif kind in _INPLACE_KINDS:
        op, where = plain.get("op") or "an in-place op", plain.get("where")
        shape = list(plain["shape"]) if plain.get("shape") is not None else "?"
        lines.append(f"{op}" + (f" at {where}" if where else "")
                     + f" on a tensor of shape {shape}: " + _INPLACE_KINDS[kind])
        lines.append("fix: " + _INPLACE_FIX[kind])
    elif kind == "backward_twice":
        lines.append("the saved tensors of this graph were freed by the first backward.")
        lines.append("fix: pass retain_graph=True to the first backward, or run the forward again.")
    elif "moved into the graph interior" in msg:
        lines.extend(_INTERIOR)
    return out


def _saved_modified_lines(plain: dict, src: str, msrc: str) -> list:
    """The explanation of a stale saved tensor: who saved it where, who modified it where."""
    lines = []
    tensor = plain.get("tensor", "a tensor")
    lines.append(
        f"{tensor} was saved by {plain.get('node_name', '?')}"
        + (f" at {plain['node_where']}" if plain.get("node_where") else "")
        + f" (version {plain.get('saved_version', '?')})")
    for v, op, where in plain.get("modified_by") or ():
        lines.append(f"modified by {op}" + (f" at {where}" if where else "")
                     + f" (now version {v})")
    lines.append(f"it is now at version {plain.get('version', '?')}; the backward of "
                 f"{plain.get('node_name', '?')} needs version "
                 f"{plain.get('saved_version', '?')}.")
    if src:
        lines.append(f"saved by: {src}")
    if msrc:
        lines.append(f"modified by: {msrc}")
    lines.append("fix: do the in-place op on a clone() (or before the forward that saves it), "
                 "or use the out-of-place op.")
    return lines


def _from_graph(snap: Snapshot) -> None:
    """An engine whose error names no node (torch's names the tensor and the versions): the
    node, its line and the modifying line from the graph's stale saved tensor with those
    versions, read by the engine's own check."""
    err = snap.error or {}
    ctx = err.get("context")
    if not ctx or ctx.get("kind") != "saved_modified" or ctx.get("node_name"):
        return
    stale = snap.stale_saved
    match = [(n, s) for n, s in stale if s.version == ctx.get("version")
             and s.saved_version == ctx.get("saved_version")] or stale
    if not match:
        return
    node, saved = match[0]
    ctx.update(node_name=node.name, node_where=node.where, modified_by=list(saved.modified_by))
    err["lines"] = _saved_modified_lines(ctx, node.source, saved.modified_source)


def is_autograd_error(exc: BaseException | None) -> bool:
    """True for errors an engine explains, or RuntimeErrors raised from inside an engine."""
    if exc is None:
        return False
    try:
        if A.error_context(exc) is not None:
            return True
        return A.is_engine_error(exc)
    except Exception:  # noqa: BLE001 - a user exception with a raising __getattr__
        return False


# --- memory ----------------------------------------------------------------------------------


def memory_probe(devices=("cpu",)) -> dict:
    """``{device: memory_stats(device)}`` now; cheap, taken before and after a cell."""
    out = {}
    for d in devices:
        try:
            out[d] = A.memory_stats(d)
        except Exception:
            pass
    return out


def memory_info(snap: Snapshot, before: dict | None = None) -> dict:
    """Pool / live-storage bytes, bytes held by saved tensors of the shown graphs, cell delta."""
    devices = sorted({t.device.split(":")[0] for t in snap.tensors} | {"cpu"})
    now = {}
    try:
        now = memory_probe(["cuda" if d == "cuda" else d for d in devices])
    except Exception:
        now = {}
    seen = set()
    saved_bytes = 0
    saved_count = 0
    for n in snap.nodes.values():
        for s in n.saved:
            if s.released:
                continue
            k = (s.data_ptr, s.shape, s.dtype)
            if k in seen:
                continue
            seen.add(k)
            saved_bytes += s.nbytes
            saved_count += 1
    delta = {}
    for dev, stats in now.items():
        b = (before or {}).get(dev)
        if b:
            for k in ("live_bytes", "live_storages", "used_bytes", "total_bytes",
                      "torch_cuda_allocated", "torch_cuda_reserved", "torch_cuda_ooms"):
                if k in stats and k in b:
                    delta[f"{dev}.{k}"] = stats[k] - b[k]
    named_bytes = sum(st.nbytes for st in snap.storages)
    return {"devices": now, "saved_bytes": saved_bytes, "saved_count": saved_count,
            "saved_partial": snap.truncated, "named_storage_bytes": named_bytes, "delta": delta}
