"""The machine as hindsight's processes see it: usable cores, the project's git revision, and how
freed memory is kept. A leaf module (standard library only).

Keeping freed memory: on the virtual machines this project runs on (Firecracker guests),
touching memory the process has not used before costs 1-2 ns per byte: the host backs the page
on first use, and glibc hands large freed arrays back to the kernel (``munmap``, heap
trimming), whose free pages go back to the host. Replay allocates a few dozen bytes per event
and frees them again, pass after pass, so on such a machine that cost was most of the time of
preparing a warm trace. Raising glibc's mmap and trim thresholds keeps freed blocks in the heap
for reuse. The cost: the process's resident size stays at its peak until it exits, which a
command-line run does soon. Opt out with ``HINDSIGHT_KEEP_FREED_MEMORY=0``.
"""
from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable, TypeVar

_T = TypeVar("_T")

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_LIMIT = 1 << 30  # blocks up to 1 GiB come from (and return to) the heap

#: bytes per ``write`` of a large file (the replay caches: ``replay/blockwrite.py``; the text
#: exports: ``hindsight/bytetext.py``). The page cache gives a file folios as large as a write,
#: up to 2 MiB, and finds a large one whole, by compacting memory where free memory is
#: fragmented: one write of a whole array cost 4-5 times as much a byte here as writes of this
#: size (benchmarks/fresh_memory.py), and 1 MiB writes were as dear at times.
WRITE_BLOCK = 1 << 17


def is_elf(path: str | os.PathLike) -> bool:
    """Whether ``path`` is an ELF file (a compiled program), not a script."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def keep_freed_memory() -> bool:
    """Ask glibc to keep freed memory for reuse (see the module docstring). Returns whether the
    setting took effect (False on other C libraries, or when opted out)."""
    if os.environ.get("HINDSIGHT_KEEP_FREED_MEMORY", "1") == "0":
        return False
    import ctypes           # here, not at the top: a traced rank imports this module

    try:
        # the C library is loaded already: the process's own symbols have mallopt (where
        # ctypes.util.find_library would run ldconfig, 25 ms of every command's start-up)
        mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    except OSError:
        return False
    if mallopt is None:
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, _LIMIT)) and bool(mallopt(_M_TRIM_THRESHOLD, _LIMIT))


_exit_frozen = False


def skip_exit_collection() -> None:
    """At the interpreter's exit, leave the objects alive then to the operating system instead of
    having the garbage collector walk them: ``gc.freeze`` from an ``atexit`` handler (run after
    the handlers registered later). Once numba is loaded the collections of Python's shutdown
    walk its several hundred thousand objects: 0.3-0.5 s of every replay's wall time here, more
    than the kernel's. Objects then still in reference cycles are not finalized, which CPython
    does not promise at exit either; the standard streams are flushed as always."""
    global _exit_frozen
    if not _exit_frozen:
        _exit_frozen = True
        import atexit
        atexit.register(gc.freeze)


def wait_through_interrupts(wait: Callable[[], object]) -> KeyboardInterrupt | None:
    """Call ``wait`` until it returns, calling it again after each Ctrl-C (a
    ``KeyboardInterrupt``) that ends it early; returns the last such interrupt, None if there
    was none. For the short waits a command must see to their end before it stops, whatever
    the user presses: a thread still reading from a C library the caller is about to close, a
    cache being written. ``wait`` must be safe to call again (``Executor.shutdown(wait=True)``
    is)."""
    interrupted = None
    while True:
        try:
            wait()
            return interrupted
        except KeyboardInterrupt as exc:
            interrupted = exc


def release_freed_memory() -> bool:
    """Hand the memory freed so far back to the kernel (glibc's ``malloc_trim``, and pyarrow's
    pool's unused memory where pyarrow is loaded), for a command that is done with one phase's
    arrays and starts a phase that allocates elsewhere (pyarrow's own allocator cannot reuse
    glibc's kept blocks, so both would stay resident). Returns whether glibc's trim ran (False
    on other C libraries)."""
    import ctypes
    import sys

    # pyarrow's own allocator (mimalloc) keeps freed buffers too: the row groups it decoded
    # (asked only where pyarrow is loaded: this module imports nothing but the standard library)
    arrow = sys.modules.get("pyarrow")
    if arrow is not None and hasattr(arrow, "default_memory_pool"):
        arrow.default_memory_pool().release_unused()
    try:
        # the process's own symbols (ctypes.util.find_library runs ldconfig: 25 ms a call)
        trim = getattr(ctypes.CDLL(None), "malloc_trim", None)
    except OSError:
        return False
    if trim is None:
        return False
    trim(0)
    return True


def page_out(*arrays: Any) -> None:
    """Take the pages of file-mapped arrays (``np.load(..., mmap_mode=...)``) that are done with
    for now out of the process's resident memory (they count in it as long as they are mapped):
    ``madvise(MADV_DONTNEED)``. The file's pages stay in the page cache, so a later read maps
    them again without reading the disk. A copy-on-write mapping of which a page was written is
    left as it is (that page's copy would be lost), as are other arrays and other systems."""
    import mmap     # (not at the top: a traced rank loads this module)

    advice = getattr(mmap, "MADV_DONTNEED", None)
    for a in arrays:
        m = getattr(a, "_mmap", None)   # the mapping of an np.memmap
        if advice is None or m is None or not len(m):
            continue
        if getattr(a, "mode", "c") != "r" and not _unwritten(a):
            continue
        try:
            m.madvise(advice)
        except (OSError, ValueError):   # a closed mapping
            continue


def page_out_part(lo: int, hi: int, *arrays: Any) -> None:
    """``page_out`` of elements ``lo`` to ``hi`` of each (one-dimensional) array only: the
    pages that lie wholly among them. A pass over mapped arrays a part at a time hands each
    part's pages back as it goes, so that they do not all count in its peak."""
    import mmap

    advice = getattr(mmap, "MADV_DONTNEED", None)
    for a in arrays:
        m = getattr(a, "_mmap", None)
        if advice is None or m is None or not len(m) or a.ndim != 1 or hi <= lo:
            continue
        try:
            base = _address(m)
        except (TypeError, ValueError):     # a closed mapping
            continue
        start = -(-(a.ctypes.data + lo * a.strides[0] - base) // mmap.PAGESIZE) * mmap.PAGESIZE
        end = (a.ctypes.data + hi * a.strides[0] - base) // mmap.PAGESIZE * mmap.PAGESIZE
        if end <= start or start < 0 or end > len(m):
            continue
        if getattr(a, "mode", "c") != "r" and not _unwritten(a, start, end - start):
            continue
        try:
            m.madvise(advice, start, end - start)
        except (OSError, ValueError):
            continue


def _address(m: Any) -> int:
    """Where the mapping ``m`` starts in memory (any access mode)."""
    import numpy as np      # (here: only arrays, numpy's, are ever paged out)

    return int(np.frombuffer(m, np.uint8).ctypes.data)


def _unwritten(a: Any, start: int = 0, length: int | None = None) -> bool:
    """Whether no page of the copy-on-write mapping under ``a`` (an np.memmap), or of its bytes
    ``start`` to ``start + length``, holds a private copy: in /proc/self/pagemap (8
    little-endian bytes a page) such a page is present (bit 63) or swapped (bit 62) and not
    file-backed (bit 61), all three in the word's last byte. False where that cannot be read."""
    import mmap

    m = a._mmap
    length = len(m) - start if length is None else length
    try:
        first = (_address(m) + start) // mmap.PAGESIZE
        with open("/proc/self/pagemap", "rb") as f:
            f.seek(first * 8)
            flags = f.read(8 * -(-length // mmap.PAGESIZE))[7::8]
    except (OSError, TypeError, ValueError):
        return False
    return b"\1" not in flags.translate(_PRIVATE_COPY)


#: per last byte of a pagemap word: 1 where the page is a private copy (see ``_unwritten``)
_PRIVATE_COPY = bytes(1 if v & 0xC0 and not v & 0x20 else 0 for v in range(256))


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for a block (also a decorator); back on after
    it if it was on. Loading a trace makes thousands of short-lived objects (a few dozen
    pyarrow objects a rank file) and no cycles to collect, and the collections they trigger,
    each a walk over every tracked object, were 5-10 % of loading a trace of small files
    (measured: 64 and 256 ranks of a 1M-event ring; docs/replay.md, "Speed")."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def dying_with_us(cmd: list[str]) -> list[str]:
    """``cmd`` made to receive SIGTERM when this process dies, however it dies (SIGKILL, the
    out-of-memory killer): prefixed with util-linux's ``setpriv --pdeathsig TERM``, which sets
    Linux's parent-death signal (``PR_SET_PDEATHSIG``, kept across its exec of ``cmd``; it fires
    when the thread that started it ends, so start and wait on one thread). An MPI job that
    hindsight starts in a session of its own, to stop it as a whole, would otherwise run on when
    hindsight is killed: mpiexec, given SIGTERM, stops its ranks (a traced rank saves what it
    buffered). Where ``setpriv`` is missing, too old or cannot set the signal, ``cmd`` is returned
    unchanged."""
    setpriv = _setpriv_with_pdeathsig()
    return [setpriv, "--pdeathsig", "TERM", *cmd] if setpriv else list(cmd)


_setpriv: list[str | None] = []     # (found once per process)


def _setpriv_with_pdeathsig() -> str | None:
    import shutil
    import subprocess

    if not _setpriv:
        exe = shutil.which("setpriv")
        # (tried, not read from its --help: where prctl is refused, a seccomp profile, it would
        # fail every job it starts)
        try:
            works = exe is not None and subprocess.run(
                [exe, "--pdeathsig", "TERM", "true"], capture_output=True,
                timeout=10).returncode == 0
        except (OSError, subprocess.SubprocessError):
            works = False
        _setpriv.append(exe if works else None)
    return _setpriv[0]


def fresh_array(shape: int | tuple[int, ...], dtype: Any) -> Any:
    """A NumPy array of ``shape`` in memory of its own (an anonymous mapping), not from the C
    heap: its pages are mapped only when written, and unmapped when the array is freed. An
    array allocated at an upper bound of what it will hold costs only the memory written:
    glibc hands out its kept freed memory (above) already mapped, so such an array taken from
    the heap would be resident whole. Private and not reserved (``MAP_NORESERVE``): the bound
    is not charged against the system's commit limit. Raises OSError where the system refuses
    the mapping, OverflowError for a size past what a mapping can be."""
    import mmap

    import numpy as np

    dtype = np.dtype(dtype)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    n = 1
    for k in shape:
        n *= k
    flags = mmap.MAP_PRIVATE | getattr(mmap, "MAP_NORESERVE", 0)
    return np.frombuffer(mmap.mmap(-1, max(n, 1) * dtype.itemsize, flags=flags),
                         dtype)[:n].reshape(shape)


def usable_cores() -> int:
    """Cores this process may run on (its affinity mask), not the machine's total."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def available_memory() -> int:
    """Bytes of memory this process could take without swapping: ``MemAvailable`` of
    /proc/meminfo, else the physical pages; 0 if neither is known. ``HINDSIGHT_MEMORY`` (bytes)
    overrides it, to plan a run for a smaller machine."""
    env = os.environ.get("HINDSIGHT_MEMORY")
    if env:
        try:
            value = float(env)
        except ValueError:
            value = -1.0
        if not (value >= 0 and value < float("inf")):
            from hindsight.errors import UsageError
            raise UsageError(f"HINDSIGHT_MEMORY={env}: not a number of bytes")
        return int(value)
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 0


def git_revision() -> str | None:
    """hindsight's revision, read from .git without starting a process (a traced rank calls
    this, and fork after MPI_Init is unsafe with some transports); None outside a checkout.
    In a worktree or submodule ``.git`` is a file naming the real folder, whose refs may live in
    the main repository's folder (``commondir``)."""
    root = Path(__file__).resolve().parent.parent
    git = root / ".git"
    try:
        if git.is_file():
            line = git.read_text().strip()
            if not line.startswith("gitdir: "):
                return None
            git = (root / line[len("gitdir: "):]).resolve()
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref: "):
            return head
        ref = head[len("ref: "):]
        common = git
        if (git / "commondir").is_file():
            common = (git / (git / "commondir").read_text().strip()).resolve()
        for base in (git, common):
            if (base / ref).is_file():
                return (base / ref).read_text().strip()
        packed = common / "packed-refs"
        if packed.is_file():
            for line in packed.read_text().splitlines():
                if line.endswith(" " + ref):
                    return line.split()[0]
    except OSError:
        pass
    return None


def write_text_atomic(path: Path | str, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary name in the same folder and a rename, so a
    reader sees the old file or the new one, never half of one."""
    write_atomic(path, lambda tmp: tmp.write_text(text))


def write_atomic(path: Path | str, write: Callable[[Path], _T], *,
                 keep_suffix: bool = False) -> _T:
    """``write(tmp)`` writes the file ``path`` under a temporary name in the same folder, which
    then replaces ``path``: whatever stops the writing (an error, a full disk, Ctrl-C, the
    process killed by the kernel's out-of-memory killer) leaves ``path`` as it was, never half
    written. Returns what ``write`` returned.

    The temporary name is ``.<name>.<pid>.tmp``, which no reader's ``*.json`` (say) takes for
    an output; with ``keep_suffix`` (for writers that choose a format or a compression by it:
    pandas) it is ``.<stem>.<pid>.tmp<suffix>``. It is removed when the write fails, and left
    behind (hidden) only by a killed process. An existing file's permission bits are kept. A
    link is followed (its target is replaced), and a path that is not a regular file (a device,
    a pipe) is written directly."""
    target = Path(os.path.realpath(path))
    if target.exists() and not target.is_file():
        return write(target)
    tmp = target.with_name(f".{target.stem}.{os.getpid()}.tmp{target.suffix}" if keep_suffix
                           else f".{target.name}.{os.getpid()}.tmp")
    try:
        result = write(tmp)
        if target.exists():
            os.chmod(tmp, os.stat(target).st_mode & 0o7777)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return result
