"""The panel widget (kernel side) and the pieces of HTML it carries."""

import json

import pytest

pytest.importorskip("anywidget")

import nbgrad  # noqa: E402
from nbgrad.notebook import inspect as nbi  # noqa: E402
from nbgrad.notebook import render  # noqa: E402
from nbgrad.notebook.widgets import NbgradPanel, panel_code, unpack  # noqa: E402

WIDGET = "application/vnd.jupyter.widget-view+json"


def seed000():
    x = nbgrad.ones(3, requires_grad=True)
    y = x.tanh()
    y.add_(3)
    plain = nbgrad.zeros(2)
    return {"x": x, "y": y, "plain": plain}


def test_panel_carries_widget_view_and_static_html():
    ns = seed000()
    snap = nbi.snapshot(nbi.named_tensors(ns))
    svg = render.dot_to_svg(render.to_dot(snap))
    panel = NbgradPanel(snap, svg)
    try:
        data, _ = panel._repr_mimebundle_()
        assert data[WIDGET]["model_id"] == panel.model_id
        assert data["text/plain"].startswith("nbgrad: 3 tensors")
        assert "stale saved tensor" in data["text/html"]
        assert panel.tab_order == ["Graph", "Tensors", "Views", "Memory"]
        assert panel.active == "Graph"
        assert "TanhBackward0" in panel.tabs["Graph"]
        graph = json.loads(panel.graph)["nodes"]
        tanh = next(k for k, v in graph.items() if v["title"] == "TanhBackward0")
        assert graph[tanh]["stale"] is True
        assert any("STALE" in line for line in graph[tanh]["details"])
        # hover details exist for every drawn element; the plain tensor is only a table row
        names = {v["title"] for v in graph.values()}
        assert {"x", "y"} <= names and "plain" not in names
        if svg is not None:
            for key in graph:
                assert f'id="{key}"' in svg
        # what is synced: tabs and graph packed in `content` (compressed), not as themselves
        synced = panel.get_state()
        assert "tabs" not in synced and "graph" not in synced
        assert unpack(synced["content"]) == {"tabs": panel.tabs, "graph": panel.graph}
        assert len(synced["content"]) < len(json.dumps([panel.tabs, panel.graph])) / 2
        # the loader is the widget's module; the code and the CSS come once per page
        assert "export default" in panel._esm and len(panel._esm) < 4000
        code = panel_code()
        assert "export default" in code["code"] and ".nbgrad-panel" in code["css"]
    finally:
        panel.close()


def test_the_front_end_inflates_content_as_zlib_does(tmp_path):
    """extension/inflate.js (synchronous, so a view's first draw has its content) against zlib:
    stored, fixed and dynamic Huffman blocks, multi-byte UTF-8, a real panel's content, and the
    Step tab set alone (its ``content`` follows)."""
    import base64
    import random
    import shutil
    import subprocess
    import zlib

    from nbgrad.notebook.widgets import _asset, pack

    node = shutil.which("node")
    if node is None:
        pytest.skip("no node to run the front end's JavaScript")
    rng = random.Random(0)
    texts = ["", "a", "hello " * 3, json.dumps({"x": "\u00e9 \u2713 " * 1000}),
             "".join(rng.choice("ab<>svg ") for _ in range(70_000)),
             bytes(rng.getrandbits(8) for _ in range(5_000)).hex()]
    cases = []
    for level in (0, 1, 3, 9):  # 0: stored blocks; short texts: fixed codes; long: dynamic
        for text in texts:
            raw = text.encode("utf-8")
            z = zlib.compressobj(level, zlib.DEFLATED, -15)
            cases.append([f"{len(raw)},"
                          + base64.b64encode(z.compress(raw) + z.flush()).decode(), text])
    ns = seed000()
    snap = nbi.snapshot(nbi.named_tensors(ns))
    panel = NbgradPanel(snap, render.dot_to_svg(render.to_dot(snap)))
    try:
        cases.append([panel.content, json.dumps(unpack(panel.content))])
        panel.tabs = {**panel.tabs, "Step": "<b>step</b>"}
        assert unpack(panel.content)["tabs"]["Step"] == "<b>step</b>"
        assert panel.content == pack(panel.tabs, panel.graph)
    finally:
        panel.close()
    script = tmp_path / "inflate.cjs"
    script.write_text(_asset("inflate.js") + """
const cases = JSON.parse(require("fs").readFileSync(0, "utf8"));
const out = cases.map(([c, t], i) => i === cases.length - 1
  ? JSON.stringify(nbgradUnpack(c)) : new TextDecoder().decode(
    nbgradZ(Uint8Array.from(atob(c.slice(c.indexOf(",") + 1)), (ch) => ch.charCodeAt(0)),
            Number(c.slice(0, c.indexOf(","))))));
console.log(JSON.stringify(out));
""")
    run = subprocess.run([node, str(script)], input=json.dumps(cases), capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout)
    assert got[:-1] == [t for _, t in cases[:-1]]
    assert json.loads(got[-1]) == json.loads(cases[-1][1])
    # a corrupt stream raises rather than drawing garbage
    bad = tmp_path / "bad.cjs"
    bad.write_text(_asset("inflate.js") + '\nnbgradZ(new Uint8Array([7, 255, 255]), 10);\n')
    assert subprocess.run([node, str(bad)], capture_output=True, timeout=60).returncode != 0


def test_error_tab_comes_first():
    ns = seed000()
    with pytest.raises(RuntimeError) as info:
        ns["y"].sum().backward()
    snap = nbi.snapshot(nbi.named_tensors(ns), error=info.value)
    panel = NbgradPanel(snap, None)
    try:
        assert panel.tab_order[0] == "Error" and panel.active == "Error"
        assert "saved by TanhBackward0" in panel.tabs["Error"]
        # no svg given (the layout failed): the text tree, and why (pygraphviz is here)
        assert "shown as text" in panel.tabs["Graph"] and "TanhBackward0" in panel.tabs["Graph"]
    finally:
        panel.close()


def test_memory_html_shows_a_device_pool():
    snap = nbi.Snapshot()
    snap.memory = {"devices": {"cuda": {"used_bytes": 2048, "total_bytes": 4096, "free_blocks": 3,
                                        "limit": 0, "live_bytes": 2048, "live_storages": 2,
                                        "peak_bytes": 4096}},
                   "saved_bytes": 12, "saved_count": 1, "delta": {"cuda.used_bytes": 1024},
                   "activity_delta": (2, 1, 1, 0)}
    html = render.memory_html(snap)
    assert "2.0 KiB used of 4.0 KiB reserved, 3 free blocks, limit none" in html
    assert "1.0 KiB more used in the cuda memory pool" in html
    assert "2 graph nodes, 1 in-place change; 1 storage allocated, 0 freed" in html
