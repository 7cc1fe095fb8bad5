"""The earlier graphs folded to one line in a panel ("2 earlier graphs: loss, z — show"): in the
widget "show" is a button that draws them in the panel (taken when clicked) and "hide" goes back;
the static copy keeps the ``%nbgrad graph NAME`` hint. Run in a real kernel: the cell after the
panel does what the front end's click does (sets ``earlier_shown``) and prints what the panel
holds then."""

import html
import json
import re

import pytest

from test_notebook_kernel import execute, panel_html

CELLS = [
    "import nbgrad\n%load_ext nbgrad",
    "a = nbgrad.ones(3, requires_grad=True)\nloss = (a * 2).sum()",
    "z = a.tanh()",
    "b = nbgrad.ones(2, requires_grad=True)\nc = b.exp()",
    # what the front end's "show" button does, then "hide"
    ("import json\n"
     "from nbgrad.notebook.extension import get_extension\n"
     "panel = get_extension()._live[-1][0]\n"
     "before = panel.tabs['Graph']\n"
     "panel.earlier_shown = True\n"
     "shown = panel.tabs['Graph']\n"
     "panel.earlier_shown = False\n"
     "print('PANEL', json.dumps([before, shown, panel.tabs['Graph'], panel.graph]))"),
]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return execute(CELLS, tmp_path_factory.mktemp("earlier"))


def _printed(cell):
    out = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
    m = re.search(r"PANEL (.+)", out)
    assert m, out
    return json.loads(m.group(1))


def _text(h):
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", h)).split())


def test_the_widget_line_has_a_show_button_the_static_copy_the_hint(run):
    before, _, _, _ = _printed(run.cells[4])
    assert "2 earlier graphs: loss, z" in _text(before)
    assert re.search(r'<button class="nbgrad-show-earlier"[^>]*>show</button>', before)
    static = panel_html(run.cells[3])
    assert "2 earlier graphs: loss, z" in _text(static)
    assert "%nbgrad graph NAME" in _text(static) and "nbgrad-show-earlier" not in static


def test_show_draws_the_earlier_graphs_in_the_panel_and_hide_goes_back(run):
    before, shown, after, graph = _printed(run.cells[4])
    for name in ("SumBackward0", "MulBackward0", "TanhBackward0"):  # loss's and z's graphs
        assert name not in before
        assert name in shown  # laid out here (nbclient: no browser), or DOT for viz.js
    assert "ExpBackward0" in before and "ExpBackward0" in shown  # this cell's own graph stays
    assert "2 earlier graphs shown: loss, z" in _text(shown)
    assert re.search(r'<button class="nbgrad-show-earlier"[^>]*>hide</button>', shown)
    assert after == before
    assert "TanhBackward0" not in graph  # the hover data follows the drawing


def test_show_with_the_browser_laying_out_sends_dot():
    """In process: a panel whose front end lays graphs out gets the combined graph as DOT."""
    import nbgrad
    from nbgrad.notebook import inspect as nbi
    from nbgrad.notebook.widgets import NbgradPanel

    a = nbgrad.ones(3, requires_grad=True)
    loss = (a * 2).sum()
    c = nbgrad.ones(2, requires_grad=True).exp()
    snap = nbi.snapshot([("c", c)], earlier=["loss"])
    seen = []

    def with_earlier(own):
        seen.append(own.earlier)
        return nbi.snapshot([("c", c), ("loss", loss)])

    panel = NbgradPanel(snap, None, dot="digraph {}", layout_fn=None, earlier_fn=with_earlier)
    try:
        assert "SumBackward0" not in panel.dot
        panel.earlier_shown = True
        assert seen == [["loss"]]
        assert "SumBackward0" in panel.dot and "ExpBackward0" in panel.dot
        assert "1 earlier graph shown: loss" in _text(panel.tabs["Graph"])
        panel.earlier_shown = False
        assert "SumBackward0" not in panel.dot and "ExpBackward0" in panel.dot
    finally:
        panel.close()
