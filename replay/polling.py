"""Rule ``poll_wait``'s side of the stream: which message each run of unsuccessful polls (a
``Poll`` row, format 1.3) waited for, and the loop's period.

A program that polls (``while not comm.Iprobe(...): work()``, ``while not req.Test(): ...``)
spends the loop waiting, though the trace shows it as a ``Poll`` row and the work between its
polls. The run ends with the call that succeeds, the rank's next MPI row; what it waited for:

* a ``Test``/``Testany``/``Testsome``/``Testall`` whose (first) row completes a receive
  request: that receive's message;
* an ``Iprobe`` (or ``Improbe``) whose message the rank's next MPI row receives (a ``Recv``, the
  ``Probe`` row of a pickle-API ``recv``, an ``Irecv`` post) from the probed source with the
  probed tag on the probed communicator: that message.

Otherwise (the run ends with another call, a send's completion, a probe whose message the next
row does not take, a window boundary of the recorder, the end of the rank) the run has no
message and replays as measured: its time stays the rank's own, as compute.

The period is the measured loop iteration, p = (t_start of the successful call − t_start of
the run) / polls: the run's polls and the one that succeeded are ``polls`` iterations apart
(the run's own duration over its count would leave out the work after its last failed poll).
The kernel's side is ``replay.rules.poll_exit``.
"""

from __future__ import annotations

import numpy as np

from hindsight import trace as tf
from hindsight.jit import njit
from replay import kernel as K

POLL_CODE = tf.OP_CODE["Poll"]
IPROBE_CODE = tf.OP_CODE["Iprobe"]


@njit(cache=True)
def poll_runs(op, rank, kind, row_msg, peer, tag, comm, t_start, nbytes, m_src, poll_code,
              iprobe_code):
    """Per ``Poll`` row (in row order): (its row, the row of the call that ended it (-1: none),
    the message it waited for (-1: none), the loop period in ns). See the module docstring."""
    n = len(op)
    cnt = 0
    for i in range(n):
        if op[i] == poll_code:
            cnt += 1
    rows = np.empty(cnt, np.int64)
    ends = np.full(cnt, -1, np.int64)
    msgs = np.full(cnt, -1, np.int64)
    period = np.zeros(cnt)
    c = 0
    for i in range(n):
        if op[i] != poll_code:
            continue
        rows[c] = i
        x = _next_mpi_row(op, rank, i)
        if x >= 0 and op[x] != poll_code:
            ends[c] = x
            if nbytes[i] > 0:
                period[c] = (t_start[x] - t_start[i]) / nbytes[i]
            if kind[x] == K.WRECV and row_msg[x] >= 0:
                msgs[c] = row_msg[x]
            elif op[x] == iprobe_code:
                y = _next_mpi_row(op, rank, x)
                if y >= 0 and row_msg[y] >= 0 and comm[y] == comm[x] and \
                        (kind[y] == K.RECV or kind[y] == K.PROBE or kind[y] == K.IRECV):
                    m = row_msg[y]
                    if m_src[m] == peer[x] and (tag[y] == tag[x] or
                                                (kind[y] == K.IRECV and tag[y] == tf.ANY_TAG)):
                        msgs[c] = m
        c += 1
    return rows, ends, msgs, period


@njit(inline="always")
def _next_mpi_row(op, rank, i):
    """The rank's next MPI row after row i (region rows skipped); -1: none."""
    j = i + 1
    while j < len(op) and rank[j] == rank[i]:
        if op[j] > 0:
            return j
        j += 1
    return -1


def apply_to_stream(kind: np.ndarray, msg: np.ndarray, burst: np.ndarray,
                    burst_cpu: np.ndarray, first: np.ndarray, rows) -> np.ndarray:
    """The network form of the poll runs of ``rows`` (``replay.rows.Rows``; ``poll_runs``
    found them), written into the stream's
    arrays (``first``: each row's first operation): a run with a message becomes a POLL of it
    and the successful call's burst (the work after the last failed poll) goes, the loop being
    waiting; a run without one keeps its time as compute (added to its burst, a NOP of its own
    taking none on a network). Returns the per-operation ``loc`` of the network form: a POLL's
    period (ns), 0 elsewhere (empty when no run has a message)."""
    t_start, t_end, ratio = rows.t_start, rows.t_end, rows.ratio
    rows, ends, msgs, period = rows.poll_row, rows.poll_end, rows.poll_msg, rows.poll_period
    ops = first[rows]
    has = msgs >= 0
    loc = np.zeros(len(kind) if has.any() else 0)
    kind[ops[has]] = K.POLL
    msg[ops[has]] = msgs[has]
    loc[ops[has]] = period[has]
    done = first[ends[has]]
    burst[done] = 0.0
    burst_cpu[done] = 0.0
    own = ops[~has]
    d = (t_end[rows[~has]] - t_start[rows[~has]]).astype(np.float64)
    # (burst_cpu may be burst itself, or a view of it: both read before either is written)
    b, bc = burst[own] + d, burst_cpu[own] + d * ratio[rows[~has]]
    burst[own] = b
    burst_cpu[own] = bc
    return loc
