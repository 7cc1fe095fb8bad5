"""The Memory tab's rows for torch's CUDA caching allocator (``adapter_torch.cuda_summary``'s
``torch_cuda_*`` keys): its state after the cell, and what the cell changed."""

from .render import _in_bytes, _plural


def cuda_state(st: dict) -> str:
    """The allocator in one line: allocated, reserved, active, peak, fragmentation, counts."""
    b = _in_bytes
    out = (f"{b(st['torch_cuda_allocated'])} allocated, {b(st.get('torch_cuda_reserved'))} "
           f"reserved, {b(st.get('torch_cuda_active'))} active, peak "
           f"{b(st.get('torch_cuda_peak'))}; {b(st.get('torch_cuda_inactive_split'))} in "
           "inactive split blocks (fragmentation)")
    if "torch_cuda_segments" in st:
        out += (f"; {_plural(st['torch_cuda_segments'], 'segment')}, largest free block "
                f"{b(st.get('torch_cuda_largest_free_block'))}")
    return out + (f"; {_plural(st.get('torch_cuda_allocations') or 0, 'allocation')}, "
                  f"{st.get('torch_cuda_alloc_retries') or 0} allocation retries, "
                  f"{_plural(st.get('torch_cuda_ooms') or 0, 'OOM')}")


def cuda_delta_rows(delta: dict) -> list:
    """``[["this cell", text]]``: what the cell changed in the allocator, per device key."""
    rows = []
    for dev in sorted({k.split(".")[0] for k in delta if k.endswith(".torch_cuda_allocated")}):
        for key, what in (("allocated", "allocated"), ("reserved", "reserved by the allocator"),
                          ("ooms", "OOMs")):
            d = delta.get(f"{dev}.torch_cuda_{key}")
            if d and key == "ooms":
                rows.append(["this cell", f"{d} more CUDA out-of-memory errors"])
            elif d:
                rows.append(["this cell", f"{_in_bytes(abs(d))} {'more' if d > 0 else 'less'} "
                             f"{what} on CUDA"])
    return rows
