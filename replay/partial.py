"""The last consistent cut of an incomplete trace, for `replay --allow-partial`.

A rank that died (SIGKILL, a crash, mpiexec killing the job) leaves its events up to its last
flushed row group, and the other ranks' files stop wherever they were when the job ended. Replaying
all of that deadlocks or invents waits: a surviving rank's receive whose send was never recorded,
a collective that some members never reached. The cut keeps, for every rank, a prefix of its events
(program order) such that what is kept could have happened on its own:

1. Time frontier: nothing is known about what a dead rank did after its last recorded event, so
   every event that starts after the earliest such end (over the incomplete ranks) is dropped.
2. Closure, repeated until nothing changes: a rank is cut at (before) the first kept row that
   * receives a message whose send is not kept, or sends a message whose receive is not kept
     (messages in flight at the cut are dropped with their sender's later events, so every kept
     message is complete and the replay has no unmatched rows to guess about);
   * posts a non-blocking request whose completion (or free) is not kept;
   * takes part in a collective (or communicator creation) that some member did not reach.
   A cut never splits the rows of one call (a Sendrecv pair, the rows of one Waitall).

The result is an ordinary table: `replay.prepare` runs on it unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from hindsight import trace as tf
from replay.errors import ReplayError
from replay.matching import match_messages
from replay.prepare import Prepared, prepare

_SR_SEND = tf.OP_CODE["Sendrecv_send"]
_SR_RECV = tf.OP_CODE["Sendrecv_recv"]
_COMPLETION_CODES = frozenset(tf.OP_CODE[x] for x in tf.COMPLETION_OPS)


@dataclass
class Cut:
    """What the cut kept: rows per rank (before and after) and the time frontier."""

    incomplete_ranks: list[int]
    frontier_ns: int | None              # end of the earliest-ending incomplete rank (None: none)
    rows_before: list[int]
    rows_kept: list[int]
    rounds: int = 0
    reasons: list[str] = field(default_factory=list)

    @property
    def dropped(self) -> int:
        return sum(self.rows_before) - sum(self.rows_kept)

    def describe(self, trace_dir: str | Path) -> str:
        """One line for stderr: the user must know the replay is of a cut, not of the run."""
        front = (f"t = {self.frontier_ns / 1e9:.6f} s" if self.frontier_ns is not None
                 else "no time frontier")
        return (f"note: {trace_dir} is incomplete ({_whose(self.incomplete_ranks)} not "
                f"whole); replaying its last "
                f"consistent cut ({front}): "
                f"{sum(self.rows_kept)} of {sum(self.rows_before)} events kept, "
                f"{self.dropped} dropped")

    def summary(self) -> dict:
        return {"incomplete_ranks": self.incomplete_ranks, "frontier_ns": self.frontier_ns,
                "events_before": sum(self.rows_before), "events_kept": sum(self.rows_kept),
                "kept_per_rank": self.rows_kept, "closure_rounds": self.rounds}


def _rank_ranges(ranks: list[int]) -> str:
    return tf.rank_ranges(ranks) if ranks else "none"


def _whose(ranks: list[int]) -> str:
    """"rank 1's records are", "the records of ranks 1-3 are"."""
    if len(ranks) == 1:
        return f"rank {ranks[0]}'s records are"
    return f"the records of ranks {_rank_ranges(ranks)} are"


def consistent_cut(cols: dict[str, np.ndarray], nranks: int, incomplete: list[int],
                   communicators: dict[str, list[int]] | None = None) -> tuple[np.ndarray, Cut]:
    """Row indices (into ``cols``, which must be in (rank, seq) order) of the consistent cut."""
    rank = np.asarray(cols["rank"])
    op = np.asarray(cols["op"])
    t0, t1 = np.asarray(cols["t_start"]), np.asarray(cols["t_end"])
    n = len(rank)
    if n > 1 and not (np.all(np.diff(rank) >= 0)):
        raise ValueError("consistent_cut needs rows in (rank, seq) order")
    start = np.searchsorted(rank, np.arange(nranks), "left")      # first row of each rank
    count = np.searchsorted(rank, np.arange(nranks), "right") - start
    keep = count.copy()                                            # prefix length per rank

    # 1. Time frontier.
    frontier = None
    ends = [int(t1[start[r]:start[r] + count[r]].max()) if count[r] else None for r in incomplete]
    if incomplete:
        # A rank with no data at all tells nothing: the frontier is then the trace's start.
        frontier = min((e for e in ends if e is not None), default=None)
        if any(e is None for e in ends):
            frontier = int(t0.min()) - 1 if n else 0
    if frontier is not None:
        for r in range(nranks):
            seg = t0[start[r]:start[r] + count[r]]
            late = np.flatnonzero(seg > frontier)
            if len(late):
                keep[r] = min(keep[r], _call_start(rank, op, t0, t1, start[r], int(late[0])))

    members = {int(k): [int(x) for x in v] for k, v in (communicators or {}).items()
               if isinstance(v, list)}
    rounds = 0
    while True:
        rounds += 1
        idx = _kept_rows(start, keep)
        sub = {c: np.asarray(cols[c])[idx] for c in ("rank", "seq", "op", "peer", "tag", "comm",
                                                      "nbytes", "request")}
        cut_at = _violations(sub, nranks, members)       # (rank, local row in sub) pairs
        changed = False
        for r, row in cut_at:
            local = int(idx[row] - start[r])
            k = _call_start(rank, op, t0, t1, start[r], local)
            if k < keep[r]:
                keep[r] = k
                changed = True
        if not changed:
            break
    idx = _kept_rows(start, keep)
    return idx, Cut(sorted(incomplete), frontier, count.tolist(), keep.tolist(), rounds)


def _kept_rows(start: np.ndarray, keep: np.ndarray) -> np.ndarray:
    if not len(keep) or keep.sum() == 0:
        return np.zeros(0, np.int64)
    return np.concatenate([np.arange(s, s + k, dtype=np.int64) for s, k in zip(start, keep)])


def _call_start(rank, op, t0, t1, first: int, local: int) -> int:
    """Move a cut back to the first row of the call that row ``first + local`` belongs to."""
    i = first + local
    while local > 0:
        j = i - 1
        same_times = rank[j] == rank[i] and t0[j] == t0[i] and t1[j] == t1[i]
        sendrecv = op[i] == _SR_RECV and op[j] == _SR_SEND
        multi_completion = op[i] == op[j] and op[i] in _COMPLETION_CODES   # one Waitall's rows
        if not (same_times and (sendrecv or multi_completion)):
            break
        i, local = j, local - 1
    return local


def _violations(sub: dict[str, np.ndarray], nranks: int,
                members: dict[int, list[int]]) -> list[tuple[int, int]]:
    """Rows of ``sub`` at which their rank must be cut (the earliest per rank is enough)."""
    rank, op = sub["rank"], sub["op"]
    bad: dict[int, int] = {}

    def mark(rows) -> None:
        for row in np.asarray(rows, np.int64).tolist():
            r = int(rank[row])
            if row < bad.get(r, 1 << 62):
                bad[r] = row

    if not len(rank):
        return []
    match, _ = match_messages(sub)
    mark(match.unmatched_send_rows)
    mark(match.unmatched_recv_rows)
    # Requests whose completion (or free: a freed request is ended) was cut, or never
    # happened: cut at the post.
    posted = tf.NONBLOCKING_SEND_OPS | tf.NONBLOCKING_COLLECTIVE_OPS | {"Irecv"}
    post = np.flatnonzero(tf.op_mask(op, posted) & (sub["request"] >= 0))
    done = np.zeros(len(rank), bool)
    done[match.completion_post_row] = True
    done[match.free_post_row] = True
    mark(post[~done[post]])
    # Collectives: the k-th collective of each rank on a communicator is instance k.
    coll = np.flatnonzero(tf.op_mask(op, tf.COLLECTIVE_OPS | tf.COMM_OPS)
                          & (sub["comm"] != tf.COMM_SELF_ID))
    seen: dict[tuple[int, int], list[int]] = {}
    occ: dict[tuple[int, int], int] = {}
    for row in coll.tolist():
        key = (int(rank[row]), int(sub["comm"][row]))
        k = occ.get(key, 0)
        occ[key] = k + 1
        seen.setdefault((key[1], k), []).append(row)
    for (c, _k), rows in seen.items():
        want = members.get(c)
        if want is None:  # not in the manifest: the ranks that used it anywhere
            want = sorted({int(rank[r]) for r in coll.tolist() if sub["comm"][r] == c})
            members[c] = want
        if len(rows) < len(set(want)):
            mark(rows)
    return sorted(bad.items())


def cut_table(table: pa.Table, manifest: dict, incomplete: list[int]) -> tuple[pa.Table, Cut]:
    """The consistent cut of a trace table (rows in (rank, seq) order, as `read_trace` gives)."""
    cols, _ = tf.table_columns(table)
    order = np.lexsort((cols["seq"], cols["rank"]))
    if not np.array_equal(order, np.arange(len(order))):
        table = table.take(pa.array(order))
        cols = {k: v[order] for k, v in cols.items()}
    nranks = int(manifest.get("ranks") or (int(cols["rank"].max()) + 1 if len(order) else 0))
    idx, cut = consistent_cut(cols, nranks, incomplete, manifest.get("communicators") or {})
    return table.take(pa.array(idx)), cut


def prepare_partial(trace_dir: str | Path) -> tuple[Prepared, Cut | None]:
    """`replay.prepare` of a trace, cut to its last consistent state if it is incomplete.

    Returns (Prepared, Cut or None for a complete trace). Raises TraceError / ReplayError (also
    when the cut is empty: nothing of the trace can be replayed)."""
    # Footers and manifest only: a complete trace goes straight to prepare (and its cache).
    manifest = tf.read_manifest(trace_dir)
    sources = tf.rank_sources(trace_dir, manifest)
    if all(s.complete for s in sources) and manifest.get("complete"):
        return prepare(trace_dir, allow_partial=True), None
    trace = tf.read_trace(trace_dir)
    table, cut = cut_table(trace.table, trace.manifest, trace.incomplete_ranks)
    if not sum(cut.rows_kept):
        # a replay of no events would predict 0 ns, which reads as a result
        raise ReplayError(f"{trace_dir}: the consistent cut is empty (nothing to replay): "
                          f"{_whose(cut.incomplete_ranks)} not "
                          f"whole, and all {sum(cut.rows_before)} recorded events depend on what "
                          "they did not record")
    manifest = dict(trace.manifest, partial_cut=cut.summary())
    cut_trace = tf.Trace(trace.path, manifest, table, trace.sources)
    return prepare(cut_trace, allow_partial=True, use_cache=False), cut
