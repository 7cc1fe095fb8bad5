"""nbgrad's notebook layer: everything that imports IPython, ipywidgets, anywidget or pygraphviz.

- ``adapter``: the one reading of the engine's introspection API (grad_fn, next_functions,
  saved tensors, versions, views, storages, memory); a second engine would be read by another.
- ``inspect``: a pure snapshot of live autograd state (tensors, grad_fn graph, saved tensors,
  storages, memory) as plain data; holds no tensor.
- ``focus``: what a cell made or changed, compared with the cell before (incremental).
- ``layout``: DOT -> SVG in-process with pygraphviz, cached, under a time bound.
- ``render``: DOT / static HTML / text tree from a snapshot.
- ``widgets``: the anywidget panel; its front end is ``extension/panel.js`` and ``panel.css``
  (shipped as ``nbgrad/notebook/static``), laid out in the browser by ``extension/layout.js``
  with viz.js (``extension/viz.js``, sent once per page by the kernel, no network).
- ``extension``: ``%load_ext nbgrad`` (pre/post_run_cell hooks, the ``%nbgrad`` magic).

Nothing outside this package imports it at module level; ``nbgrad.load_ipython_extension`` and
``nbgrad.viz`` import it lazily.
"""
