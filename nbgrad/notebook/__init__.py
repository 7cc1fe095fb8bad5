"""nbgrad's notebook layer: everything that imports IPython, ipywidgets, anywidget or pygraphviz.

- ``adapter``: the one reading of the engine's introspection API (grad_fn, next_functions,
  saved tensors, versions, views, storages, memory); a second engine would be read by another.
- ``inspect``: a pure snapshot of live autograd state (tensors, grad_fn graph, saved tensors,
  storages, memory) as plain data; holds no tensor.
- ``focus``: what a cell made or changed, compared with the cell before (incremental).
- ``layout``: DOT -> SVG in-process with pygraphviz, cached, under a time bound.
- ``render``: DOT / static HTML / text tree from a snapshot.
- ``svg_image``: a graph's SVG made small for an ``<img>`` (the static copy, the step widget,
  ``%nbgrad graph``): what only the panel's script reads, and repeated values, left out.
- ``widgets``: the anywidget panel; its front end is ``extension/panel.js`` and ``panel.css``
  (shipped as ``nbgrad/notebook/static``), laid out in the browser by ``extension/layout.js``
  with viz.js (``extension/viz.js``, sent once per page by the kernel, no network).
- ``extension``: ``%load_ext nbgrad`` (pre/post_run_cell hooks, the ``%nbgrad`` magic).

Nothing outside this package imports it at module level; ``nbgrad.load_ipython_extension`` and
``nbgrad.viz`` import it lazily, and ``import nbgrad`` under IPython calls
:func:`register_tensor_html` (this file only, which imports nothing at module level).
"""


def _tensor_html(t):
    try:
        from .render import tensor_html
        return tensor_html(t)
    except Exception:  # noqa: BLE001  (no rich display rather than a traceback in the cell)
        return None


def register_tensor_html(ip=None):
    """Give Tensor its rich HTML display in IPython (``text/html`` formatter); the core has no
    ``_repr_html_``. Called by ``import nbgrad`` under IPython and by ``%load_ext nbgrad``;
    twice is a no-op. ``ip``: the shell, by default the running one (none: nothing to do)."""
    if ip is None:
        from IPython import get_ipython
        ip = get_ipython()
        if ip is None:
            return
    from ..tensor import Tensor
    ip.display_formatter.formatters["text/html"].for_type(Tensor, _tensor_html)
