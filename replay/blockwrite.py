"""Writing a large array to a file in blocks, without the GIL: ``write_blocks``.

Why blocks: the page cache gives a file folios as large as a ``write`` (XFS, and ext4 from Linux
6.16), up to 2 MiB, and finds each one whole, by compacting memory when free memory is
fragmented (any machine whose page cache has filled). One ``write`` of a whole array, as
``np.save`` makes, cost 2.3 ns a byte on this project's machines, writes of ``BLOCK`` bytes 0.5
(benchmarks/fresh_memory.py, 512 MiB). Blocks of 1 MiB were as cheap at some times and at others
not: ``import goal`` of 5 M operations spent 2.7-2.9 s in the kernel with them, 1.5-1.65 s with
128 KiB blocks (5 runs each, alternating, 2026-11-28 10:13-10:18).

Why without the GIL: written from Python, each block's ``write`` gives the GIL up only while it
runs, and the writer then waits to take it back from any thread that holds it meanwhile (a
Python loop for up to its 5 ms switch interval, a compiled kernel without ``nogil`` for all of
its run): beside a thread running Python, 1 MiB blocks written from Python took 5.2 ns a byte,
where ``np.save``'s one write, which gives the GIL up for the whole array, took 2 (this loop:
0.6). So the blocks are written by a compiled loop that holds no GIL, calling the C library's
``write`` through its address, passed in as an argument (a compiled function that captured a
ctypes function would keep this process's address in numba's cache, where address-space
randomisation makes it wrong in the next process).
"""

from __future__ import annotations

import ctypes
import functools
import os

import numpy as np

from hindsight.jit import njit, on_bind
from hindsight.system import WRITE_BLOCK

#: bytes per ``write``; each write but the first ends at a multiple of it in the file
BLOCK = WRITE_BLOCK


def write_blocks(fd: int, data: np.ndarray) -> None:
    """Write the bytes of the contiguous array ``data`` to the file descriptor ``fd`` at its
    current offset, in writes that end at multiples of ``BLOCK`` in the file. Raises the
    ``OSError`` a write meets (the rest is then written from Python, which names it)."""
    if not data.flags.c_contiguous:
        raise ValueError("write_blocks needs a C-contiguous array")
    flat = data.reshape(-1).view(np.uint8)
    start = os.lseek(fd, 0, os.SEEK_CUR)
    done = _write_loop(_write_address(), fd, flat, start, BLOCK)
    # a write that failed or was interrupted: the rest from Python, which retries an
    # interruption and raises any other error with its errno
    view = memoryview(flat)[done:]
    while len(view):
        view = view[os.write(fd, view):]


@functools.cache
def _write_address() -> int:
    """The address (this process's) of the C library's ``write``."""
    return ctypes.cast(ctypes.CDLL(None).write, ctypes.c_void_p).value


#: ``write`` through an address, for ``_write_loop`` (an intrinsic: ``_define_c_write``)
_c_write = None


def _define_c_write() -> None:
    """Define ``_c_write``, which ``_write_loop`` calls: ``write(fd, buf, n)`` of the C library,
    called at address ``addr`` (all int64; ``buf`` a pointer); returns its result. (Made when
    numba is imported: only numba can make an intrinsic, and a command that runs the loop
    compiled ahead of time never imports it.)"""
    from llvmlite import ir
    from numba import types
    from numba.extending import intrinsic

    @intrinsic
    def _c_write(typingctx, addr, fd, buf, n):
        sig = types.int64(types.int64, types.int64, types.int64, types.int64)

        def codegen(context, builder, signature, args):
            i64 = ir.IntType(64)
            ptr = ir.IntType(8).as_pointer()
            fnty = ir.FunctionType(i64, [ir.IntType(32), ptr, i64])
            fn = builder.inttoptr(args[0], fnty.as_pointer())
            return builder.call(fn, [builder.trunc(args[1], ir.IntType(32)),
                                     builder.inttoptr(args[2], ptr), args[3]])
        return sig, codegen
    globals()["_c_write"] = _c_write


on_bind(_define_c_write)


@njit(cache=True, nogil=True)
def _write_loop(addr, fd, flat, start, block):
    """Rule ``blocks_without_gil``: ``flat`` written at file offset ``start`` in writes that end
    at multiples of ``block``; returns how many bytes were written (fewer than ``len(flat)``
    when a write failed or wrote nothing)."""
    n = len(flat)
    base = np.int64(flat.ctypes.data)      # (an int64 sum: uint64 + int64 is a float in numba)
    at = 0
    while at < n:
        pos = start + at
        want = min(block - pos % block, n - at)
        got = _c_write(addr, np.int64(fd), base + at, np.int64(want))
        if got <= 0:
            break
        at += got
    return at
