"""The compiled passes of message matching (``replay.matching``): flat arrays in, flat arrays
out, no Python object per row. Rule *request ends* (``_request_ends``) pairs each request's
post with the rows that end it; ``_ends_of_posts`` looks those ends up for sends and Irecvs,
``_irecv_messages`` reads an Irecv's message off its completion."""

from __future__ import annotations

import numpy as np

from hindsight.jit import njit


@njit(cache=True, nogil=True)
def _pair_channels(gid_s, gid_r, ngroups, idx_proto):
    """k-th send of each channel with the k-th receive of the same channel (non-overtaking).
    Receive positions are of the integer type of the empty ``idx_proto`` (int32 when they
    fit: these passes are bound by the bytes they move)."""
    ns = len(gid_s)
    nr = len(gid_r)
    cnt_s = np.zeros(ngroups, np.int64)
    cnt_r = np.zeros(ngroups, np.int64)
    for j in range(nr):
        cnt_r[gid_r[j]] += 1
    off = np.zeros(ngroups + 1, np.int64)
    for g in range(ngroups):
        off[g + 1] = off[g] + cnt_r[g]
    # receives grouped by channel, in posting order within one (a stable counting sort)
    pos = np.empty(nr, idx_proto.dtype)
    fill = off[:-1].copy()
    for j in range(nr):
        g = gid_r[j]
        pos[fill[g]] = j
        fill[g] += 1
    match_of_send = np.full(ns, -1, idx_proto.dtype)
    recv_matched = np.zeros(nr, np.bool_)
    for i in range(ns):
        g = gid_s[i]
        k = cnt_s[g]
        cnt_s[g] = k + 1
        if k < cnt_r[g]:
            j = pos[off[g] + k]
            match_of_send[i] = j
            recv_matched[j] = True
    return match_of_send, recv_matched


@njit(cache=True, nogil=True)
def _classify(op, peer, request, rank, tag, comm, nbytes, cls, row_proto):
    """The rows that take part in matching, in one pass over the columns (``cls``: the classes
    of ``_classes``; row numbers of the type of the empty ``row_proto``): row numbers of the
    request posts and completions (with a request id) and of the Irecvs; the sends (with a
    peer) with their source, destination, communicator, tag and op; the blocking receives
    (with a peer) with their source, tag, bytes, destination and communicator.

    Each output is allocated for every row and returned cut to what was written: pages never
    written are never touched, and one pass replaces a pass that marked and counted the rows
    and one pass per class (which read the columns again: 1.4x slower on a ring, 1.8x on a
    real trace of Sendrecv and Allreduce)."""
    n = len(op)
    last = len(cls) - 1
    rt = row_proto.dtype
    post = np.empty(n, rt)
    comp = np.empty(n, rt)
    irecv = np.empty(n, rt)
    s_row = np.empty(n, rt)
    s_src = np.empty(n, rank.dtype)
    s_dst = np.empty(n, peer.dtype)
    s_comm = np.empty(n, comm.dtype)
    s_tag = np.empty(n, tag.dtype)
    s_op = np.empty(n, op.dtype)
    r_row = np.empty(n, rt)
    r_src = np.empty(n, peer.dtype)
    r_tag = np.empty(n, tag.dtype)
    r_nb = np.empty(n, nbytes.dtype)
    r_dst = np.empty(n, rank.dtype)
    r_comm = np.empty(n, comm.dtype)
    npost = ncomp = nirecv = ns = nr = 0
    for i in range(n):
        o = op[i]
        c = cls[o if 0 <= o < last else last]
        if c == 0:
            continue
        if c & 3 and request[i] >= 0:
            if c & 1:
                post[npost] = i
                npost += 1
            if c & 2:
                comp[ncomp] = i
                ncomp += 1
        if c & 16:
            irecv[nirecv] = i
            nirecv += 1
        if c & 12 and peer[i] >= 0:
            if c & 4:
                s_row[ns] = i
                s_src[ns] = rank[i]
                s_dst[ns] = peer[i]
                s_comm[ns] = comm[i]
                s_tag[ns] = tag[i]
                s_op[ns] = o
                ns += 1
            if c & 8:
                r_row[nr] = i
                r_src[nr] = peer[i]
                r_tag[nr] = tag[i]
                r_nb[nr] = nbytes[i]
                r_dst[nr] = rank[i]
                r_comm[nr] = comm[i]
                nr += 1
    return (post[:npost], comp[:ncomp], irecv[:nirecv],
            (s_row[:ns], s_src[:ns], s_dst[:ns], s_comm[:ns], s_tag[:ns], s_op[:ns]),
            (r_row[:nr], r_src[:nr], r_tag[:nr], r_nb[:nr], r_dst[:nr], r_comm[:nr]))


@njit(cache=True, nogil=True)
def _direct_keys(src, dst, comm, tag, P, lo_c, nc, lo_t, nt, key_proto):
    """Mixed-radix channel keys (of the type of the empty ``key_proto``); an empty ``tag``
    leaves the tag out."""
    out = np.empty(len(src), key_proto.dtype)
    with_tag = len(tag) > 0
    for i in range(len(src)):
        k = (np.int64(src[i]) * P + dst[i]) * nc + (comm[i] - lo_c)
        out[i] = k * nt + (tag[i] - lo_t) if with_tag else k
    return out


@njit(cache=True, nogil=True)
def _matched(match_of_send, send_rows, recv_rows, s_src, s_dst, s_done, r_nb, r_done, nbytes):
    """The columns of the matched messages in send order, in one pass (they were eleven
    gathers): source, destination, bytes (the send's, else what the receive got), send row,
    its completion, receive row, its completion (rows of the types of ``send_rows`` and
    ``recv_rows``); and the positions where the receive got more bytes than the send sent."""
    m = 0
    for i in range(len(match_of_send)):
        if match_of_send[i] >= 0:
            m += 1
    src = np.empty(m, s_src.dtype)
    dst = np.empty(m, s_dst.dtype)
    nb_ = np.empty(m, np.int64)
    srow = np.empty(m, send_rows.dtype)
    sdone = np.empty(m, send_rows.dtype)
    rrow = np.empty(m, recv_rows.dtype)
    rdone = np.empty(m, recv_rows.dtype)
    too_big = np.zeros(m, np.bool_)
    k = 0
    for i in range(len(match_of_send)):
        j = match_of_send[i]
        if j < 0:
            continue
        s = send_rows[i]
        src[k] = s_src[i]
        dst[k] = s_dst[i]
        snb = nbytes[s]
        rnb = r_nb[j]
        nb_[k] = snb if snb >= 0 else max(rnb, 0)
        too_big[k] = snb >= 0 and rnb > snb
        srow[k] = s
        sdone[k] = s_done[i]
        rrow[k] = recv_rows[j]
        rdone[k] = r_done[j]
        k += 1
    return src, dst, nb_, srow, sdone, rrow, rdone, too_big


@njit(cache=True, nogil=True)
def _tags_agree(match_of_send, s_tag, r_tag):
    for i in range(len(match_of_send)):
        j = match_of_send[i]
        if j >= 0 and s_tag[i] != r_tag[j]:
            return False
    return True


@njit(cache=True, nogil=True)
def _request_spans(rank, request, rows_a, rows_b, nranks):
    """Each rank's lowest and highest request id among the rows ``rows_a`` and ``rows_b``:
    ``lo[r] > hi[r]`` for a rank with none."""
    lo = np.full(nranks, np.iinfo(np.int64).max, np.int64)
    hi = np.full(nranks, np.iinfo(np.int64).min, np.int64)
    for rows in (rows_a, rows_b):
        for i in rows:
            r, q = rank[i], request[i]
            lo[r] = min(lo[r], q)
            hi[r] = max(hi[r], q)
    return lo, hi


@njit(cache=True, nogil=True)
def _span_ids(rank, request, rows_a, rows_b, base, lo):
    """The requests of ``rows_a`` then ``rows_b`` numbered ``base[r] + request - lo[r]`` (r
    the row's rank: the ranks' spans of ``_request_spans`` laid end to end)."""
    out = np.empty(len(rows_a) + len(rows_b), np.int64)
    k = 0
    for rows in (rows_a, rows_b):
        for i in rows:
            r = rank[i]
            out[k] = base[r] + request[i] - lo[r]
            k += 1
    return out


@njit(cache=True, nogil=True)
def _ends_of_posts(post_rows, end_at_post, rows):
    """For each of ``rows``, ``end_at_post`` at its place among the sorted ``post_rows``, or
    -1 where it is not one of them (of ``end_at_post``'s type). Each search starts from the
    last one's place: rows in increasing order (row order, as matching gives them) make it a
    merge of the two lists, a step or two a row; forward it gallops (steps doubling, then
    bisection), backward it bisects, so rows in any order take logarithmic time each."""
    n = len(post_rows)
    out = np.full(len(rows), -1, end_at_post.dtype)
    at = 0
    for k in range(len(rows)):
        r = rows[k]
        lo, hi = at, at
        if at > 0 and post_rows[at - 1] >= r:
            lo, hi = 0, at                   # the place lies before: in [0, at]
        elif at < n and post_rows[at] < r:
            step = 1                         # after: gallop while post_rows[lo] < r
            while lo + step < n and post_rows[lo + step] < r:
                lo += step
                step *= 2
            lo, hi = lo + 1, min(lo + step, n)
        while lo < hi:                       # the first place whose row is >= r
            mid = (lo + hi) >> 1
            if post_rows[mid] < r:
                lo = mid + 1
            else:
                hi = mid
        at = lo
        if at < n and post_rows[at] == r:
            out[k] = end_at_post[at]
    return out


@njit(cache=True, nogil=True)
def _irecv_messages(irecv, idone, ifreed, peer, tag, nbytes):
    """Each Irecv's message as its completion row ``idone`` names it (wildcards resolved), or
    as the Irecv row itself names it where none completed it; ``ifreed``: a Request_free row
    ended it, and its byte count is unknown (-1). Returns (source, tag, bytes), in one pass
    over the Irecvs."""
    n = len(irecv)
    src = np.empty(n, peer.dtype)
    tg = np.empty(n, tag.dtype)
    nb_ = np.empty(n, nbytes.dtype)
    for k in range(n):
        d = idone[k]
        r = d if d >= 0 else irecv[k]
        src[k] = peer[r]
        tg[k] = tag[r]
        nb_[k] = -1 if d < 0 and ifreed[k] else nbytes[r]
    return src, tg, nb_


@njit(cache=True, nogil=True)
def _request_ends(pid, cid, post_rows, comp_rows, nreq):
    """Rule *request ends*: requests numbered (0..nreq-1) ``pid`` for the post rows and ``cid``
    for the rows that end them (completions, Request_free rows), all in row order. Per ending
    row: the post row of its request (-1: none, an orphan) and, where an earlier row ended the
    same request, that row (else -1: the first row that ends a request wins). Per post row: the
    row that ends its request (-1: none) and whether its request is posted more than once
    (the last of those posts is the one its ending rows pair with). Returns those arrays (row
    numbers of the rows' own type), then how many duplicate posts, orphans and later ends there
    are; one pass over each list of rows."""
    post_cnt = np.zeros(nreq, post_rows.dtype)
    post_of = np.full(nreq, -1, post_rows.dtype)
    for k in range(len(pid)):
        post_cnt[pid[k]] += 1
        post_of[pid[k]] = post_rows[k]
    comp_of = np.full(nreq, -1, comp_rows.dtype)
    comp_post = np.empty(len(cid), post_rows.dtype)
    orphan = np.zeros(len(cid), np.bool_)
    earlier = np.full(len(cid), -1, comp_rows.dtype)
    n_orphan = 0
    n_later = 0
    for k in range(len(cid)):
        c = cid[k]
        comp_post[k] = post_of[c]
        if post_cnt[c] == 0:
            orphan[k] = True
            n_orphan += 1
        if comp_of[c] < 0:
            comp_of[c] = comp_rows[k]
        else:
            earlier[k] = comp_of[c]
            n_later += 1
    end_at_post = np.empty(len(pid), comp_rows.dtype)
    dup = np.zeros(len(pid), np.bool_)
    n_dup = 0
    for k in range(len(pid)):
        end_at_post[k] = comp_of[pid[k]]
        if post_cnt[pid[k]] > 1:
            dup[k] = True
            n_dup += 1
    return comp_post, end_at_post, dup, orphan, earlier, n_dup, n_orphan, n_later
