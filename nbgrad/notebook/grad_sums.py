"""How many backward calls were summed into a parameter's ``.grad``: the model panel's count.

The tracker's one-shot gradient hooks (``model_hooks``) see the first steps of a cell and a
sample after; :func:`accumulated` completes the count with the steps not watched, from what the
``.grad`` tensor itself says (the same object, its version counter), or marks it a lower bound.
"""

from __future__ import annotations

from . import adapter as A


def accumulated(tracker, st, p) -> int:
    """The most backward calls summed into ``p.grad`` this cell (``st``: its ``ParamStat``),
    the steps after the last watched one included: counted when the same ``.grad`` took exactly
    one in-place sum per step since (its version says so: PyTorch's AccumulateGrad and nbgrad's
    add in place, +1 each; the count then carries into the next cell), else ``st.missed`` is set
    (a zero_grad, or a step that did not reach it, may have come between: "at least"). Called
    once a cell, by the report."""
    later = tracker.step_count() - st.summed_at if st.hits else 0
    if later > 0:
        ref = st.summed_into() if st.summed_into is not None else None
        g = A.grad(p)
        if ref is not None and ref is g and A.version(g) == st.summed_version + 1 + later:
            st.accumulated += later
            st.summed_version += later
            st.max_accumulated = max(st.max_accumulated, st.accumulated)
        else:
            st.missed = True
        st.summed_at += later
    return st.max_accumulated
