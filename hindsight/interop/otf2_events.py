"""Compiled OTF2 event reading for ``otf2_import``: the records the importer turns into rows
arrive through C callbacks of the OTF2 C library that the ``otf2`` package ships
(``OTF2_GlobalEvtReader``), each appending one fixed-size record to a NumPy buffer, read
``CHUNK`` events at a time; the importer gets the buffer's columns, not an object per event.

The callbacks are ``otf2_records.c``, built with the C compiler (``$CC``, else ``cc``) on first
use into ``build/`` beside it (``records_library``; ``make`` builds it ahead of time), so that
an import loads no numba: importing numba and loading its cached callbacks took 0.5-0.7 s of
every import. Where it cannot be built, the same callbacks compiled by numba
(``otf2_cfuncs``) are used.

Record layout (``otf2_layout``; int64 columns): ``KIND``, ``LOC`` (the location ref), ``TIME``
(OTF2 ticks), the event's fields ``F0``..``F5`` (per kind, at ``KIND``), ``MASK`` (bit j: attribute
``ATTRS[j]`` is present) and the attributes' values ``A0``.. (in ``ATTRS``' order). The other event
types (RMA, I/O, threading, metrics, ...) have no row: ctypes callbacks count them by (type name,
location, metric ref), which is all the importer needs of them. The callbacks reach their buffer
through the ``userData`` pointer: an int64 state array (``_S_*``) holding the buffer's address, its
length and the addresses of the two ``OTF2_AttributeList`` functions they call.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import itertools
import os
import shlex
import shutil
import subprocess
import tempfile
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import numpy as np

# (the record layout, which importers of this module read as its own names)
from hindsight.interop.otf2_layout import (  # noqa: F401
    ENTER, LEAVE, SEND, ISEND, ISEND_COMPLETE, IRECV_REQUEST, RECV, IRECV, REQUEST_TEST,
    COLL_BEGIN, COLL_END, NBC_REQUEST, NBC_COMPLETE, PROBE, KIND_NAMES, KIND, LOC, TIME, F0, F1,
    F2, F3, F4, F5, MASK, A0, ATTRS, WIDTH, _S_BUF, _S_CAP, _S_N, _S_NATTR, _S_GETATTR, _S_REFS,
    _S_SCRATCH, _S_LEN, _TYPE_STRING,
)
from hindsight.interop.otf2_native import pointer
from hindsight.system import wait_through_interrupts

CHUNK = 1 << 16         # events per OTF2_GlobalEvtReader_ReadEvents call

#: the C callbacks, in ``KIND_NAMES``' order
RECORD_SOURCE = Path(__file__).resolve().with_name("otf2_records.c")
_C_CALLBACKS = ("hs_enter", "hs_leave", "hs_send", "hs_isend", "hs_isend_complete",
                "hs_irecv_request", "hs_recv", "hs_irecv", "hs_request_test", "hs_coll_begin",
                "hs_coll_end", "hs_nbc_request", "hs_nbc_complete", "hs_probe")
_C_KINDS = ("K_ENTER", "K_LEAVE", "K_SEND", "K_ISEND", "K_ISEND_COMPLETE", "K_IRECV_REQUEST",
            "K_RECV", "K_IRECV", "K_REQUEST_TEST", "K_COLL_BEGIN", "K_COLL_END",
            "K_NBC_REQUEST", "K_NBC_COMPLETE", "K_PROBE")
#: the record layout, the state array's slots and the kinds, for ``otf2_records.c``
RECORD_DEFINES = tuple(f"-D{name}={value}" for name, value in (
    ("KIND", KIND), ("LOC", LOC), ("TIME", TIME), ("F0", F0), ("F1", F1), ("F2", F2),
    ("F3", F3), ("F4", F4), ("F5", F5), ("MASK", MASK), ("A0", A0), ("WIDTH", WIDTH),
    ("NATTRS", len(ATTRS)), ("S_BUF", _S_BUF), ("S_CAP", _S_CAP), ("S_N", _S_N),
    ("S_NATTR", _S_NATTR), ("S_GETATTR", _S_GETATTR), ("S_REFS", _S_REFS),
    *zip(_C_KINDS, range(len(_C_KINDS)))))
_CFLAGS = ("-O2", "-shared", "-fPIC")


def records_library() -> Path | None:
    """``otf2_records.c`` built (once per source, layout and compiler) into ``build/`` beside
    it; None where there is no C compiler, no source (an install without it) or the build
    fails (the numba callbacks serve)."""
    cc = shlex.split(os.environ.get("CC") or "cc")
    if not cc or shutil.which(cc[0]) is None:
        return None
    args = [*_CFLAGS, *RECORD_DEFINES]
    try:
        key = hashlib.sha256(RECORD_SOURCE.read_bytes() + " ".join(cc + args).encode()
                             ).hexdigest()[:12]
    except OSError:
        return None
    build = RECORD_SOURCE.parent / "build"
    lib = build / f"otf2_records-{key}.so"
    if lib.is_file():
        return lib
    tmp = None
    try:
        build.mkdir(exist_ok=True)
        # a name of its own for each build (two threads or processes may build at once)
        fd, tmp = tempfile.mkstemp(prefix=f".{lib.name}.", suffix=".tmp", dir=build)
        os.close(fd)
        done = subprocess.run([*cc, *args, "-o", tmp, str(RECORD_SOURCE)],
                              capture_output=True, timeout=120, check=False)
        if done.returncode != 0:
            return None
        os.replace(tmp, lib)          # atomic: a concurrent build renames an identical file
    except (OSError, subprocess.SubprocessError):
        return None
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
    return lib


_loading = threading.Lock()


@functools.cache
def callback_addresses(compiled: bool = True) -> tuple[int, ...]:
    """The callbacks' addresses, in ``KIND_NAMES``' order: ``otf2_records.c``'s, else (or
    unless ``compiled``, or where its library does not load) numba's (``otf2_cfuncs``)."""
    with _loading:          # (one build and one load for the threads that ask at once)
        lib = records_library() if compiled else None
        if lib is not None:
            try:
                dll = ctypes.CDLL(str(lib))     # (never unloaded: CPython keeps a CDLL)
                return tuple(ctypes.cast(getattr(dll, name), ctypes.c_void_p).value
                             for name in _C_CALLBACKS)
            except (OSError, AttributeError):   # (a damaged file, a noexec mount)
                pass
        from hindsight.interop.otf2_cfuncs import CFUNCS
        return tuple(c.address for c in CFUNCS)


_RARE = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_void_p,
                         ctypes.c_void_p)
_METRIC = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_void_p,
                           ctypes.c_void_p, ctypes.c_uint32)


def _c_function(name: str, *argtypes):
    """OTF2 C function ``name`` (returning an OTF2_ErrorCode) with its own prototype (the
    ``_otf2`` bindings set argtypes on the library's shared function objects; this leaves them
    alone); an error code is raised as the bindings raise it (``_otf2.Error``)."""
    import _otf2
    from _otf2.Config import conf

    fn = ctypes.CFUNCTYPE(_otf2.ErrorCode, *argtypes)(pointer(getattr(conf.lib, name)))
    fn.errcheck = _otf2.ErrorCodes.HandleErrorCode
    return fn


@contextmanager
def read_events(trace, attr_refs: dict[str, int], compiled: bool = True
                ) -> Iterator[Iterator[tuple[np.ndarray, Counter]]]:
    """The events of the opened ``otf2.reader.Reader`` ``trace``, in the order its
    ``events`` gives them, as a context whose value yields per chunk: the records of
    ``KIND_NAMES`` (an (n, WIDTH) int64 array, valid until the next chunk is asked for) and the
    counts of the other events by (type name, location ref, metric ref or -1). ``attr_refs``:
    name -> ref of the attributes of ``ATTRS`` defined. A read error of the C library (damaged
    event file) is raised (``_otf2.Error``) after the chunk's records read before it.
    ``compiled``: see ``callback_addresses``.

    The next chunk is read on a thread while the caller converts this one, into the other of
    two buffers: the C library and its compiled callbacks run without the GIL (a ctypes call),
    and reading was a third of the import's conversion. Leaving the context waits for that
    read, so the reader is never closed under it."""
    import _otf2
    import otf2.events as E

    cap = CHUNK
    bufs = [np.zeros((cap, WIDTH), np.int64) for _ in range(2)]
    state = np.zeros(_S_LEN, np.int64)
    state[_S_CAP] = cap
    state[_S_NATTR] = pointer(_otf2_lib().OTF2_AttributeList_GetNumberOfElements)
    state[_S_GETATTR] = pointer(_otf2_lib().OTF2_AttributeList_GetAttributeByIndex)
    for j, name in enumerate(ATTRS):
        state[_S_REFS + j] = attr_refs.get(name, -1)
    # the package's own preparation (all locations selected, local definitions read); the
    # reader's close() closes this global event reader
    handle = trace._get_global_evt_reader_handle(None)
    rare = [Counter()]      # the counts of the chunk being read (the rare callbacks' target)
    keep = []           # the ctypes callbacks, alive while the reader may call them
    callbacks = _otf2.GlobalEvtReaderCallbacks_New()
    try:
        hot = dict(zip(KIND_NAMES, callback_addresses(compiled)))
        for name in (n for n, c in vars(E).items()
                     if isinstance(c, type) and issubclass(c, E._Event) and c is not E._Event):
            setter = _c_function(f"OTF2_GlobalEvtReaderCallbacks_Set{name}Callback",
                                 ctypes.c_void_p, ctypes.c_void_p)
            if name in hot:
                address = hot[name]
            elif name == "Metric":
                keep.append(_METRIC(lambda loc, t, u, a, ref: _count(rare[0], "Metric", loc,
                                                                     ref)))
                address = pointer(keep[-1])
            else:
                keep.append(_RARE(lambda loc, t, u, a, name=name: _count(rare[0], name, loc,
                                                                         -1)))
                address = pointer(keep[-1])
            setter(pointer(callbacks), address)
        set_callbacks = _c_function("OTF2_GlobalEvtReader_SetCallbacks", ctypes.c_void_p,
                                    ctypes.c_void_p, ctypes.c_void_p)
        set_callbacks(pointer(handle), pointer(callbacks), state.ctypes.data)
    finally:
        _otf2.GlobalEvtReaderCallbacks_Delete(callbacks)

    def read(buf: np.ndarray) -> tuple[np.ndarray, Counter, bool, Exception | None]:
        """One chunk into ``buf``: its records, its rare counts, whether it was the last,
        the read's error."""
        state[_S_BUF], state[_S_N] = buf.ctypes.data, 0
        rare[0] = Counter()
        try:
            got, error = _otf2.GlobalEvtReader_ReadEvents(handle, cap), None
        except Exception as exc:
            got, error = 0, exc
        return buf[:state[_S_N]], rare[0], error is not None or got < cap, error

    def chunks(pool: ThreadPoolExecutor) -> Iterator[tuple[np.ndarray, Counter]]:
        ahead = pool.submit(read, bufs[0])
        for k in itertools.count(1):
            recs, counts, last, error = ahead.result()
            if not last:
                ahead = pool.submit(read, bufs[k % 2])
            yield recs, counts
            if error is not None:
                raise error
            if last:
                return

    pool = ThreadPoolExecutor(1)
    try:
        yield chunks(pool)
    finally:
        # the read in flight ends before the caller closes the reader, even through a second
        # Ctrl-C (the C library would read freed memory: a crash instead of an interrupt)
        interrupted = wait_through_interrupts(lambda: pool.shutdown(wait=True))
        if interrupted is not None:
            raise interrupted


def _count(rare: Counter, name: str, loc: int, ref: int) -> int:
    rare[name, loc, ref] += 1
    return 0


def _otf2_lib():
    from _otf2.Config import conf

    return conf.lib

