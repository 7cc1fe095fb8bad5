"""``nbgrad.backends.cuda`` (torch.backends.cuda): the CUDA matmul switches scripts set.

nbgrad's matmuls are numpy's or cupy's; ``matmul.allow_tf32`` and the reduced-precision flags
keep PyTorch's defaults and whatever a script assigns, and change nothing. ``is_built()`` is
False, as for a PyTorch built without CUDA.
"""


class _MatmulFlags:
    """``torch.backends.cuda.matmul``: assignable flags with PyTorch's defaults."""

    def __init__(self):
        self.allow_tf32 = False
        self.allow_fp16_reduced_precision_reduction = True
        self.allow_bf16_reduced_precision_reduction = True

    def __repr__(self):
        return f"<nbgrad.backends.cuda.matmul allow_tf32={self.allow_tf32}>"


matmul = _MatmulFlags()


def is_built() -> bool:
    """False: nbgrad uses cupy, not PyTorch's CUDA build (torch.backends.cuda.is_built)."""
    return False
