"""Preparation: trace directory -> the arrays replay runs on (plain Python, NumPy, pyarrow).

``prepare(trace_dir)`` reads the trace, matches messages (``replay.matching``), computes each
row's kind, message and compute burst (``replay.rows``) and the collective instances
(``replay.instances``), and keeps them as row-level arrays: a ``Prepared``. The kernel's
operation stream is derived from them per form (``Prepared.stream``, ``replay.stream``).
The row-level form is cached next to the trace and reused while its files are unchanged
(``replay.cache``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from hindsight import trace as tf
from hindsight.system import gc_paused, page_out
from replay import cache
from replay import collectives as C
from replay import kernel as K
from replay.errors import ReplayError
from replay.flags import eligible
from replay.instances import Instances, collective_instances, complete_nonblocking
from replay.matching import MessageMatch, match_messages
from replay.models.base import ParamError
from replay.rma import fence_transfers
from replay.rma_epochs import EpochOps, epoch_ops
from replay.rows import Messages, Rows, trace_rows
from replay.numbering import number_by_send_time
from replay.stream import Stream, build_stream, epoch_messages

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass
class Prepared:
    """A trace ready to replay: row-level arrays plus lazily built kernel streams."""

    path: Path | None
    manifest: dict[str, Any]
    nranks: int
    rows: Rows
    region_names: list[str]
    trail: np.ndarray                    # per rank: time from its last MPI row to its end, ns
    t0: int                              # the trace's first event, ns
    msgs: Messages                       # the point-to-point messages
    coll: Instances                      # the collective instances
    comm_members: dict[int, list[int]]   # world ranks of each communicator, local rank order
    host_of_rank: np.ndarray             # host_placement
    problems: list[str] = field(default_factory=list)
    #: what the replay of this trace leaves out, said to the user (``hindsight replay``)
    notes: list[str] = field(default_factory=list)
    #: the operations of one-sided lock and PSCW epochs (``replay.rma_epochs``)
    rma: EpochOps = field(default_factory=EpochOps.empty)
    _streams: dict[tuple, Stream] = field(default_factory=dict, repr=False)
    table: pa.Table | None = field(default=None, repr=False)
    #: (measured makespan, each rank's measured end), ns from t0, once computed; the cache
    #: keeps them, as reading the rows' t_end would map that whole column into memory
    measured: tuple[float, np.ndarray] | None = field(default=None, repr=False)
    #: the directory of its cached form (``replay.cache``), where its streams are kept too
    cache_dir: Path | None = field(default=None, repr=False)

    @property
    def nrows(self) -> int:
        return len(self.rows.rank)

    @property
    def measured_makespan_ns(self) -> float:
        return self._measured()[0]

    @property
    def measured_rank_end_ns(self) -> np.ndarray:
        return self._measured()[1].copy()

    def _measured(self) -> tuple[float, np.ndarray]:
        if self.measured is None:
            ends = np.zeros(self.nranks)
            # rows come in rank order: each rank's latest end is the maximum of its slice
            off = tf.rank_offsets(self.rows.rank, self.nranks)
            for r in np.flatnonzero(np.diff(off)).tolist():
                ends[r] = max(ends[r], float(self.rows.t_end[off[r]:off[r + 1]].max() - self.t0))
            makespan = (float(self.rows.t_end.max() - self.t0) if self.nrows else
                        float(self.manifest.get("makespan_ns") or 0))
            self.measured = (makespan, ends)
        return self.measured

    def algorithms(self, algorithms: Mapping[str, str] | None = None) -> dict[str, str]:
        """The collective algorithms a replay runs: the defaults, then the manifest's, then
        ``algorithms`` (``--algo``)."""
        algos = dict(C.DEFAULT_ALGORITHMS)
        algos.update(self.manifest.get("collective_algorithms") or {})
        algos.update(algorithms or {})
        return algos

    def stream(self, expand: bool, algorithms: dict[str, str] | None = None,
               shared_flags: frozenset[tuple[str, int]] = frozenset()) -> Stream:
        """The kernel's operations, collectives expanded into the point-to-point patterns of
        their algorithms (defaults, then the manifest's, then ``algorithms``) or not; built
        once per form. Expanded, the instances of the collectives ``shared_flags`` ((name, the
        probe's largest size), ``FlagCosts.limits``) that rule shared_flag_meeting prices
        (``replay.flags.eligible``) are meetings instead."""
        algos = self.algorithms(algorithms)
        for op in algorithms or {}:
            if op not in C.ALGORITHMS:
                # a misspelled collective would otherwise leave its default silently in place
                raise ParamError(f"--algo {op}={algorithms[op]}: {op} is not a collective with "
                                 f"algorithms (choose from {', '.join(sorted(C.ALGORITHMS))})")
        for op, a in algos.items():
            if op in C.ALGORITHMS and a not in C.ALGORITHMS[op]:
                choices = ", ".join(C.ALGORITHMS[op])
                if (algorithms or {}).get(op) == a:
                    # the user's choice (--algo), not the trace's: a usage error
                    raise ParamError(f"--algo {op}={a}: not a known algorithm of {op} (choose "
                                     f"from {choices})")
                raise ReplayError(f"collective algorithm {op}={a} is not known (choose from "
                                  f"{choices})")
        flags = tuple(sorted(shared_flags)) if expand else ()
        # the rule's instances depend on the placement, which a copy of this Prepared may
        # change (validate's cross-network cells: dataclasses.replace shares _streams)
        key = (expand, tuple(sorted(algos.items())) if expand else (), flags,
               np.asarray(self.host_of_rank).tobytes() if flags else b"")
        if key not in self._streams:
            kept = cache.stream_path(self.cache_dir, key) if self.cache_dir else None
            st = None
            if kept is not None and kept.is_dir():
                try:
                    st = cache.load_stream(kept)
                except Exception:  # a stale or damaged stream is rebuilt, never trusted
                    pass
            if st is None:
                st = self._build_stream(expand, algos, flags)
                if kept is not None:
                    cache.save_stream_behind(st, kept)
            self._streams[key] = st
        return self._streams[key]

    def _build_stream(self, expand: bool, algos: dict[str, str], flags: tuple) -> Stream:
        flagged = None
        if flags:
            flagged = eligible(self.coll, self.comm_members, self.host_of_rank, algos,
                               dict(flags), self.rows.nbytes)
        st = build_stream(self.rows, self.msgs, self.coll, self.comm_members, self.nranks,
                          expand, algos, self.manifest.get("neighbours"), self.rma, flagged)
        # a cached trace's rows are mapped from its cache: the pages the build read would
        # stay resident beside the stream (about 25 bytes a row), unused by the replay
        page_out(*(getattr(t, f.name) for t in (self.rows, self.msgs, self.coll)
                   for f in fields(t)))
        # (once the build's pages are out: the rows' start times are 8 bytes a row more)
        number_by_send_time(st, self.rows.t_start, len(self.msgs.bytes),
                            epoch_messages(expand, self.rma))
        page_out(self.rows.t_start)
        return st

    def default_tcomp(self) -> float:
        """Mean compute time per message: total burst time / number of messages."""
        s = self.stream(True)
        return float((s.burst.sum() + self.trail.sum()) / max(s.nmsg, 1))


def prepare(trace: str | Path | tf.Trace, *, allow_partial: bool = False,
            use_cache: bool = True, keep_table: bool = False) -> Prepared:
    """Load and prepare a trace. Raises ``TraceError`` (unreadable) or ``ReplayError``.

    With ``allow_partial`` an incomplete trace is accepted: messages whose partner is missing
    become no-ops (their problems are kept in ``Prepared.problems``).
    """
    if isinstance(trace, (str, os.PathLike)):
        trace_dir = Path(trace)
        tr = None
    else:   # a tf.Trace (not named here: that would load pyarrow for a replay from the cache)
        tr = trace
        trace_dir = Path(tr.path)
    cache_file = None
    if use_cache and tr is None and (trace_dir / tf.MANIFEST_NAME).is_file():
        cache_file = cache.cache_path(trace_dir)
        if cache_file is not None and cache_file.is_dir() and not keep_table:
            try:
                return _from_cache(cache_file, trace_dir, allow_partial)
            except ReplayError:
                raise
            except Exception:  # a stale or truncated cache is rebuilt, never trusted
                pass
    if tr is None and keep_table:
        tr = tf.read_trace(trace_dir)
    if tr is not None:
        arrays, region_names = tf.table_columns(tr.table)
        cols = tf.Columns(trace_dir, tr.manifest, arrays, region_names, tr.sources)
    else:
        cols = tf.read_columns(trace_dir)
    if not cols.complete and not allow_partial:
        _refuse_concurrent(trace_dir, cols.manifest)
        raise ReplayError(f"{trace_dir}: incomplete trace ({tf.incomplete_text(cols.sources)}); "
                          "use --allow-partial to replay what was recorded")
    prep = _prepare_columns(cols, allow_partial or not cols.complete)
    if keep_table:
        prep.table = tr.table
    if cache_file is not None:
        cache.save(prep, cache_file)
        prep.cache_dir = cache_file if cache_file.is_dir() else None
    return prep


def cache_prepared(cols: tf.Columns, matched: tuple[MessageMatch, list[str]],
                   own: bool = False, staged: cache.DirWriter | None = None) -> None:
    """Prepare the complete trace read as ``cols`` and cache the result beside it, where
    ``prepare`` looks for it (keyed as it keys it). ``matched``: ``match_messages``' answer on
    ``cols`` in their order, made already (``hindsight.check.check_and_prepare``); ``own``:
    ``cols``' arrays are handed over (``prepare_rows``); ``staged``: ``stage_prepared(cols)``,
    whose writing this finishes."""
    path = cache.cache_path(Path(cols.path))
    if path is None:
        if staged is not None:
            staged.abandon()
        return
    cache.save(_prepare_columns(cols, False, matched=matched, own=own), path, staged)


#: The trace columns a prepared form's rows keep as they were read (``trace_rows``: each the
#: ``Rows`` field of the same name): what ``stage_prepared`` can write before the rows are made.
KEPT_AS_READ = ("rank", "seq", "op", "t_start", "t_end", "nbytes")


def stage_prepared(cols: tf.Columns) -> cache.DirWriter | None:
    """Begin the cache of the prepared form of the trace read as ``cols``, which
    ``cache_prepared`` finishes: the columns it keeps as read (``KEPT_AS_READ``, 40 bytes a
    row) are written at once, one after the other, while the caller goes on (an import's check
    matches the messages meanwhile, on the other core: ``hindsight.check.check_and_prepare``).
    None where nothing can be cached (a read-only directory, rows out of order)."""
    path = cache.cache_path(Path(cols.path))
    a = cols.arrays
    if path is None or not all(c in a for c in KEPT_AS_READ) or not (
            tf.in_rank_seq_order(a["rank"], a["seq"])):
        return None
    staged = cache.stage(path)
    if staged is not None:
        try:
            staged.add_in_turn({cache.PREFIX["rows"] + c: a[c] for c in KEPT_AS_READ})
        except BaseException:           # (a Ctrl-C while it writes here, on one core)
            staged.abandon()
            raise
    return staged


def stage_messages(staged: cache.DirWriter, match: MessageMatch) -> None:
    """Add the matched messages (``match_messages``' answer on the staged columns) to
    ``stage_prepared``'s writer, as the prepared form keeps them (``Messages.of``)."""
    msgs = Messages.of(match)
    staged.add_in_turn({cache.PREFIX["msgs"] + f.name: getattr(msgs, f.name)
                        for f in fields(Messages)})


def _refuse_concurrent(trace_dir: Path, manifest: dict) -> None:
    """A trace whose rank called MPI from two threads at once holds that rank's calls up to
    the first overlap only: say so (a ReplayError) instead of replaying it as a whole run."""
    text = tf.concurrent_text(manifest)
    if text:
        raise ReplayError(f"{trace_dir}: {text}; its recording stopped there, so the trace is "
                          "incomplete: use --allow-partial to replay what was recorded before")


def _from_cache(path: Path, trace_dir: Path, allow_partial: bool) -> Prepared:
    manifest = tf.read_manifest(trace_dir)
    if not manifest.get("complete") and not allow_partial:
        _refuse_concurrent(trace_dir, manifest)
        raise ReplayError(f"{trace_dir}: incomplete trace; use --allow-partial to replay what "
                          "was recorded")
    return Prepared(path=trace_dir, manifest=manifest, cache_dir=path, **cache.load(path))


def host_placement(manifest: dict, nranks: int) -> np.ndarray:
    """The host of each rank in the network a run crossed (what M/M/1 places ranks by): a
    testbed run's nodes (the manifest's ``network.node_of_rank``: its ranks share one machine
    and one clock, but each node has its own link, docs/testbed.md), else the manifest's
    ``hosts`` (numbered in host-name order), else one host per rank."""
    nodes = (manifest.get("network") or {}).get("node_of_rank")
    if nodes is not None:
        return np.asarray(nodes, np.int64)
    host_of_rank = np.arange(nranks)
    hosts = manifest.get("hosts")
    if isinstance(hosts, dict) and hosts:
        for h, (name, rs) in enumerate(sorted(hosts.items())):
            for r in rs:
                if 0 <= int(r) < nranks:
                    host_of_rank[int(r)] = h
        _, host_of_rank = np.unique(host_of_rank, return_inverse=True)
    return host_of_rank.astype(np.int64)


@gc_paused()
def _prepare_columns(cols: tf.Columns, partial: bool, *, t0: int | None = None,
                     since: np.ndarray | None = None, last: bool | np.ndarray = True,
                     matched: tuple[MessageMatch, list[str]] | None = None,
                     own: bool = False) -> Prepared:
    """Prepare ``cols`` (a whole trace, or a segment of one: ``t0`` the whole trace's first
    event, ``since`` where each rank's first burst begins, ``last`` whether the segment ends the
    trace, or per rank whether it ends that rank: a trail only then; ``replay.segments``)."""
    return prepare_rows(cols, partial, t0=t0, since=since, last=last, matched=matched,
                        own=own)[0]


def prepare_rows(cols: tf.Columns, partial: bool, *, t0: int | None = None,
                 since: np.ndarray | None = None, last: bool | np.ndarray = True,
                 max_problems: int = 1000,
                 matched: tuple[MessageMatch, list[str]] | None = None,
                 own: bool = False) -> tuple[Prepared, MessageMatch]:
    """``_prepare_columns`` and the matching it made (whose unmatched rows and request pairs
    ``replay.segments`` cuts by); ``matched``: ``match_messages``' answer on ``cols`` in their
    order, when the caller made it (used if the rows are in (rank, seq) order already).
    ``own``: ``cols``' arrays are handed over (``cols.arrays`` is emptied), so that the columns
    the rows no longer need are freed once used (the CPU times, regions and tags: 14 bytes a
    row at the preparing's peak)."""
    # columns that only matching needs are dropped from this dict
    a = cols.arrays if own else dict(cols.arrays)
    if own:
        cols.arrays = {}
    manifest = cols.manifest
    rank, seq = a["rank"], a["seq"]
    n = len(rank)
    nranks = int(manifest.get("ranks", 0)) or (int(rank.max()) + 1 if n else 0)
    if not tf.in_rank_seq_order(rank, seq):
        order = np.lexsort((seq, rank))
        a = {k: v[order] for k, v in a.items()}
        matched = None

    match, problems = (matched if matched is not None else
                       match_messages(a, max_problems=max_problems, _in_order=True))
    peer, tag = a.pop("peer"), a.pop("tag")  # only matching, the probes and RMA need them
    a.pop("request", None)
    fatal = [p for p in problems if "bytes but" not in p]
    if fatal and not partial:
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        raise ReplayError("cannot replay, messages do not match: " + "; ".join(fatal[:5]) + more)

    if t0 is None:
        t0 = int(a["t_start"].min()) if n else 0
    rows, trail = trace_rows(a, peer, tag, cols.region_names, match, nranks, t0, since)
    # a rank's trail (its time after its last MPI row) belongs to the segment that ends it
    trail[~np.broadcast_to(np.asarray(last, bool), trail.shape)] = 0.0
    del tag
    a.pop("cpu_ns"), a.pop("region")    # (made into the rows' bursts and regions)
    comm_members = {int(k): list(v) for k, v in (manifest.get("communicators") or {}).items()
                    if v is not None}
    comm_members.setdefault(0, list(range(nranks)))
    coll = collective_instances(np.flatnonzero(rows.kind == K.COLL), rows.rank, rows.op,
                                a["comm"], a["root"], comm_members, problems, partial)
    rows.coll[coll.rows] = coll.of_rows()
    complete_nonblocking(coll, rows.op, match.completion_row, match.completion_post_row)
    ep = epoch_ops(rows.rank, rows.op, peer, a["comm"], rows.nbytes, rows.t_start)
    xf = fence_transfers(rows.rank, rows.op, peer, a["comm"], rows.nbytes, rows.coll,
                         ep.in_epoch)
    coll.xfer_inst, coll.xfer_src, coll.xfer_dst, coll.xfer_bytes = xf[:4]
    notes = []
    if xf.unmodelled + ep.unclosed:
        notes.append(f"{xf.unmodelled + ep.unclosed} one-sided operations in no closed epoch "
                     "(no fence, unlock, flush or complete closes them) replay as their calls: "
                     "their transfers are not modelled")
    if ep.unmatched:
        notes.append(f"{ep.unmatched} post/start/complete/wait calls of one-sided epochs have "
                     "no partner in the trace: they replay as their calls, without the "
                     "synchronisation")
    lone = int((rows.poll_msg < 0).sum())
    if lone:
        notes.append(f"{lone} of {len(rows.poll_msg)} runs of unsuccessful polls (Poll rows) do "
                     "not end with the call that found or completed their message: the network "
                     "models keep their time as the rank's own, as compute (rule poll_wait)")
    return Prepared(cols.path, manifest, nranks, rows, cols.region_names, trail, t0,
                    Messages.of(match), coll, comm_members, host_placement(manifest, nranks),
                    problems, notes, rma=ep.ops), match
