"""The prepared form of a trace, cached next to it: ``TRACE/.replay-cache/prepared-<fingerprint>/``
holds one ``.npy`` per array (memory-mapped when read back) and ``meta.json``. The leading dot
keeps pyarrow from reading the directory as part of the trace; the fingerprint (of the rank
files' names, sizes and modification times, and of CACHE_VERSION) retires a cache as soon as
the trace or the cache's layout changes.

Beside the row-level arrays, each kernel stream built from them (``Prepared.stream``) is kept in
``stream-<key>/`` inside that directory: a later replay of the same form maps it instead of
building it again (at 5 M operations the build is a third of a warm replay). Its key covers the
form (``Prepared.stream``'s key) and the source of the code that builds streams (this package's
and ``hindsight.trace``'s modules), so a change of that code retires it without a version bump."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import shutil
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from hindsight import sources
from hindsight import trace as tf
from hindsight.system import usable_cores, wait_through_interrupts
from replay.blockwrite import write_blocks
from replay.instances import Instances
from replay.rma_epochs import EpochOps
from replay.rows import Messages, Rows
from replay.flags import Meetings
from replay.stream import Stream

if TYPE_CHECKING:   # (imported where a cache is written: a replay from the cache needs none)
    from concurrent.futures import Future, ThreadPoolExecutor

CACHE_DIR = tf.REPLAY_CACHE_DIR
CACHE_VERSION = 18
#: the kernel streams kept per cached trace (the oldest go first)
MAX_STREAMS = 3
#: seconds after which a temporary cache directory of a process no longer running is removed
ABANDONED_S = 600

# the prefix of each table's arrays in the cache
_TABLES = (("r_", "rows", Rows), ("m_", "msgs", Messages), ("c_", "coll", Instances),
           ("e_", "rma", EpochOps))
#: the prefix of a ``Prepared`` table's arrays in the cache, by the table's attribute
PREFIX = {attr: prefix for prefix, attr, _ in _TABLES}


def fingerprint(trace_dir: Path) -> str:
    """16 hex digits that change when a rank file or the manifest (or CACHE_VERSION) does."""
    stamps = [str(CACHE_VERSION)]
    for p in sorted(trace_dir.glob("rank-*.parquet")) + [trace_dir / tf.MANIFEST_NAME]:
        st = p.stat()
        stamps.append(f"{p.name}:{st.st_size}:{st.st_mtime_ns}")
    return sources.digest(*stamps)


def cache_path(trace_dir: Path) -> Path | None:
    """Where the prepared form of ``trace_dir`` is cached (None: its files cannot be read)."""
    try:
        return trace_dir / CACHE_DIR / f"prepared-{fingerprint(trace_dir)}"
    except OSError:
        return None


def save(prep: Any, path: Path, staged: DirWriter | None = None) -> None:
    """Write ``prep`` (a ``replay.prepare.Prepared``) as the directory ``path``: one ``.npy``
    per array and ``meta.json``, under a temporary name renamed into place (a reader never sees
    half a cache; of two writers the second finds the directory there and drops its copy).
    Older caches are removed. ``staged``: ``stage(path)``'s writer, to which some of ``prep``'s
    arrays were added already (as ``replay.prepare.stage_prepared`` adds them); where any of
    them is not the very array ``prep`` holds (or it writes elsewhere), it is abandoned and
    everything written anew."""
    arrays = {"trail": prep.trail, "host_of_rank": prep.host_of_rank}
    for prefix, attr, _ in _TABLES:
        table = getattr(prep, attr)
        arrays.update({prefix + f.name: getattr(table, f.name)
                       for f in dataclasses.fields(table)})
    meta = dict(nranks=prep.nranks, t0=prep.t0, region_names=prep.region_names,
                comm_members={str(k): v for k, v in prep.comm_members.items()},
                problems=prep.problems, notes=prep.notes, version=CACHE_VERSION,
                measured_makespan_ns=prep.measured_makespan_ns,
                measured_rank_end_ns=prep.measured_rank_end_ns.tolist(),
                arrays=sorted(arrays))
    if staged is not None and (staged.path != path or any(
            arrays.get(k) is not a for k, a in staged.added.items())):
        staged.abandon()
        staged = None
    if staged is None:
        if _make_room(path):
            write_dir(path, arrays, meta)
        return
    with staged:
        for name in sorted(set(arrays) - set(staged.added), key=lambda k: -arrays[k].nbytes):
            staged.add(name, arrays[name])
        staged.finish(meta)


def stage(path: Path) -> DirWriter | None:
    """A writer of the prepared form's cache at ``path``, to add arrays to as they are ready
    and give to ``save`` (None where the trace directory cannot be written)."""
    if path.is_dir() or not _make_room(path):
        return None         # (written already: by an earlier check of the same files)
    return DirWriter(path)


def _make_room(path: Path) -> bool:
    """The cache folder made, other prepared forms than ``path`` removed; False where the trace
    directory cannot be written."""
    try:
        path.parent.mkdir(exist_ok=True)
        for old in path.parent.glob("prepared-*"):
            if old.is_dir() and old != path:
                # (a stream still written behind a replay of it would make it again)
                remove_tree(old, ignore_errors=True)
            elif old.is_file():  # the single-file caches of earlier versions
                old.unlink()
    except OSError:
        return False
    return True


def write_dir(path: Path, arrays: dict[str, np.ndarray], meta: dict[str, Any], *,
              threads: int | None = None,
              convert: Callable[[str, np.ndarray], np.ndarray] | None = None) -> None:
    """``arrays`` (one ``.npy`` each) and ``meta`` (``meta.json``) as the directory ``path``
    (a ``DirWriter``'s, which see for ``threads`` and ``convert``)."""
    with DirWriter(path, threads=threads, convert=convert) as w:
        # largest first: the writers' shares come out even
        for name in sorted(arrays, key=lambda k: -arrays[k].nbytes):
            w.add(name, arrays[name])
        w.finish(meta)


class DirWriter:
    """A directory of arrays (one ``.npy`` each) and ``meta.json``, written under a temporary
    name while its arrays are ``add``-ed and renamed into place by ``finish``: a reader never
    sees half of it. Nothing is written where the directory cannot be (a read-only trace
    directory) or another process wrote it first; ``abandon`` (or leaving a ``with`` block
    without ``finish``) removes what was written.

    The arrays are written on a thread per core (default) as they are added: writing is mostly
    the kernel's taking fresh pages for the page cache, which runs on both cores at once (a
    write lets go of the GIL while it runs). A caller that has some arrays
    ready before the others adds them early and goes on computing the rest meanwhile
    (``replay.prepare.stage_prepared``). ``threads=1``: written in the calling thread, as added;
    ``convert(name, array)``: the array as stored (a narrower copy, say), made by its writer just
    before the write and let go after it, so that such copies live one per writer at a time."""

    def __init__(self, path: Path, *, threads: int | None = None,
                 convert: Callable[[str, np.ndarray], np.ndarray] | None = None):
        self.path = path
        self.added: dict[str, np.ndarray] = {}
        self._convert = convert
        self._failed = threading.Event()
        self._futures: list = []
        self._pool: ThreadPoolExecutor | None = None
        self._writers = max(1, threads or usable_cores())
        self._tmp: Path | None = path.with_name(
            f".{path.name}.{os.getpid()}-{threading.get_ident()}.tmp")
        _sweep_abandoned(path.parent)
        try:
            self._tmp.mkdir()
        except OSError:
            self._tmp = None            # (then every call does nothing)

    def __enter__(self) -> DirWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.abandon()

    def add(self, name: str, array: np.ndarray) -> None:
        """Write ``array`` as ``name.npy`` (on a writer thread)."""
        self.add_in_turn({name: array})

    def add_in_turn(self, arrays: dict[str, np.ndarray]) -> None:
        """Write ``arrays`` one after the other, by one writer: a batch added early, while the
        caller still computes, takes one core, not all of them (two batches added one after
        the other may be written at once, each by its writer)."""
        if self._tmp is None:
            return
        for name in arrays:
            if name in self.added:
                raise ValueError(f"{name}: added twice")
        self.added.update(arrays)
        names = list(arrays)
        from concurrent.futures import Future

        if self._writers > 1:
            try:
                if self._pool is None:
                    # (imported here: at exit its first import raises RuntimeError too)
                    from concurrent.futures import ThreadPoolExecutor

                    self._pool = ThreadPoolExecutor(self._writers,
                                                    thread_name_prefix="hindsight-cache")
                self._futures.append(self._pool.submit(self._write, names))
                return
            except RuntimeError:
                pass            # no thread can start (the interpreter is exiting)
        done: Future = Future()
        self._futures.append(done)
        try:
            self._write(names)
            done.set_result(None)
        except OSError as exc:
            done.set_exception(exc)     # (raised by ``finish``, which then leaves nothing)

    def _write(self, names: list[str]) -> None:
        for name in names:
            if self._failed.is_set():
                return                  # after a failed write the others are not begun
            try:
                a = self.added[name]
                _save_array(self._tmp / f"{name}.npy",
                            a if self._convert is None else self._convert(name, a))
            except BaseException:
                self._failed.set()
                raise

    def finish(self, meta: dict[str, Any]) -> None:
        """Wait for the arrays, then write ``meta`` and rename the directory into place (an
        ``OSError`` of any write: nothing is left; another error is raised, nothing left)."""
        if self._tmp is None:
            return
        try:
            self._wait()
            (self._tmp / "meta.json").write_text(json.dumps(meta))
            os.rename(self._tmp, self.path)
        except OSError:
            pass
        finally:
            self.abandon()

    def _wait(self) -> None:
        try:
            for done in self._futures:
                done.result()
        finally:
            self._shutdown()

    def _shutdown(self) -> None:
        """Stop the writers (those begun end their array): a Ctrl-C does not cut the wait
        short, as a writer would go on creating files in a directory being removed."""
        if self._pool is not None:
            pool, self._pool = self._pool, None
            interrupted = wait_through_interrupts(
                lambda: pool.shutdown(wait=True, cancel_futures=True))
            if interrupted is not None:
                raise interrupted

    def abandon(self) -> None:
        """Stop writing and remove what was written (after ``finish``: nothing to do)."""
        if self._tmp is None:
            return
        self._failed.set()
        try:
            self._shutdown()
        finally:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None


def _sweep_abandoned(parent: Path) -> None:
    """Remove the temporary directories (``DirWriter``'s) that a process killed before its
    rename left: those of processes no longer running, untouched for ``ABANDONED_S`` (a process
    of another PID namespace may share the trace directory)."""
    try:
        found = list(parent.glob(".*.tmp"))
    except OSError:
        return
    for tmp in found:
        try:
            pid = int(tmp.name.rsplit(".", 2)[-2].split("-")[0])
            if time.time() - tmp.stat().st_mtime < ABANDONED_S:
                continue
            os.kill(pid, 0)
        except ProcessLookupError:
            shutil.rmtree(tmp, ignore_errors=True)
        except (ValueError, IndexError, OSError):
            pass            # not ours, or a process of another user (still running)


def _save_array(where: Path, arr: np.ndarray) -> None:
    """``arr`` as the ``.npy`` file ``where`` (the bytes ``np.save`` writes), its data written
    in blocks without the GIL (``replay.blockwrite``: one write of a whole array cost 4-5 times
    as much a byte here)."""
    arr = np.ascontiguousarray(arr)
    if arr.dtype.kind not in "biufcmM":             # (object and record arrays: np.save pickles)
        raise ValueError(f"{where.name}: {arr.dtype} arrays are not cached")
    with open(where, "wb") as fh:
        np.lib.format.write_array_header_1_0(fh, np.lib.format.header_data_from_array_1_0(arr))
        fh.flush()
        write_blocks(fh.fileno(), arr)


def load(path: Path) -> dict[str, Any]:
    """The cached fields of a ``Prepared`` (all but its path and manifest), its arrays
    memory-mapped copy-on-write: nothing is read until used (a warm load costs page-cache
    faults only), and writing to an array never changes the file. Raises on a cache of another
    version or a damaged one."""
    meta = json.loads((path / "meta.json").read_text())
    if meta.get("version") != CACHE_VERSION:
        raise ValueError("old cache")
    z = {name: np.load(path / f"{name}.npy", mmap_mode="c") for name in meta["arrays"]}
    out: dict[str, Any] = {
        attr: cls(**{f.name: z[prefix + f.name] for f in dataclasses.fields(cls)})
        for prefix, attr, cls in _TABLES}
    out.update(nranks=int(meta["nranks"]), region_names=meta["region_names"],
               trail=z["trail"], t0=int(meta["t0"]), host_of_rank=z["host_of_rank"],
               comm_members={int(k): v for k, v in meta["comm_members"].items()},
               problems=list(meta["problems"]), notes=list(meta["notes"]),
               measured=(float(meta["measured_makespan_ns"]),
                         np.array(meta["measured_rank_end_ns"], np.float64)))
    return out


def stream_path(prepared_dir: Path, key: tuple) -> Path:
    """Where the stream of form ``key`` (``Prepared.stream``'s key) of the trace cached in
    ``prepared_dir`` is kept."""
    return prepared_dir / f"stream-{sources.digest(repr(key), _code_digest())}"


@functools.cache
def _code_digest() -> str:
    """A digest of the source that builds streams: every module of this package (not its
    models, calibration or sweeps subpackages) and of ``hindsight.trace`` (op codes)."""
    folders = {"replay", "hindsight/trace"}
    return sources.digest_of([p for p in sources.file_digests() if p.rpartition("/")[0] in folders])


#: the thread that writes streams behind the replay that built them (``save_stream_behind``),
#: and the writes given to it that ``flush_streams`` has not yet waited for
_behind: ThreadPoolExecutor | None = None
_pending: list = []
_behind_lock = threading.Lock()


def save_stream_behind(st: Stream, path: Path) -> None:
    """``save_stream`` on a thread of its own, while the caller goes on to replay ``st``: a
    first replay's kernel then runs during the writing, which is mostly the system's taking
    fresh page-cache pages (at 5 M operations 0.1-0.2 s each). The kernels only read a stream's
    arrays. The process waits for the writing at exit (``concurrent.futures`` runs what its
    threads were given before it joins them); ``flush_streams`` waits for it sooner. Where no
    thread can start (the interpreter is exiting), the stream is written here and now."""
    global _behind
    with _behind_lock:
        try:
            if _behind is None:
                # (imported here: at exit its first import raises RuntimeError too)
                from concurrent.futures import ThreadPoolExecutor

                _behind = ThreadPoolExecutor(1, thread_name_prefix="hindsight-stream-cache")
            # (the writings done without an error need no waiting for: a long-running process
            # that replays many traces keeps no list of them)
            _pending[:] = [f for f in _pending if not f.done() or f.exception() is not None]
            _pending.append(_behind.submit(save_stream, st, path))
            return
        except RuntimeError:
            pass
    save_stream(st, path)


def flush_streams() -> None:
    """Wait until every stream ``save_stream_behind`` was given is written (or not, where its
    directory cannot be); an error of a writing (a bug: a directory that cannot be written is
    no error) is raised here."""
    global _behind
    with _behind_lock:
        pool, done = _behind, list(_pending)
    if pool is not None:
        pool.shutdown(wait=True)    # (interrupted, a later call waits again)
    with _behind_lock:
        if _behind is pool:
            _behind = None
        _pending[:] = [f for f in _pending if f not in done]
    for f in done:
        f.result()


def remove_tree(path: Path, ignore_errors: bool = False) -> None:
    """``shutil.rmtree(path)`` of a directory that may hold traces this process replayed: the
    streams still being written behind those replays (``save_stream_behind``) are waited for
    first, as a writer creating files in it would make the removal fail (or, ignoring errors,
    leave part of it)."""
    flush_streams()
    shutil.rmtree(path, ignore_errors=ignore_errors)


def _forget_behind() -> None:
    """A forked child has none of its parent's threads: its streams get a writer of their own."""
    global _behind, _behind_lock
    _behind, _behind_lock = None, threading.Lock()
    _pending.clear()


os.register_at_fork(after_in_child=_forget_behind)


def save_stream(st: Stream, path: Path) -> None:
    """Write ``st`` as the directory ``path`` (one ``.npy`` per array, ``meta.json``), under a
    temporary name renamed into place; beyond ``MAX_STREAMS`` the oldest streams go."""
    try:
        old = sorted((p for p in path.parent.glob("stream-*") if p != path),
                     key=lambda p: p.stat().st_mtime_ns)
    except OSError:
        return  # a read-only trace directory
    for p in old[:max(len(old) - MAX_STREAMS + 1, 0)]:
        shutil.rmtree(p, ignore_errors=True)
    arrays, none = {}, []
    # without CPU samples the two burst arrays are one (``replay.layout.lay_out`` returns it
    # twice, as two array objects over the same memory)
    shared = (st.burst_cpu.shape == st.burst.shape
              and st.burst_cpu.ctypes.data == st.burst.ctypes.data)
    for f in dataclasses.fields(Stream):
        v = getattr(st, f.name)
        if f.name == "meetings":
            if v is not None:
                arrays.update({"mt_" + g.name: getattr(v, g.name)
                               for g in dataclasses.fields(Meetings)})
        elif isinstance(v, np.ndarray) and not (f.name == "burst_cpu" and shared):
            arrays[f.name] = v
        elif v is None:
            none.append(f.name)
    # A writer per core, though the replay's kernel runs beside them: right after an import,
    # when new page-cache pages are dear, one writer kept the first replay waiting at its end
    # (ring, 5 M operations: 0.61-0.79 s against 0.54-0.65 s with two)
    write_dir(path, arrays, dict(version=CACHE_VERSION, arrays=sorted(arrays), none=none,
                                  algorithms=st.algorithms, selected=st.selected,
                                  burst_cpu_shared=shared))


def load_stream(path: Path) -> Stream:
    """The stream ``save_stream`` wrote at ``path``, its arrays memory-mapped copy-on-write (as
    ``load``'s). Raises on a missing, damaged or other version's stream."""
    meta = json.loads((path / "meta.json").read_text())
    if meta.get("version") != CACHE_VERSION:
        raise ValueError("old cache")
    z = {name: np.load(path / f"{name}.npy", mmap_mode="c") for name in meta["arrays"]}
    kw: dict[str, Any] = {k: v for k, v in z.items() if not k.startswith("mt_")}
    kw.update({name: None for name in meta["none"]})
    if meta["burst_cpu_shared"]:
        kw["burst_cpu"] = kw["burst"]
    if "mt_ops" in z:
        kw["meetings"] = Meetings(**{f.name: z["mt_" + f.name]
                                     for f in dataclasses.fields(Meetings)})
    return Stream(algorithms=meta["algorithms"], selected=meta["selected"], **kw)
