"""``nbgrad.save`` / ``nbgrad.load`` in PyTorch's checkpoint format (torch.serialization).

``nbgrad.save`` writes what ``torch.save`` writes (a zip of a protocol-2 pickle naming
``torch._utils._rebuild_tensor_v2`` and the raw storages: see :mod:`.writer`), so ``torch.load``
reads it, with its default ``weights_only=True`` for state dicts and optimizer states; and
``nbgrad.load`` reads what ``torch.save`` writes, by default through a weights-only unpickler that
allows only the globals a checkpoint needs and never runs code (see :mod:`.unpickler`).
``weights_only=False`` unpickles anything, as in torch (a whole ``nn.Module``), and runs what the
file names: only for files from a trusted source. Files written by earlier nbgrad versions (.npz)
still load (:mod:`.npz`).
"""
import pickle

from . import reader, writer
from .reader import UNSAFE_MESSAGE  # noqa: F401
from .unpickler import (add_safe_globals, clear_safe_globals, get_safe_globals,  # noqa: F401
                        safe_globals)

__all__ = ["save", "load", "add_safe_globals", "clear_safe_globals", "get_safe_globals",
           "safe_globals", "get_unsafe_globals_in_checkpoint", "DEFAULT_PROTOCOL"]

DEFAULT_PROTOCOL = 2


def save(obj, f, pickle_module=pickle, pickle_protocol=DEFAULT_PROTOCOL,
         _use_new_zipfile_serialization=True, _disable_byteorder_record=False):
    """Save ``obj`` to ``f`` in PyTorch's zip checkpoint format (torch.save).

    Args:
        obj: anything picklable: a ``state_dict()``, an optimizer's ``state_dict()``, nested
            dicts/lists/tuples of tensors and numbers, or a whole ``nn.Module``. Tensors keep
            dtype, shape, strides and requires_grad; tensors sharing a storage (views) share it
            in the file; Parameters stay Parameters.
        f (str | os.PathLike | file object): where to write (a path is written as given).
        pickle_module, pickle_protocol: accepted for torch's signature; the pickle is protocol 2.

    Raises:
        RuntimeError: two tensors view one memory as different dtypes (torch's text).
        pickle.PicklingError, AttributeError: an object pickle cannot save (a lambda, a local
            class), as torch.save raises them.
    """
    writer.save(obj, f, pickle_module, pickle_protocol, _use_new_zipfile_serialization,
                _disable_byteorder_record)


def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None,
         **pickle_load_args):
    """Load what ``torch.save`` or :func:`save` wrote (torch.load).

    Args:
        f (str | os.PathLike | file object | bytes): the checkpoint.
        map_location (str | device | dict | callable | None): where storages go: a device for
            all, a dict from saved locations (``"cuda:0"``) to devices, or a function
            ``(storage, location) -> storage or None``; None keeps the saved device.
        pickle_module: a pickle module for ``weights_only=False`` loads.
        weights_only (bool | None): None means True unless ``pickle_module`` is given (torch
            2.6+'s default): only tensors, containers, numbers, strings and the globals
            :func:`add_safe_globals` allows are read; anything else is refused, never run.
            False unpickles anything (runs code from the file: trusted files only).
        mmap (bool | None): map each storage from the file (copy-on-write) instead of reading
            it; needs a path.

    Returns:
        The saved object: tensors on one storage stay views of one storage.

    Raises:
        pickle.UnpicklingError: a global or construct a weights-only load refuses, or a
            malformed pickle (torch's "Weights only load failed..." text).
        RuntimeError: a damaged archive (torch's reader's texts), a CUDA tensor without CUDA
            and without ``map_location``.
        EOFError: an empty file or a pickle cut short.
        ValueError: ``mmap=True`` without a path.
    """
    return reader.load(f, map_location, pickle_module, weights_only=weights_only, mmap=mmap,
                       **pickle_load_args)


def get_unsafe_globals_in_checkpoint(f):
    """The globals in a checkpoint's pickle that a weights-only load would refuse, as
    ``"module.name"`` strings (torch.serialization.get_unsafe_globals_in_checkpoint).

    Args:
        f (str | os.PathLike | file object): a zip checkpoint.
    """
    return reader.unsafe_globals(f)
