"""The torch reading of the adapter and its recorder, in this process (no kernel).

What the extension must never do to torch: change a value, an error, a ``_version``, or keep a
tensor or a graph alive. What it must read: stale saved tensors by torch's own check, cuts with
their line, the CUDA allocator's documented structures (tested with a fake: no GPU here), and a
torch internal that raises degrades to a one-line note.
"""

import gc
import sys
import weakref

import pytest

torch = pytest.importorskip("torch")

from nbgrad.notebook import adapter as A  # noqa: E402
from nbgrad.notebook import adapter_torch as T  # noqa: E402
from nbgrad.notebook import torch_record as R  # noqa: E402


@pytest.fixture
def recorder():
    """The recorder as a cell would have it, this file standing for the cell."""
    old = R.STATE.cells
    R.STATE.cells = {__file__: 1}
    R.set_on(True)
    R.start()
    try:
        yield R.STATE
    finally:
        R.stop()
        R.STATE.cells = old


def program():
    """Ops of every kind the recorder treats apart: plain, composite, in-place, views, cuts,
    multi-output, out=, backward."""
    torch.manual_seed(0)
    x = torch.randn(4, 3, requires_grad=True)
    lin = torch.nn.Linear(3, 2)
    h = lin(x).relu()
    a, b = h.split(1, dim=1)
    v = torch.zeros(4)[1:]
    v.mul_(2.0)
    buf = torch.empty(4, 2)
    torch.add(h.detach(), 1.0, out=buf)
    y = (a * b).sum() + buf.sum() + x.data.sum()
    y.backward()
    return [x.grad, lin.weight.grad, lin.bias.grad, y.detach(), buf], \
        [x._version, lin.weight._version, buf._version, v._version]


def test_values_versions_and_errors_identical(recorder):
    R.stop()
    want, want_v = program()
    R.start()
    got, got_v = program()
    assert got_v == want_v
    for g, w in zip(got, want):
        assert torch.equal(g, w) and g.dtype == w.dtype
    # the same error, the same text
    msgs = []
    for rec in (False, True):
        (R.start if rec else R.stop)()
        x = torch.ones(3, requires_grad=True)
        y = x.exp()
        y.add_(1)
        with pytest.raises(RuntimeError) as e:
            y.sum().backward()
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1]


def test_no_tensor_or_graph_kept_alive(recorder):
    x = torch.randn(50, 50, requires_grad=True)
    y = x.tanh() * 2
    y.add_(1)
    d = y.detach()
    n = y.detach().numpy()  # noqa: F841 - a numpy round trip recorded by address
    refs = [weakref.ref(t) for t in (x, y, d)]
    assert A.cut_of(d)[0] == "detach"
    del x, y, d, n
    gc.collect()
    assert all(r() is None for r in refs)


def test_lines_of_nodes_writes_and_cuts(recorder):
    x = torch.ones(3, requires_grad=True)
    y = x.tanh()  # line A
    line_a = sys._getframe().f_lineno - 1
    z = y * 2
    y.add_(3)  # line B
    line_b = sys._getframe().f_lineno - 1
    w = x.data  # line C
    line_c = sys._getframe().f_lineno - 1
    R.stop()
    tanh = z.grad_fn.next_functions[0][0]
    assert A.node_name(tanh) == "TanhBackward0"
    assert A.location(A.raw_where(tanh)).lineno == line_a
    (saved,) = A.saved_tensors(tanh)
    assert saved.name == "result" and saved.is_stale and not saved.released
    assert (saved.saved_version, saved.version) == (0, 1)
    if T._NO_RAW_DATA:  # torch < 2.5: a stale tensor cannot be read, so neither its writes
        assert saved.modified_by() == []  # (the one-line note at load says so)
        assert any("SavedTensor.data" in m for m in T._missing())
    else:
        ((version, op, where),) = saved.modified_by()
        assert (version, op, A.location(where).lineno) == (1, "add_", line_b)
    how, where = A.cut_of(w)
    assert how == "data" and A.location(where).lineno == line_c
    # torch's own check agrees
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        tanh._saved_result
    assert A.sequence_number(tanh) < A.sequence_number(z.grad_fn) <= A.node_count(z)


def test_writes_into_a_freed_storage_are_forgotten(recorder):
    """A storage freed and another made at the same address: the old one's in-place writes are
    not shown as the new one's (the write table keys storages by address)."""
    if T._NO_RAW_DATA:
        pytest.skip("torch < 2.5: a stale tensor's writes are not read")
    x = torch.ones(3, requires_grad=True)
    freed = set()
    for _ in range(500):
        old = torch.ones(3)
        old.add_(1)  # a write at version 1 into a storage freed just below
        freed.add(old.untyped_storage().data_ptr())
        del old
        y = x.tanh()
        if y.untyped_storage().data_ptr() in freed:
            break
    else:
        pytest.skip("the allocator gave no address twice")
    assert A.version_history(y) == []
    z = y * 2
    y.add_(3)
    line = sys._getframe().f_lineno - 1
    (saved,) = A.saved_tensors(z.grad_fn.next_functions[0][0])
    ((version, op, where),) = saved.modified_by()
    assert (version, op, A.location(where).lineno) == (1, "add_", line)


def test_the_panels_own_reads_are_not_recorded(recorder):
    x = torch.ones(3, requires_grad=True) * 2
    before = R.STATE.events
    A.array(x)  # a detach inside the panel
    assert R.STATE.events == before and A.cut_of(x) is None


def test_a_raising_torch_internal_degrades_to_one_line(recorder, monkeypatch):
    def broken(*_a, **_k):
        raise RuntimeError("internal changed")

    monkeypatch.setattr(R, "_where", broken)
    x = torch.ones(3, requires_grad=True)
    y = (x * 3).sum()  # the op's result is untouched
    y.backward()
    assert torch.equal(x.grad, torch.full((3,), 3.0))
    notes = R.stop()
    assert len(notes) == 1 and "could not record" in notes[0] and "\n" not in notes[0]
    R.start()


def test_saved_tensors_with_hooks_are_not_unpacked():
    calls = []

    def unpack(t):
        calls.append(1)
        return t

    x = torch.ones(3, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, unpack):
        y = x.exp()
    (s,) = A.saved_tensors(y.grad_fn)
    if T._NO_RAW_DATA:  # torch < 2.5 tells no hooked tensor apart: read through the hook,
        assert calls and not s.is_stale  # and the one-line note at load says so
        assert any("unpack hook" in m for m in T._missing())
    else:
        assert not calls and not s.is_stale


def test_released_saved_tensor_after_backward():
    x = torch.ones(3, requires_grad=True)
    y = x.exp()
    y.sum().backward()
    (s,) = A.saved_tensors(y.grad_fn)
    assert s.released and not s.is_stale


def test_engine_is_chosen_per_object_by_type():
    import nbgrad

    t, n = torch.ones(1, requires_grad=True), nbgrad.ones(1, requires_grad=True)
    assert A.engine_of(t) == "torch" and A.engine_of(n) == "nbgrad"
    assert A.engine_of((t * 2).grad_fn) == "torch" and A.engine_of((n * 2).grad_fn) == "nbgrad"
    assert A.is_tensor(t) and A.is_tensor(n) and A.is_tensor(torch.nn.Parameter(t))
    assert A.is_module(torch.nn.Linear(1, 1)) and A.is_module(nbgrad.nn.Linear(1, 1))

    class Fake:
        __class__ = torch.Tensor  # claims to be one

    assert not A.is_tensor(Fake())


# The documented structures of torch.cuda.memory_stats() and torch.cuda.memory._snapshot()
# (torch/cuda/memory.py docstrings), as a GPU session returns them.
FAKE_STATS = {
    "allocated_bytes.all.current": 3 << 20, "allocated_bytes.all.peak": 8 << 20,
    "reserved_bytes.all.current": 20 << 20, "active_bytes.all.current": 4 << 20,
    "inactive_split_bytes.all.current": 1 << 20, "allocation.all.current": 7,
    "segment.all.current": 2, "num_alloc_retries": 1, "num_ooms": 0,
    "allocated_bytes.small_pool.current": 1 << 20,
}
FAKE_SEGMENTS = [
    {"device": 0, "address": 1 << 30, "total_size": 2 << 20, "allocated_size": 1 << 20,
     "active_size": 1 << 20, "segment_type": "small", "stream": 0,
     "blocks": [{"size": 1 << 20, "state": "active_allocated"},
                {"size": 1 << 20, "state": "inactive"}]},
    {"device": 0, "address": 2 << 30, "total_size": 18 << 20, "allocated_size": 2 << 20,
     "active_size": 3 << 20, "segment_type": "large", "stream": 0,
     "blocks": [{"size": 2 << 20, "state": "active_allocated"},
                {"size": 1 << 20, "state": "active_pending_free"},
                {"size": 15 << 20, "state": "inactive"}]},
]


def test_cuda_allocator_read_from_its_documented_structure():
    out = T.cuda_summary(FAKE_STATS, FAKE_SEGMENTS)
    assert out["torch_cuda_allocated"] == 3 << 20 and out["torch_cuda_reserved"] == 20 << 20
    assert out["torch_cuda_peak"] == 8 << 20 and out["torch_cuda_inactive_split"] == 1 << 20
    assert out["torch_cuda_alloc_retries"] == 1 and out["torch_cuda_ooms"] == 0
    assert out["torch_cuda_segments"] == 2 and out["torch_cuda_largest_free_block"] == 15 << 20
    assert T.cuda_summary({}, None) == {}  # an allocator that reports nothing: nothing claimed
    from nbgrad.notebook import render
    from nbgrad.notebook.inspect import Snapshot

    snap = Snapshot()
    snap.memory = {"devices": {"cpu": out}, "delta": {"cpu.torch_cuda_allocated": 1 << 20}}
    html = render.memory_html(snap)
    assert "CUDA caching allocator" in html and "3.0 MiB allocated" in html
    assert "1.0 MiB more allocated on CUDA" in html


def test_memory_stats_never_initialises_cuda():
    assert T.memory_stats("cpu") == {} or torch.cuda.is_initialized()


def _loop_panel(lean, monkeypatch):
    """A 6-step training loop run as a cell would run it (the tracker's hooks, the recorder,
    this file standing for the cell); what the panel reads of the last step's graph."""
    from nbgrad.notebook import inspect as nbi
    from nbgrad.notebook import model_hooks, model_report

    monkeypatch.setattr(T, "LEAN_STEPS", lean)
    old = R.STATE.cells
    tracker = model_hooks.ModelTracker()
    tracker.install()
    try:
        R.STATE.cells = {__file__: 1}
        R.set_on(True)
        tracker.reset_cell()
        R.start()
        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
        mse = torch.nn.MSELoss()
        opt = torch.optim.AdamW(net.parameters(), lr=0.05)
        xb, yb = torch.randn(5, 4), torch.randn(5, 2)
        losses = []
        for _ in range(6):
            opt.zero_grad()
            loss = mse(net(xb), yb)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        R.stop()
        went_lean = bool(tracker.lean)
        ns = {"net": net, "mse": mse, "loss": loss}
        snap = nbi.snapshot([("loss", loss)])
        snap.model = model_report.with_graph(None, tracker, ns, snap)
        clusters = {c["title"]: sorted(snap.nodes[k].name for k in c["keys"] if k in snap.nodes)
                    for c in snap.model.clusters.values()}
        lines = sorted((n.name, n.where) for n in snap.nodes.values())
        versions = [p._version for p in net.parameters()]
    finally:
        tracker.uninstall()
        R.STATE.cells = old
    return went_lean, losses, clusters, lines, versions


def test_lean_steps_read_what_full_recording_reads(monkeypatch):
    """After a cell's watched steps torch's steps run lean (no global module hooks, the recorder
    aside inside the modules): the last step's graph must get the same module clusters and the
    same line for every node as when every step is recorded in full; values bit for bit."""
    lean = _loop_panel(True, monkeypatch)
    full = _loop_panel(False, monkeypatch)
    assert lean[0] and not full[0]  # (the lean path was taken, and only there)
    assert [v.hex() for v in lean[1]] == [v.hex() for v in full[1]]
    assert lean[4] == full[4]
    assert lean[2] == full[2]
    assert {"net (Sequential)", "net.0 (Linear)", "net.2 (Linear)", "mse (MSELoss)"} <= set(
        lean[2])
    assert lean[3] == full[3]
    with open(__file__) as f:  # every node but the leaves' is made by the loop's forward line
        line = next(i for i, src in enumerate(f, 1) if "loss = mse(net(xb), yb)" in src)
    made = [w for name, w in lean[3] if name != "AccumulateGrad"]
    assert len(made) >= 6 and all(w == f"{__file__}:{line}" for w in made), lean[3]


def test_a_lean_step_that_raises_leaves_the_recorder_on(monkeypatch, recorder):
    """A module call of a lean step that raises (caught by the cell) puts the recorder back on
    torch's stack: what the cell runs next is recorded."""
    from nbgrad.notebook import model_hooks

    tracker = model_hooks.ModelTracker()
    tracker.install()
    try:
        tracker.reset_cell()
        net = torch.nn.Linear(3, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        for _ in range(3):  # watched, then lean
            opt.zero_grad()
            net(torch.ones(2, 3)).sum().backward()
            opt.step()
        assert tracker.lean and R.STATE.mode is not None
        with pytest.raises(RuntimeError):
            net(torch.ones(2, 4))  # a shape error inside the lean call
        from torch.overrides import _get_current_function_mode_stack

        assert _get_current_function_mode_stack()[-1] is R.STATE.mode
        x = torch.ones(2, requires_grad=True)
        y = x.exp()  # line D: recorded
        line_d = sys._getframe().f_lineno - 1
        assert A.location(A.raw_where(y.grad_fn)).lineno == line_d
    finally:
        tracker.uninstall()
