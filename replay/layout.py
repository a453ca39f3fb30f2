"""The kernel's operations laid out from a prepared trace's rows (``replay.stream`` fills in the
collectives' patterns and the messages afterwards).

Per row its operations: one per MPI row, two for a ``Sendrecv_recv`` whose send half (the row
before) has a message, since that send completes there (NOP, then WSEND, where the receive half
has none), and ``per_row[i]`` for an expanded collective. Each carries the row's region; the
first one also its burst, kind and message (unless it is a collective's), the others are NOPs
but for a Sendrecv's (below).

Rule *sendrecv_posts_receive_first*: where both halves of a ``Sendrecv`` have a message, the
send half's row is two operations too, IRECV of the receive's message then ISEND, and the
receive half's WRECV then WSEND: MPICH's ``MPI_Sendrecv`` posts its receive (``MPID_Irecv``)
before its send (``MPID_Isend``) and waits for both, so a partner's message that arrives while
the send is being handed over finds its receive posted (not queued as unexpected).

Two passes: ``_offsets`` counts the operations of each row, ``_fill`` writes them. The second
runs ``PART_ROWS`` rows at a time, and the pages of the rows' arrays that part read go back
(``page_out_part``) before the next: for a trace mapped from its cache, the rows' pages would
otherwise all be resident at the end, beside the operations written (some 150 MB at 8 M rows,
the first replay's peak).
"""

from __future__ import annotations

import numpy as np

from hindsight.jit import njit
from hindsight.system import page_out, page_out_part
from replay import kernel as K
from replay.rows import KIND_TABLES, Rows

PART_ROWS = 1 << 20


def lay_out(rows: Rows, per_row: np.ndarray, nranks: int, cpu_shared: bool,
            msg_proto: np.ndarray, row_proto: np.ndarray) -> tuple[np.ndarray, ...]:
    """The operation arrays of ``rows``: (off, kind, msg, op_row, burst, burst_cpu, reg,
    rank_off). ``off[i]`` is row i's first operation; ``per_row`` (empty: none expanded) the
    operations of each expanded collective row; ``burst_cpu`` is ``burst`` itself when
    ``cpu_shared`` (no CPU ratios below 1). ``msg`` and ``op_row`` take the integer types of
    the empty ``msg_proto`` and ``row_proto``; rows of unmatched messages stay NOP."""
    n = len(rows.op)
    off, rank_off = _offsets(rows.op, rows.msg, per_row, rows.rank, nranks,
                             KIND_TABLES.sendrecv_send, KIND_TABLES.sendrecv_recv)
    page_out(rows.rank)                 # (the fill reads no rank)
    nops = int(off[n])
    # Every position belongs to one row and is written once (no zero-filling first: that was
    # a third of the pass's memory traffic).
    kind = np.empty(nops, np.int8)
    msg = np.empty(nops, msg_proto.dtype)
    op_row = np.empty(nops, row_proto.dtype)
    reg = np.empty(nops, np.int16)
    burst = np.empty(nops)
    burst_cpu = burst if cpu_shared else np.empty(nops)
    read = (rows.kind, rows.msg, rows.burst, rows.ratio, rows.region)
    for lo in range(0, n, PART_ROWS):
        hi = min(lo + PART_ROWS, n)
        _fill(lo, hi, off, rows.op, rows.kind, rows.msg, rows.burst, rows.ratio, rows.region,
              cpu_shared, KIND_TABLES.sendrecv_send, KIND_TABLES.sendrecv_recv, kind, msg,
              op_row, reg, burst, burst_cpu)
        page_out_part(lo, hi, *read)
    page_out(*read)                     # (the parts' edges)
    return off, kind, msg, op_row, burst, burst_cpu, reg, rank_off


@njit(cache=True)
def _offsets(op, msg_row, per_row, rank, nranks, sr_send, sr_recv):
    """(off, rank_off): each row's first operation (and the total at ``off[n]``), each rank's
    first operation."""
    n = len(op)
    expanded = len(per_row) > 0
    off = np.empty(n + 1, np.int64)
    rank_off = np.zeros(nranks + 1, np.int64)
    # Running totals in locals: reading back the array entry written one row before made
    # every row wait for that store (rows come rank by rank, so a rank's count is one local).
    tot = 0
    r = -1
    start_r = 0
    for i in range(n):
        c = 0
        if op[i] > 0:  # an MPI row (0 = region row, -1 = an op this version does not know)
            c = 1
            # (inline: a jitted helper taking the arrays cost 15 ns a row in reference counts)
            if op[i] == sr_recv and i > 0 and op[i - 1] == sr_send and rank[i - 1] == rank[i] \
                    and msg_row[i - 1] >= 0:
                c = 2
            # rule sendrecv_posts_receive_first: the send half posts the receive as well
            if op[i] == sr_send and i + 1 < n and op[i + 1] == sr_recv and \
                    rank[i + 1] == rank[i] and msg_row[i] >= 0 and msg_row[i + 1] >= 0:
                c = 2
            if expanded and per_row[i] > 0:
                c = per_row[i]
        if rank[i] != r:
            if r >= 0:
                rank_off[r + 1] += tot - start_r
            r = rank[i]
            start_r = tot
        off[i] = tot
        tot += c
    off[n] = tot
    if r >= 0:
        rank_off[r + 1] += tot - start_r
    for q in range(nranks):
        rank_off[q + 1] += rank_off[q]
    return off, rank_off


@njit(cache=True)
def _fill(lo, hi, off, op, kind_row, msg_row, burst_row, ratio, region, cpu_shared, sr_send,
          sr_recv, kind, msg, op_row, reg, burst, burst_cpu):
    """The operations of rows lo..hi into their places (``off``)."""
    for i in range(lo, hi):
        a = off[i]
        b = off[i + 1]
        if a == b:
            continue
        g = region[i]
        k = K.NOP
        m = -1
        if kind_row[i] != K.COLL and msg_row[i] >= 0:
            k = kind_row[i]
            m = msg_row[i]
        kind[a] = k
        msg[a] = m
        op_row[a] = i
        reg[a] = g
        burst[a] = burst_row[i]
        if not cpu_shared:
            burst_cpu[a] = burst_row[i] * ratio[i]
        for p in range(a + 1, b):  # the further operations of the row
            op_row[p] = i
            reg[p] = g
            kind[p] = K.NOP
            msg[p] = -1
            burst[p] = 0.0
            burst_cpu[p] = 0.0
        if b - a == 2 and op[i] == sr_send:
            # rule sendrecv_posts_receive_first: its receive (the next row's message), then
            # its send
            kind[a] = K.IRECV
            msg[a] = msg_row[i + 1]
            kind[a + 1] = K.ISEND
            msg[a + 1] = m
        elif b - a == 2 and op[i] == sr_recv:   # its send half completes here
            if off[i] - off[i - 1] == 2:        # (its receive was posted with the send)
                kind[a] = K.WRECV
            kind[a + 1] = K.WSEND
            msg[a + 1] = msg_row[i - 1]
