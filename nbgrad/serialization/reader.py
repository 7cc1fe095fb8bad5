"""Reading a checkpoint: PyTorch's zip archive (what torch.save and nbgrad.save write) and the
.npz files earlier nbgrad versions wrote.

Errors are PyTorch's: a damaged archive is a RuntimeError with torch's reader's text ("PytorchStream
Reader failed reading zip archive: failed finding central directory..."), a refused or malformed
pickle a ``pickle.UnpicklingError`` with torch's "Weights only load failed..." text, a pickle cut
short an EOFError. Python's own errors met on the way (KeyError, TypeError, zipfile.BadZipFile,
RecursionError...) never reach the caller as such: they say what is wrong with the file in one of
these types.
"""
from __future__ import annotations

import io
import os
import pickle
import pickletools
import re
import struct
import sys
import warnings
import zlib

import numpy as np

from .. import backend, dtypes
from ..storage import Storage
from ..typed_storage import TypedStorage
from . import npz
from .unpickler import FullUnpickler, UnsupportedStorage, WeightsUnpickler, _compat, allowed

UNSAFE_MESSAGE = (
    "In PyTorch 2.6, we changed the default value of the `weights_only` argument in `torch.load` "
    "from `False` to `True`. Re-running `torch.load` with `weights_only` set to `False` will "
    "likely succeed, but it can result in arbitrary code execution. Do it only if you got the "
    "file from a trusted source.")
_DOCS_MESSAGE = (
    "\n\nCheck the documentation of torch.load to learn more about types accepted by default "
    "with weights_only https://pytorch.org/docs/stable/generated/torch.load.html.")
_MINIZ = (". This is an internal miniz error. If you are seeing this error, there is a high "
          "likelihood that your checkpoint file is corrupted. This can happen if the checkpoint "
          "was not saved properly, was transferred incorrectly, or the file was modified after "
          "saving.")
_MAX_VERSION = 10  # the newest archive format version torch 2.13 reads (kMaxSupportedFileFormat)
_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C


def _wo_message(message):
    """torch.load's wrapping of a weights-only refusal (torch.serialization._get_wo_message)."""
    if re.search(r"GLOBAL (\S+) was not an allowed global by default.", message):
        return ("Weights only load failed. This file can still be loaded, to do so you have two "
                "options, \033[1mdo those steps only if you trust the source of the checkpoint"
                f"\033[0m. \n\t(1) {UNSAFE_MESSAGE}\n\t(2) Alternatively, to load with "
                "`weights_only=True` please check the recommended steps in the following error "
                "message.\n\tWeightsUnpickler error: " + message + _DOCS_MESSAGE)
    if re.search(r"(\S+) must be (\S+) to load", message):
        return f"Weights only load failed. {message}\n {UNSAFE_MESSAGE}\n"
    out = f"Weights only load failed. {UNSAFE_MESSAGE}\n"
    if not re.search(r"whose module (\S+) is blocked", message):
        out += ("Please file an issue with the following so that we can make `weights_only=True` "
                "compatible with your use case: WeightsUnpickler error: ")
    return out + "\n\n" + message + _DOCS_MESSAGE


def _miniz(what):
    return RuntimeError(f"PytorchStreamReader {what}{_MINIZ}")


class _Archive:
    """A torch zip archive's records, read as torch's reader (miniz, in PyTorchFileReader) reads
    them, with its checks and its error texts: every record under one top folder, stored or
    deflated, CRCs not checked (torch does not)."""

    def __init__(self, fh):
        self.fh = fh
        self.base = fh.tell()
        fh.seek(0, 2)
        self.size = size = fh.tell() - self.base
        if size < 22:  # shorter than a zip's end record
            raise _miniz("failed reading zip archive: not a ZIP archive")
        tail = self._at(max(0, size - 65557), min(size, 65557))
        pos = tail.rfind(b"PK\x05\x06")
        if pos < 0 or len(tail) - pos < 22:
            raise _miniz("failed reading zip archive: failed finding central directory")
        disk, cd_disk, n_disk, n_total, cd_size, cd_ofs = struct.unpack(
            "<HHHHII", tail[pos + 4:pos + 20])
        eocd = size - len(tail) + pos
        loc = self._at(eocd - 20, 20) if eocd >= 20 else b""
        if loc[:4] == b"PK\x06\x07":  # a zip64 end record (torch's writer always adds one)
            where, disks = struct.unpack("<QI", loc[8:20])
            if where > size:
                raise _miniz("failed reading zip archive: not a ZIP archive")
            if disks > 1:
                raise _miniz("failed reading zip archive: unsupported multidisk archive")
            z64 = self._at(where, 56)
            if len(z64) == 56 and z64[:4] == b"PK\x06\x06":
                disk, cd_disk, n_disk, n_total, cd_size, cd_ofs = struct.unpack("<IIQQQQ",
                                                                                z64[16:])
        if 0xFFFFFFFF in (cd_size, cd_ofs) or 0xFFFF in (n_disk, n_total):
            raise _miniz("failed reading zip archive: failed finding central directory")
        if n_total > 0xFFFFFFFF or n_disk > 0xFFFFFFFF:
            raise _miniz("failed reading zip archive: too many files")
        if n_total != n_disk or ((disk | cd_disk) and (disk != 1 or cd_disk != 1)):
            raise _miniz("failed reading zip archive: unsupported multidisk archive")
        if cd_size < n_total * 46 or cd_ofs + cd_size > size:
            raise _miniz("failed reading zip archive: invalid header or archive is corrupted")
        cd = self._at(cd_ofs, cd_size)
        self.records = {}  # name (bytes) -> (flags, method, compressed size, size, local offset)
        names = []
        p = 0
        for _ in range(n_total):
            if p + 46 > len(cd) or cd[p:p + 4] != b"PK\x01\x02":
                raise _miniz("failed reading zip archive: invalid header or archive is corrupted")
            (flags, method, csize, usize, n, m, k, disk_start, attrs,
             ofs) = struct.unpack("<HH8xIIHHHH2xII", cd[p + 8:p + 46])
            name = cd[p + 46:p + 46 + n]
            if 0xFFFFFFFF in (csize, usize, ofs):
                csize, usize, ofs = _zip64_sizes(cd[p + 46 + n:p + 46 + n + m], csize, usize,
                                                 ofs)
            if (not method and csize != usize) or (usize and not csize) or \
                    ofs + 30 + csize > size or p + 46 + n + m + k > len(cd):
                raise _miniz("failed reading zip archive: invalid header or archive is corrupted")
            if disk_start == 0xFFFF or (disk_start != disk and disk_start != 1):
                raise _miniz("failed reading zip archive: unsupported multidisk archive")
            if flags & 0x2000:
                raise _miniz("failed reading zip archive: unsupported encryption")
            if attrs & 0x10:  # a folder: miniz reads no bytes (torch gets an unfilled buffer)
                method = -1
            self.records[name] = (flags, method, csize, usize, ofs)
            names.append(name)
            p += 46 + n + m + k
        if not names:
            raise _miniz("failed reading zip archive: failed finding central directory")
        first = names[0]
        if b"/" not in first:
            self.prefix = None  # (an .npz: the caller decides)
            self.first = first.decode()
            return
        self.names = names
        self.prefix = first.split(b"/", 1)[0] + b"/"  # (bytes: torch compares bytes)

    def check_names(self):
        """Every record under the folder, its name UTF-8 (torch checks them when it lists them,
        after reading ``version``)."""
        prefix = self.prefix
        for name in self.names:
            if not name.startswith(prefix):
                raise RuntimeError(f"file in archive is not in a subdirectory "
                                   f"{prefix.decode()}: {name.decode()}")
            name[len(prefix):].decode("utf-8")

    def _at(self, offset, n):
        self.fh.seek(self.base + offset)
        return self.fh.read(n)

    def has(self, name):
        return self.prefix + name.encode() in self.records

    def record(self, name):
        """(flags, method, compressed size, size, local header offset), or RuntimeError."""
        rec = self.records.get(self.prefix + name.encode())
        if rec is None:
            raise _miniz(f"failed locating file {name}: file not found")
        if rec[0] & 0x61:  # encrypted, strongly encrypted, a patch
            raise _miniz(f"failed retrieving file meta-data for {name}: unsupported encryption")
        return rec

    def offset(self, name):
        """(offset of the record's data in the file, its size)."""
        _, _, csize, usize, ofs = self.record(name)
        head = self._at(ofs, 30)
        if len(head) != 30 or head[:4] != b"PK\x03\x04":
            raise _miniz(f"failed reading file {name}: invalid header or archive is corrupted")
        n, m = struct.unpack("<HH", head[26:30])
        start = ofs + 30 + n + m
        if start + csize > self.size:
            raise _miniz(f"failed reading file {name}: invalid header or archive is corrupted")
        return start, usize

    def read(self, name):
        _, method, csize, usize, _ = self.record(name)
        start, _ = self.offset(name)
        data = self._at(start, csize)
        if method == -1:
            return bytes(usize)
        if method == 8:
            try:
                data = zlib.decompressobj(-15).decompress(data, usize)
            except zlib.error:
                raise _miniz(f"failed reading file {name}: decompression failed") from None
        elif method:
            raise _miniz(f"failed reading file {name}: unsupported method")
        if len(data) != usize:
            raise _miniz(f"failed reading file {name}: file read failed")
        return data

    def size_of(self, name):
        return self.record(name)[3]

    def is_stored(self, name):
        return self.record(name)[1] == 0


def _zip64_sizes(extra, csize, usize, ofs):
    """The 64-bit sizes and offset of a zip64 central record (its extra field 0x0001)."""
    i = 0
    while i + 4 <= len(extra):
        tag, n = struct.unpack("<HH", extra[i:i + 4])
        if tag == 1:
            vals = list(struct.unpack(f"<{n // 8}Q", extra[i + 4:i + 4 + n - n % 8]))
            if usize == 0xFFFFFFFF and vals:
                usize = vals.pop(0)
            if csize == 0xFFFFFFFF and vals:
                csize = vals.pop(0)
            if ofs == 0xFFFFFFFF and vals:
                ofs = vals.pop(0)
            break
        i += 4 + n
    return csize, usize, ofs


class _StorageLoader:
    """The storages of one load, each read once: ``load(dtype, numel, key, location)``."""

    def __init__(self, archive, map_location, mmap_path, byteorder):
        self.archive = archive
        self.map_location = map_location
        self.mmap_path = mmap_path
        self.swap = byteorder is not None and byteorder != sys.byteorder
        self.loaded = {}

    def __call__(self, dtype, numel, key, location):
        done = self.loaded.get(key)
        if done is not None:
            if done.dtype is not dtype and not isinstance(dtype, UnsupportedStorage):
                raise pickle.UnpicklingError(f"storage {key} is read as {done.dtype} and as "
                                             f"{dtype}")
            return done
        name = f"data/{key}"
        bf16 = isinstance(dtype, UnsupportedStorage)
        if bf16 and dtype.dtype_name != "bfloat16":
            raise RuntimeError(f"nbgrad cannot load a {dtype.dtype_name} tensor (storage {name}): "
                               "numpy has no such dtype")
        np_dtype = np.dtype(np.uint16) if bf16 else dtype.np
        nbytes = numel * np_dtype.itemsize
        arr = self._array(name, np_dtype, numel, nbytes)
        if self.swap:
            arr = arr.byteswap()
        if bf16:  # numpy has no bfloat16: its values exactly, in float32 (its upper half)
            warnings.warn(f"nbgrad has no bfloat16: storage {name} is loaded as float32 "
                          "(the same values)", UserWarning, stacklevel=4)
            arr = (arr.astype(np.uint32) << 16).view(np.float32)
            dtype = dtypes.float32
        storage = _restore(Storage(arr), location, self.map_location)
        typed = TypedStorage(wrap_storage=storage, dtype=dtype, _internal=True)
        self.loaded[key] = typed
        return typed

    def _array(self, name, np_dtype, numel, nbytes):
        arc = self.archive
        have = arc.size_of(name)
        if have < nbytes:
            raise RuntimeError(f"PytorchStreamReader failed reading file {name}: the record "
                               f"holds {have} bytes, the checkpoint's storage needs {nbytes} "
                               f"({numel} elements of {np_dtype})")
        if self.mmap_path is not None and arc.is_stored(name) and numel:
            start, _ = arc.offset(name)
            mm = np.memmap(self.mmap_path, dtype=np_dtype, mode="c", offset=arc.base + start,
                           shape=(numel,))
            return mm.view(np.ndarray)
        arr = np.empty(numel, np_dtype)
        if arc.is_stored(name):  # read straight into the array: no second copy
            start, _ = arc.offset(name)
            arc.fh.seek(arc.base + start)
            if arc.fh.readinto(memoryview(arr).cast("B")) != nbytes:
                raise _miniz(f"failed reading file {name}: file read failed")
        else:
            arr[...] = np.frombuffer(arc.read(name)[:nbytes], dtype=np_dtype)
        return arr


def _default_restore(storage, location):
    if location == "cpu":
        return storage
    if location == "cuda" or re.match(r"cuda(:|[0-9]+)", location):
        if not backend.cuda_available():
            raise RuntimeError(
                "Attempting to deserialize object on a CUDA device but torch.cuda.is_available() "
                "is False. If you are running on a CPU-only machine, please use torch.load with "
                "map_location=torch.device('cpu') to map your storages to the CPU.")
        return Storage(backend.to_device(storage._root, backend.device(location)))
    raise RuntimeError("don't know how to restore data location of "
                       f"torch.storage.UntypedStorage (tagged with {location})")


def _restore(storage, location, map_location):
    """The storage where ``map_location`` sends it (torch's restore_location)."""
    if map_location is None:
        return _default_restore(storage, location)
    if isinstance(map_location, dict):
        return _default_restore(storage, str(map_location.get(location, location)))
    if isinstance(map_location, (str, bytes)):
        ml = map_location.decode() if isinstance(map_location, bytes) else map_location
        return _default_restore(storage, ml)
    if isinstance(map_location, backend.device):
        return _default_restore(storage, str(map_location))
    result = map_location(storage, location)
    if result is None:
        return _default_restore(storage, location)
    if isinstance(result, TypedStorage):
        return result._untyped_storage
    if not isinstance(result, Storage):
        raise TypeError(f"map_location returned {type(result).__name__}, not a storage")
    return result


# Python errors an unpickler meets in a malformed pickle: reported as what is wrong with the file
_MALFORMED = (KeyError, AttributeError, TypeError, ValueError, IndexError, RecursionError,
              OverflowError, MemoryError, struct.error, AssertionError)


def _unpickle(archive, map_location, weights_only, mmap_path, pickle_module, pickle_load_args):
    if not (archive.has("version") or archive.has(".data/version")):
        raise RuntimeError('Expected hasRecord("version") to be true, but got false.  (Could '
                           "this error message be improved?  If so, please report an "
                           "enhancement request to PyTorch.)")
    archive.check_names()
    if archive.has("constants.pkl"):
        if weights_only:
            raise RuntimeError("Cannot use ``weights_only=True`` with TorchScript archives passed "
                               "to ``torch.load``. " + UNSAFE_MESSAGE)
        raise RuntimeError("nbgrad cannot load TorchScript archives (torch.jit.save)")
    version = archive.read("version" if archive.has("version") else ".data/version")
    digits = re.match(rb"\s*(\d+)", version)  # (read as strtoll reads it: leading digits)
    if digits is None:
        raise RuntimeError(f"Couldn't parse the version {version.decode()} as Long Long.")
    v = int(digits.group(1))
    if not 1 <= v <= _MAX_VERSION:
        raise RuntimeError(f"Attempted to read a PyTorch file with version {v}, but the maximum "
                           f"supported version for reading is {_MAX_VERSION}. Your PyTorch "
                           "installation may be too old.")
    if archive.has(".format_version"):
        archive.read(".format_version")
    if archive.has(".storage_alignment"):
        int(archive.read(".storage_alignment"))  # (ValueError for a damaged one, as torch)
    byteorder = "little"
    if archive.has("byteorder"):
        raw = archive.read("byteorder")
        if raw not in (b"little", b"big"):
            raise ValueError("Unknown endianness type: " + raw.decode())
        byteorder = raw.decode()
    data = io.BytesIO(archive.read("data.pkl"))
    loader = _StorageLoader(archive, map_location, mmap_path, byteorder)
    if not weights_only:
        cls = FullUnpickler
        if pickle_module is not None and pickle_module is not pickle:
            cls = type("FullUnpickler", (FullUnpickler, pickle_module.Unpickler), {})
        result = cls(data, loader, **pickle_load_args).load()
        _serialization_id(archive)
        return result
    try:
        result = WeightsUnpickler(data, loader, **pickle_load_args).load()
    except pickle.UnpicklingError as e:
        raise pickle.UnpicklingError(_wo_message(str(e))) from None
    except UnicodeDecodeError:  # a name or string that is not UTF-8 (torch's error too)
        raise
    except _MALFORMED as e:
        what = f"{type(e).__name__}: {e}"
        if isinstance(e, (IndexError, struct.error)):
            what = f"malformed pickle (stack or data exhausted: {e})"
        raise pickle.UnpicklingError(_wo_message(what)) from None
    _serialization_id(archive)
    return result


def _serialization_id(archive):
    """torch reads the archive's id last (its text, strictly UTF-8)."""
    if archive.has(".data/serialization_id"):
        archive.read(".data/serialization_id").decode("utf-8")


def _open(f):
    """(file object, path or None, whether to close it)."""
    if isinstance(f, (bytes, bytearray, memoryview)):
        return io.BytesIO(bytes(f)), None, False
    if isinstance(f, (str, os.PathLike)):
        return open(f, "rb"), os.fspath(f), True
    if not hasattr(f, "read"):
        raise AttributeError(f"'{type(f).__name__}' object has no attribute 'read'")
    return f, None, False


def _legacy(fh, weights_only):
    """A file that is not a zip: torch reads its first pickle (the legacy format's magic
    number) — here always with the weights-only unpickler, so that nothing in it runs."""
    def no_storage(*args):
        raise pickle.UnpicklingError("Only persistent_load of storage is allowed")
    try:
        magic = WeightsUnpickler(fh, no_storage).load()
    except pickle.UnpicklingError as e:
        raise pickle.UnpicklingError(_wo_message(str(e))) from None
    except EOFError:
        raise
    except _MALFORMED as e:  # (UnicodeDecodeError included: a ValueError)
        raise pickle.UnpicklingError(_wo_message(f"{type(e).__name__}: {e}")) from None
    if magic != _LEGACY_MAGIC:
        raise RuntimeError("Invalid magic number; corrupt file?")
    raise RuntimeError("nbgrad reads PyTorch's zip format (torch.save's default since PyTorch "
                       "1.6), not the legacy format of this file: load it with torch and save it "
                       "again")


def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None,
         **pickle_load_args):
    """See :func:`nbgrad.load`."""
    not_set = weights_only is None
    if not_set:
        weights_only = pickle_module is None
    truthy = ("1", "y", "yes", "true")
    force = os.getenv("TORCH_FORCE_WEIGHTS_ONLY_LOAD", "0").lower() in truthy
    force_no = os.getenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "0").lower() in truthy
    if force and force_no:
        raise RuntimeError("Only one of `TORCH_FORCE_WEIGHTS_ONLY_LOAD` or "
                           "`TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD` should be set, but both were set.")
    if force:
        weights_only = True
    elif force_no and not_set:
        warnings.warn("Environment variable TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD detected, since the"
                      "`weights_only` argument was not explicitly passed to `torch.load`, forcing "
                      "weights_only=False.", UserWarning, stacklevel=3)
        weights_only = False
    if weights_only and pickle_module is not None:
        raise RuntimeError("Can not safely load weights when explicit pickle_module is specified")
    if pickle_load_args and weights_only:
        warnings.warn("pickle_load_args only works if `weights_only=False`.", stacklevel=3)
        pickle_load_args = {}
    pickle_load_args.setdefault("encoding", "utf-8")
    fh, path, close = _open(f)
    try:
        start = fh.tell()
        is_zip = fh.read(4) == b"PK\x03\x04"
        fh.seek(start)
        if not is_zip:
            if mmap:
                name = f"{path}, " if isinstance(f, str) else ""
                raise RuntimeError("mmap can only be used with files saved with "
                                   f"`torch.save({name}_use_new_zipfile_serialization=True), "
                                   "please torch.save your checkpoint with this option in order "
                                   "to use mmap.")
            return _legacy(fh, weights_only)
        if mmap and path is None:
            raise ValueError("f must be a file path in order to use the mmap argument")
        archive = _Archive(fh)
        if archive.prefix is None:
            if npz.is_npz(archive.records):
                fh.seek(start)
                return npz.load(fh, map_location)
            raise RuntimeError(f"file in archive is not in a subdirectory: {archive.first}")
        return _unpickle(archive, map_location, weights_only, path if mmap else None,
                         pickle_module, pickle_load_args)
    finally:
        if close:
            fh.close()


def unsafe_globals(f):
    """See :func:`nbgrad.serialization.get_unsafe_globals_in_checkpoint`."""
    fh, _, close = _open(f)
    try:
        archive = _Archive(fh)
        if archive.prefix is None:
            raise ValueError("Expected input to be a checkpoint returned by torch.save")
        found = set()
        for op, arg, _ in pickletools.genops(archive.read("data.pkl")):
            if op.name == "GLOBAL":
                module, name = _compat(*arg.split(" ", 1))
                found.add(f"{module}.{name}")
        return sorted(g for g in found if not allowed(g))
    finally:
        if close:
            fh.close()
