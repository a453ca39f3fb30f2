"""The bytes a call moves: of an mpi4py buffer specification, and of a pickled object.

Both run inside the program's MPI calls, so they use the standard library and mpi4py only and
allocate nothing large (docs/robustness.md, "No observer effect").
"""

from __future__ import annotations

import pickle as _pickle
from operator import index as _index
from typing import Any

from mpi4py import MPI

_dumps = MPI.pickle.dumps
_IN_PLACE = MPI.IN_PLACE
_Datatype = MPI.Datatype


def nbytes(buf: Any) -> int:
    """Bytes described by an mpi4py buffer specification, or -1 if it cannot be told.

    Every form mpi4py accepts: a buffer; ``[buf, type]``; ``[buf, count, type]``;
    ``[buf, (count, displ), type]``; the vector forms ``[buf, (counts, displs), type]`` and
    ``[buf, counts, displs, type]`` (their total); each also without the type (the buffer's
    item size then). A count is an int, a sequence of counts any iterable of ints (tuple,
    list, ``array.array``, a NumPy array)."""
    if buf is None or buf is _IN_PLACE:
        return -1
    n = getattr(buf, "nbytes", None)
    if n is not None:
        return n
    if isinstance(buf, (bytes, bytearray)):
        return len(buf)
    if isinstance(buf, (list, tuple)):
        if len(buf) == 2 and isinstance(buf[1], _Datatype):
            # [buf, type], the common form: as cheap as a plain buffer
            n = getattr(buf[0], "nbytes", None)
            if n is not None:
                return n
        try:
            return _spec_nbytes(buf)
        except (TypeError, ValueError, IndexError, OverflowError):
            return -1
    try:
        return memoryview(buf).nbytes
    except TypeError:
        return -1


def _spec_nbytes(spec: list | tuple) -> int:
    if not spec:
        return -1
    dtype = spec[-1] if isinstance(spec[-1], _Datatype) else None
    data, parts = spec[0], spec[1:-1] if dtype is not None else spec[1:]
    if not parts:
        return nbytes(data)
    counts = parts[0]
    if len(parts) == 1 and isinstance(counts, (tuple, list)) and len(counts) == 2:
        # (count, displ) or (counts, displs): the first half says how much
        counts = counts[0]
    total = _total(counts)
    if total is None:
        return nbytes(data)
    size = dtype.Get_size() if dtype is not None else _itemsize(data)
    return total * size if size > 0 else -1


def _total(counts: Any) -> int | None:
    """One count, or the sum of a sequence of counts; None when neither (given as None)."""
    if counts is None:
        return None
    try:
        return _index(counts)
    except TypeError:
        return int(sum(_index(c) for c in counts))


def _itemsize(data: Any) -> int:
    size = getattr(data, "itemsize", None)
    if size is not None:
        return size
    try:
        return memoryview(data).itemsize
    except TypeError:
        return -1


class _ByteCounter:
    """A file that only counts what is written to it."""
    __slots__ = ("n",)

    def __init__(self) -> None:
        self.n = 0

    def write(self, data) -> None:
        self.n += memoryview(data).nbytes


_counter = _ByteCounter()
_sizer = _pickle.Pickler(_counter, protocol=MPI.pickle.PROTOCOL)


def pickled_size(obj: Any) -> int:
    """The length of mpi4py's pickle of `obj`, without building it: the pickler streams to a
    counter in frames of at most 64 KiB and hands large buffers over without copying, so the
    size of a large object costs no large allocation (one would change the program's malloc
    thresholds: docs/robustness.md, "No observer effect"). An object the standard pickler
    refuses (a program may have given mpi4py another pickler, e.g. cloudpickle's) is sized by
    mpi4py's own; one neither can pickle is recorded as -1 (unknown), never an error in the
    program."""
    _counter.n = 0
    try:
        _sizer.clear_memo()
        _sizer.dump(obj)
        return _counter.n
    except Exception:
        try:
            return len(_dumps(obj))
        except Exception:
            return -1
