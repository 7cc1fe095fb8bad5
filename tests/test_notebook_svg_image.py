"""The static copy's picture (``svg_image.for_image``) and the rounded boxes as ``<rect>``
(``layout._clean``): smaller SVG that draws the same.

Checked against Graphviz's own SVG of the same graphs: every shape and text is drawn with the
same effective attributes (the inherited ones resolved as SVG does), and, where chromium is
installed, the two pictures rasterise to the same pixels.
"""

import re
import xml.etree.ElementTree as ET

import pytest

import nbgrad
from nbgrad import nn
from nbgrad.notebook import inspect as nbi
from nbgrad.notebook import layout, render, stepper
from nbgrad.notebook.svg_image import for_image

pytestmark = pytest.mark.skipif(not layout.available(), reason="pygraphviz is not installed")

NS = "{http://www.w3.org/2000/svg}"
SHAPES = ("path", "polygon", "polyline", "ellipse", "rect", "text")
INHERITED = {"fill": "black", "stroke": "none", "stroke-width": "1", "stroke-dasharray": "none",
             "text-anchor": "start", "font-family": "", "font-size": "", "font-weight": ""}


def _graphs():
    """SVGs as the panel draws them: stale saved tensors, views, a loop body, module clusters,
    freed saved tensors, a step-by-step walk."""
    x = nbgrad.randn(3, requires_grad=True)
    y = x.tanh()
    y.add_(1)
    a = nbgrad.ones(5, 3, requires_grad=True)
    d = (a * 2).t().exp().sum()
    w = nbgrad.randn(3, 3, requires_grad=True)
    h = nbgrad.zeros(1, 3)
    for _ in range(12):
        h = (h @ w).tanh()
    net = nn.Sequential(nn.Linear(3, 3), nn.Tanh(), nn.Linear(3, 1))
    out = net(nbgrad.randn(2, 3)).pow(2).mean()
    walk = stepper.StepPanel(out, root_name="out").svg()  # (before the backward frees it)
    out.backward()
    snaps = [nbi.snapshot([("y", y), ("x", x)]), nbi.snapshot([("d", d), ("b", a[1:3]), ("a", a)]),
             nbi.snapshot([("h", h), ("w", w)]), nbi.snapshot([("out", out)])]
    return [layout.svg(render.to_dot(s)) for s in snaps] + [walk]


def _drawn(svg: str) -> list:
    """Each shape and text in drawing order with its effective attributes: inherited ones
    resolved through its groups, a ``<style>`` of ``text{stroke:none}`` applied, a polygon's
    closing point (a repeat of its first) and the line breaks of texts left out."""
    root = ET.fromstring(svg)
    text_rule = any(s.text and re.fullmatch(r"\s*text\s*\{\s*stroke\s*:\s*none\s*\}\s*", s.text)
                    for s in root.iter(NS + "style"))
    out = []

    def walk(el, inherited, transforms):
        here = {**inherited, **{k: v for k, v in el.attrib.items() if k in INHERITED}}
        chain = transforms + ([el.attrib["transform"]] if "transform" in el.attrib else [])
        tag = el.tag.replace(NS, "")
        if tag in SHAPES:
            own = {k: v for k, v in el.attrib.items() if k not in INHERITED
                   and k not in ("id", "class", "transform")}
            if tag == "polygon":
                pts = own["points"].split()
                own["points"] = " ".join(pts[:-1] if len(pts) > 3 and pts[0] == pts[-1] else pts)
            eff = dict(here)
            if tag == "text" and text_rule:
                eff["stroke"] = "none"
            if tag != "text":  # (what only text reads)
                eff = {k: v for k, v in eff.items() if not k.startswith(("text-", "font-"))}
            out.append((tag, tuple(sorted(own.items())), tuple(sorted(eff.items())),
                        tuple(t.replace("scale(1 1) rotate(0) ", "") for t in chain),
                        "".join(el.itertext()) if tag == "text" else ""))
        for child in el:
            if child.tag.replace(NS, "") not in ("title", "style"):
                walk(child, here, chain)

    walk(root, dict(INHERITED), [])
    return out


def test_the_picture_draws_every_shape_and_text_as_graphviz_does():
    for svg in _graphs():
        small = for_image(svg)
        assert _drawn(small) == _drawn(svg)
        assert _drawn(for_image(svg, inline=True)) == _drawn(svg)
        # what only the panel's script reads is gone, and it is smaller
        assert not re.search(r' (id|class)="|<title>|\n', small)
        assert len(small) < 0.75 * len(svg)


def test_inline_pictures_bring_no_style_of_their_own():
    for svg in _graphs():
        inline = for_image(svg, inline=True)
        assert "<style" not in inline and not re.search(r' (id|class)="|<title>', inline)


def test_rounded_boxes_are_rects_of_graphvizs_box():
    dot = ('digraph { a [id=a, shape=box, style="filled,rounded", fillcolor="#d6f5d0", '
           'label="hello"]; b [id=b, shape=box, style="filled,rounded,dashed", label="x\\ny"]; '
           'subgraph cluster_c { id=cluster_c; style="rounded,dashed"; label="loop"; a; } '
           'a -> b }')
    raw = layout._layout(dot).decode()
    paths = re.findall(r'<path [^>]*d="M([^"]*)"', raw)
    boxes = []
    for d in paths:
        nums = [float(v) for v in re.findall(r"-?\d+(?:\.\d+)?", d)]
        if len(nums) == 50:  # a rounded box: 25 points
            xs, ys = nums[0::2], nums[1::2]
            boxes.append((min(xs), min(ys), max(xs) - min(xs), max(ys) - min(ys)))
    assert len(boxes) == 3
    svg = layout.svg(dot)
    rects = [tuple(float(m.group(k)) for k in (1, 2, 3, 4)) for m in re.finditer(
        r'<rect [^>]*x="(-?\d+)" y="(-?\d+)" width="(\d+)" height="(\d+)" rx="(\d+)"', svg)]
    assert len(rects) == 3 and "<path" in svg  # the edge stays a path
    for got, want in zip(sorted(rects), sorted(boxes)):
        assert all(abs(g - w) <= 1 for g, w in zip(got, want)), (got, want)
    assert all(int(r) > 0 for r in re.findall(r' rx="(\d+)"', svg))


def test_the_picture_rasterises_to_graphvizs_pixels():
    """In chromium: each graph drawn from Graphviz's SVG and from ``for_image``'s, as the
    static copy shows it (an ``<img>`` of a data URI), pixel for pixel."""
    from _jupyterlab import CHROMIUM, launch_chromium

    if CHROMIUM is None:
        pytest.skip("chromium is not installed")
    sync_api = pytest.importorskip("playwright.sync_api")
    pairs = [[render.svg_uri(s), render.svg_uri(for_image(s))] for s in _graphs()]
    with sync_api.sync_playwright() as p:
        browser = launch_chromium(p)
        try:
            page = browser.new_page()
            page.set_content("<html><body></body></html>")
            diffs = page.evaluate("""async (pairs) => {
              const draw = async (src) => {
                const im = new Image(); im.src = src; await im.decode();
                const c = document.createElement('canvas');
                c.width = im.naturalWidth; c.height = im.naturalHeight;
                const x = c.getContext('2d');
                x.fillStyle = 'white'; x.fillRect(0, 0, c.width, c.height); x.drawImage(im, 0, 0);
                return [c.width, c.height, x.getImageData(0, 0, c.width, c.height).data];
              };
              const out = [];
              for (const [a, b] of pairs) {
                const [wa, ha, pa] = await draw(a), [wb, hb, pb] = await draw(b);
                let n = 0;
                for (let i = 0; i < pa.length; i++) if (pa[i] !== pb[i]) n++;
                out.push([wa, ha, wb, hb, n]);
              }
              return out;
            }""", pairs)
        finally:
            browser.close()
    for wa, ha, wb, hb, n in diffs:
        assert (wa, ha) == (wb, hb) and wa > 50 and n == 0, diffs
