"""A pure snapshot of nbgrad's live autograd state, as plain data.

Nothing here displays anything, imports IPython or keeps a tensor alive: every function reads live
objects and returns dataclasses of ints, strings and tuples. ``render`` turns a :class:`Snapshot`
into DOT, SVG, HTML or a text tree; ``extension`` decides when to take one.

Reads the core only through the contract in ``docs/internals.md``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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
    module: str = ""  # a folded module's path: this box stands for its ``folded`` nodes
    folded: int = 0

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
    model: object = None  # a ``model.ModelReport`` when the namespace holds nn.Modules

    @property
    def stale_saved(self) -> list:
        return [(n, s) for n in self.nodes.values() for s in n.saved
                if s.is_stale and not s.released]

    def is_empty(self) -> bool:
        return not self.tensors and not self.nodes and self.error is None


# --- reading the core ------------------------------------------------------------------------


def _tensor_types():
    import nbgrad

    return (nbgrad.Tensor,)


def _as_location(loc):
    """A Location from what the core stores: a Location, or its raw ``(code, lasti)`` capture."""
    if isinstance(loc, tuple):
        from nbgrad.autograd.provenance import Location

        return Location.of(loc)
    return loc


_WHERE_CACHE: dict = {}  # raw (code, lasti) capture -> (str, source): a line never moves


def _where(obj) -> tuple[str, str]:
    raw = getattr(obj, "_where", None)
    if raw is None:
        return "", ""
    hit = _WHERE_CACHE.get(raw) if isinstance(raw, tuple) else None
    if hit is not None:
        return hit
    loc = _as_location(raw)
    try:
        out = (str(loc), (getattr(loc, "source", "") or ""))
    except Exception:  # a Location that cannot resolve must not break the panel
        return "", ""
    if isinstance(raw, tuple) and ("cell [" in out[0] or ".py:" in out[0]):
        if len(_WHERE_CACHE) > 20000:
            _WHERE_CACHE.clear()
        _WHERE_CACHE[raw] = out
    return out


def _loc_str(loc) -> str:
    loc = _as_location(loc)
    if loc is None:
        return ""
    try:
        return str(loc)
    except Exception:
        return ""


def _offset(t, storage_ptr: int) -> int:
    """``t.storage_offset()``, from the storage pointer the snapshot already has."""
    try:
        return (int(t.data_ptr()) - storage_ptr) // max(int(t.element_size()), 1)
    except Exception:
        return int(t.storage_offset())


def _shape(t) -> tuple:
    return tuple(int(s) for s in t.shape)


def _dtype_str(dtype) -> str:
    s = str(dtype)
    return s[len("nbgrad."):] if s.startswith("nbgrad.") else s.replace("torch.", "")


def _storage_ptr(t) -> int:
    try:
        return int(t.untyped_storage().data_ptr())
    except Exception:
        return 0


def _modified_by(entries) -> list:
    return [(int(v), str(op), _loc_str(loc)) for v, op, loc in entries or ()]


_SKIP = frozenset(("In", "Out", "exit", "quit", "get_ipython"))  # IPython's own names


def named_tensors(ns: dict, tensor_types=None, modules=True, skip=()) -> list:
    """The tensors a user can name in ``ns``: ``[(name, tensor)]``, sorted by name.

    Looks at top-level values, one level into lists, tuples and dicts (``xs[0]``, ``d['w']``, at
    most 16 items each) and at ``nn.Module`` parameters (``model.fc.weight``). Names starting with
    ``_`` (IPython's history), IPython's ``In`` / ``Out`` and the names in ``skip`` are left out.
    """
    types = tensor_types or _tensor_types()
    out = []
    for name, v in list(ns.items()):
        if name[:1] == "_" or name in _SKIP or name in skip:
            continue
        if isinstance(v, types):
            out.append((name, v))
        elif type(v) in (list, tuple):
            for i, item in enumerate(v[:_MAX_CONTAINER_ITEMS]):
                if isinstance(item, types):
                    out.append((f"{name}[{i}]", item))
        elif type(v) is dict:
            for i, (k, item) in enumerate(v.items()):
                if i >= _MAX_CONTAINER_ITEMS:
                    break
                if isinstance(item, types):
                    out.append((f"{name}[{k!r}]", item))
        elif modules and hasattr(v, "named_parameters") and not isinstance(v, type):
            try:
                for i, (pname, p) in enumerate(v.named_parameters()):
                    if i >= _MAX_CONTAINER_ITEMS * 4:
                        break
                    if isinstance(p, types):
                        out.append((f"{name}.{pname}", p))
            except Exception:
                pass
    out.sort(key=lambda kv: kv[0])
    return out


def _saved_of(node) -> tuple:
    fn = getattr(node, "_saved_tensors", None)
    if fn is None:
        return ()
    try:
        return tuple(fn())
    except Exception:
        return ()


def _next_of(node) -> tuple:
    try:
        return tuple(nf for nf, _ in node.next_functions if nf is not None)
    except Exception:
        return ()


def _node_name(node) -> str:
    """The node's name as the graph shows it: 'MulBackward0', 'AccumulateGrad' (PyTorch's
    ``name()`` of the latter is 'torch::autograd::AccumulateGrad'; the namespace is dropped)."""
    try:
        name = node.name()
    except Exception:
        name = type(node).__name__
    return name.rsplit("::", 1)[-1]


# --- the snapshot ----------------------------------------------------------------------------


def snapshot(
    named,
    *,
    previous: dict | None = None,
    max_nodes: int = DEFAULT_MAX_NODES,
    error: BaseException | None = None,
    memory_before: dict | None = None,
    show_saved: bool = True,
) -> Snapshot:
    """Read the live state of ``named`` tensors into a :class:`Snapshot`.

    Args:
        named: ``[(name, tensor)]``, e.g. from :func:`named_tensors`; an empty name marks a
            tensor drawn without a label (``nbgrad.viz.graph``).
        previous: ``{name: (id(tensor), version)}`` from the previous snapshot
            (:func:`versions_of`), to report each tensor's version change in this cell.
        max_nodes: the most ``grad_fn`` nodes walked; the rest is counted and summarised.
        error: the exception the cell raised, if any (explained when it carries
            ``nbgrad_context``).
        memory_before: :func:`memory_probe` taken before the cell, for "this cell allocated".
        show_saved: include the saved tensors of each node.
    """
    snap = Snapshot(max_nodes=max_nodes)
    previous = previous or {}

    # Tensors by identity; aliases (a = b) share one row.
    by_id: dict[int, list] = {}
    objs: dict[int, object] = {}
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

    def storage_of(t) -> StorageInfo:
        try:
            sobj = t.untyped_storage()
        except Exception:
            sobj = None
        st = by_storage_obj.get(id(sobj)) if sobj is not None else None
        if st is not None:
            return st
        ptr = int(sobj.data_ptr()) if sobj is not None else 0
        st = storages.get(ptr)
        if st is None:
            try:
                nbytes = int(sobj.nbytes())
            except Exception:
                nbytes = 0
            esize = max(int(t.element_size()), 1)
            st = storages[ptr] = StorageInfo(
                key=f"S{len(storages) + 1}", ptr=ptr, nbytes=nbytes, size=nbytes // esize,
                device=as_str(t.device), version=int(t._version))
        if sobj is not None:
            by_storage_obj[id(sobj)] = st
            keep_alive.append(sobj)
        return st

    tinfos: dict[int, TensorInfo] = {}

    def tensor_info(t, names) -> TensorInfo:
        i = id(t)
        name = " = ".join(names)
        key = f"t{i}"
        st = storage_of(t)
        skey, ptr = st.key, st.ptr
        version = int(t._version)
        delta = None
        for n in names:
            prev = previous.get(n)
            if prev is not None and prev[0] == i:
                delta = version - prev[1]
                break
        fn = t.grad_fn
        base = t._base if t._is_view() else None
        g = getattr(t, "_grad", None)
        if g is None and getattr(t, "is_leaf", False):
            g = getattr(t, "grad", None)
        info = TensorInfo(
            key=key, name=name, shape=tuple(t.shape), dtype=as_str(t.dtype, _dtype_str),
            device=as_str(t.device),
            requires_grad=bool(t.requires_grad), is_leaf=bool(t.is_leaf),
            grad_fn=_node_name(fn) if fn is not None else None,
            grad_fn_key=f"n{id(fn)}" if fn is not None else None,
            version=version, version_delta=delta, storage=skey, storage_ptr=ptr,
            offset=_offset(t, ptr), stride=tuple(t.stride()),
            nbytes=int(t.numel()) * int(t.element_size()), is_view=base is not None,
            view_of=None, base_key=f"t{id(base)}" if base is not None else None,
            grad=(f"{list(_shape(g))} {_dtype_str(g.dtype)}" if g is not None else None),
            retains_grad=bool(getattr(t, "retains_grad", False)), named=bool(names))
        tinfos[i] = info
        return info

    for i, names in by_id.items():
        tensor_info(objs[i], names)
    # Unnamed bases of named views are drawn too, so a view always joins its base.
    for i in list(tinfos):
        t = objs[i]
        if t._is_view():
            base = t._base
            if base is not None and id(base) not in tinfos:
                objs[id(base)] = base
                tensor_info(base, [])
    for info in tinfos.values():
        if info.base_key is not None:
            b = tinfos.get(int(info.base_key[1:]))
            info.view_of = (b.name or "(unnamed base)") if b is not None else None

    # The grad_fn graph, breadth first from the named tensors' grad_fns (sorted by name).
    roots = [objs[i].grad_fn for i in by_id if objs[i].grad_fn is not None]
    nodes: dict[str, NodeInfo] = snap.nodes
    live_nodes: dict[str, object] = {}
    queue = list(roots)
    seen = {id(n) for n in queue}
    hidden = 0
    head = 0
    while head < len(queue):
        if len(nodes) >= max_nodes:
            hidden = len(queue) - head
            break
        node = queue[head]
        head += 1
        key = f"n{id(node)}"
        where, source = _where(node)
        info = NodeInfo(key=key, name=_node_name(node), where=where, source=source,
                        seq=getattr(node, "_seq", 0))
        nodes[key] = info
        live_nodes[key] = node
        for nf in _next_of(node):
            info.next.append(f"n{id(nf)}")
            if id(nf) not in seen:
                seen.add(id(nf))
                queue.append(nf)
        var = getattr(node, "variable", None) if info.is_accumulate else None
        if var is not None:
            if id(var) not in tinfos:
                objs[id(var)] = var
                tensor_info(var, [])
            info.variable = f"t{id(var)}"
    if hidden:
        snap.truncated = True
        # Count a little further (bounded) so the summary says how much was left out.
        limit = max(max_nodes * 10, 3000)
        while head < len(queue) and len(queue) < limit:
            for nf in _next_of(queue[head]):
                if id(nf) not in seen:
                    seen.add(id(nf))
                    queue.append(nf)
            head += 1
        snap.hidden_nodes = len(queue) - len(nodes)
        snap.hidden_exact = head >= len(queue)
        counts: dict[str, int] = {}
        for node in queue[len(nodes):]:
            name = _node_name(node)
            counts[name] = counts.get(name, 0) + 1
        snap.hidden_kinds = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        snap.hidden_edges = sorted({k for k, n in nodes.items()
                                    if any(x not in nodes for x in n.next)})

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
            for j, st in enumerate(_saved_of(node)):
                s = SavedInfo(
                    key=f"{key}s{j}", name=str(st.name),
                    shape=tuple(st.shape) if st.shape is not None else (),  # None once freed
                    dtype=_dtype_str(st.dtype) if st.dtype is not None else "",
                    nbytes=int(st.nbytes or 0), data_ptr=int(st.data_ptr or 0),
                    saved_version=int(st.saved_version), version=int(st.version),
                    is_stale=bool(st.is_stale), released=bool(st.released),
                    is_output=bool(st.is_output))
                if s.is_stale:
                    try:
                        s.modified_by = _modified_by(st.modified_by())
                    except Exception:
                        s.modified_by = []
                    if not s.released:
                        info.stale = True
                s.alias = by_storage.get((s.data_ptr, s.shape))
                info.saved.append(s)

    if error is not None:
        snap.error = error_info(error)
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
    snap.storages = sorted(storages.values(), key=lambda s: s.key)
    snap.tensors = sorted(tinfos.values(), key=lambda x: (not x.named, x.name))
    snap.memory = memory_info(snap, memory_before)
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
    "fix: modify leaves under `with nbgrad.no_grad():` or through `a.data`.")
_INPLACE_FIX = {
    "leaf_inplace": "wrap it in `with nbgrad.no_grad():`, or write to `.data` / `.detach()`.",
    "view_of_leaf_inplace": "wrap it in `with nbgrad.no_grad():`, or index `.data` / "
                            "`.detach()` instead.",
    "no_grad_view_inplace": "make the view outside no_grad, or modify it under no_grad too.",
    "multi_output_view_inplace": "use the out-of-place op, or clone() the view first.",
}


def error_info(exc: BaseException) -> dict:
    """The explanation of an autograd error as plain data: message, kind, provenance lines."""
    msg = str(exc)
    ctx = getattr(exc, "nbgrad_context", None)
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
        where_src = ctx.get("node_where")
        src = getattr(where_src, "source", "") if where_src is not None else ""
        if src:
            lines.append(f"saved by: {src}")
        mods = ctx.get("modified_by") or ()
        msrc = getattr(_as_location(mods[-1][2]), "source", "") if mods else ""
        if msrc:
            lines.append(f"modified by: {msrc}")
        lines.append("fix: do the in-place op on a clone() (or before the forward that saves it), "
                     "or use the out-of-place op.")
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


def is_autograd_error(exc: BaseException | None) -> bool:
    """True for errors nbgrad explains, or RuntimeErrors raised from inside nbgrad."""
    if exc is None:
        return False
    if getattr(exc, "nbgrad_context", None) is not None:
        return True
    if not isinstance(exc, RuntimeError):
        return False
    tb = exc.__traceback__
    last = None
    while tb is not None:
        last = tb
        tb = tb.tb_next
    if last is None:
        return False
    fname = last.tb_frame.f_code.co_filename.replace("\\", "/")
    return "/nbgrad/" in fname and "/nbgrad/notebook/" not in fname


# --- memory ----------------------------------------------------------------------------------


def memory_probe(devices=("cpu",)) -> dict:
    """``{device: memory_stats(device)}`` now; cheap, taken before and after a cell."""
    from nbgrad import backend

    out = {}
    for d in devices:
        try:
            out[d] = dict(backend.memory_stats(d))
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
            for k in ("live_bytes", "live_storages", "used_bytes", "total_bytes"):
                if k in stats and k in b:
                    delta[f"{dev}.{k}"] = stats[k] - b[k]
    named_bytes = sum(st.nbytes for st in snap.storages)
    return {"devices": now, "saved_bytes": saved_bytes, "saved_count": saved_count,
            "saved_partial": snap.truncated, "named_storage_bytes": named_bytes, "delta": delta}
