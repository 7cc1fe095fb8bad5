"""nbgrad's notebook layer: everything that imports IPython, ipywidgets, anywidget or graphviz.

- ``inspect``: a pure snapshot of live autograd state (tensors, grad_fn graph, saved tensors,
  storages, memory) as plain data; holds no tensor.
- ``render``: DOT / SVG (graphviz ``dot``) / static HTML / text tree from a snapshot.
- ``widgets``: the anywidget panel; its front end is ``extension/panel.js`` and ``panel.css``
  (shipped as ``nbgrad/notebook/static``).
- ``extension``: ``%load_ext nbgrad`` (pre/post_run_cell hooks, the ``%nbgrad`` magic).

Nothing outside this package imports it at module level; ``nbgrad.load_ipython_extension`` and
``nbgrad.viz`` import it lazily.
"""
