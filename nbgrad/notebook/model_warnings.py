"""The warnings shown while the model panel is loaded: a loss target that broadcasts against its
input has no module to hook when the loss is functional (``F.mse_loss``), but PyTorch (and
nbgrad) warn; ``warnings.showwarning`` is wrapped to note it on the tracker, and the original
still shows every warning."""

from __future__ import annotations

import warnings

from . import adapter as A


def install(tracker) -> None:
    """See the warnings shown while loaded; the original ``showwarning`` still shows them."""
    orig = warnings.showwarning

    def showwarning(message, category, filename, lineno, file=None, line=None):
        try:
            warned(tracker, str(message))
        except Exception:  # noqa: BLE001 - a warning is shown whatever happens here
            pass
        return orig(message, category, filename, lineno, file, line)

    showwarning.nbgrad_original = orig
    warnings.showwarning = showwarning


def uninstall() -> None:
    orig = getattr(warnings.showwarning, "nbgrad_original", None)
    if orig is not None:
        warnings.showwarning = orig


def warned(tracker, text: str) -> None:
    if not text.startswith("Using a target size") or any(
            k[0] == "broadcast" for k in tracker.notes):
        return
    tracker.note(("broadcast", "warning"), None, "a loss target broadcasts against its input at "
                 "{where}: \u201c" + text.replace("{", "{{").replace("}", "}}")
                 + "\u201d (PyTorch's warning)", where=A.capture_where(skip=(warnings.__file__,)))
