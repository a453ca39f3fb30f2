"""The compiled row-time helpers against the rules written with NumPy: a call's rows joined
(``replay.warp.join_call_rows``), rule *time warp* (``replay.warp.time_warp``: anchors stably
sorted, replayed times made non-decreasing, ``np.interp``), and the noise sweep's event order
(``replay.noise._sorted_events``: by time, ends first, then interval order)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from replay import noise as N
from replay.warp import join_call_rows, time_warp


def _join_reference(cont, rs, re):
    n = len(cont)
    rs, re = rs.copy(), re.copy()
    idx = np.flatnonzero(cont)
    if len(idx):
        grp = np.maximum.accumulate(np.where(cont, 0, np.arange(n)))
        rs[idx] = rs[grp[idx]]
        gend = np.full(n, -1.0)
        np.maximum.at(gend, grp, re)
        re = np.where(gend[grp] >= 0, np.maximum(re, gend[grp]), re)
    return rs, re


def _warp_reference(rank_off, has, ts, te, rs, re, end_x, end_y):
    rs, re = rs.copy(), re.copy()
    for r in range(len(rank_off) - 1):
        sl = np.arange(rank_off[r], rank_off[r + 1])
        timed, miss = sl[has[sl]], sl[~has[sl]]
        if not len(miss):
            continue
        ax = np.concatenate([[0.0], np.stack([ts[timed], te[timed]], 1).ravel(), [end_x[r]]])
        ay = np.concatenate([[0.0], np.stack([rs[timed], re[timed]], 1).ravel(), [end_y[r]]])
        o = np.argsort(ax, kind="stable")
        ax, ay = ax[o], np.maximum.accumulate(ay[o])
        rs[miss] = np.interp(ts[miss], ax, ay)
        re[miss] = np.interp(te[miss], ax, ay)
    return rs, re


@st.composite
def rank_rows(draw):
    """Rows of a few ranks: measured times in order or overlapping, with ties; some rows
    continue the call before them (same times), some have no replayed time."""
    P = draw(st.integers(1, 3))
    ts, te, has, cont, rank = [], [], [], [], []
    for r in range(P):
        t = 0
        ordered = draw(st.booleans())
        for i in range(draw(st.integers(0, 14))):
            if i and draw(st.integers(0, 3)) == 0:   # a further row of the call before
                ts.append(ts[-1])
                te.append(te[-1])
                cont.append(True)
            else:
                a = t + draw(st.integers(0, 3))
                if not ordered:
                    a = draw(st.integers(0, 30))
                ts.append(a)
                te.append(a + draw(st.integers(0, 4)))
                t = te[-1]
                cont.append(False)
            has.append(draw(st.booleans()))
            rank.append(r)
    n = len(ts)
    ts = np.array(ts, np.int64) + 1000
    te = np.array(te, np.int64) + 1000
    rs = np.array([draw(st.integers(0, 40)) * 0.5 if h else -1.0 for h in has])
    re = np.array([x + draw(st.integers(0, 6)) * 0.25 if h else -1.0 for x, h in zip(rs, has)])
    rank = np.array(rank, np.int64)
    rank_off = np.searchsorted(rank, np.arange(P + 1)).astype(np.int64)
    ends = [float(te[rank == r].max() - 1000) if (rank == r).any() else 0.0 for r in range(P)]
    # a measured end before a row's end too (an anchor the stable sort puts before it)
    end_x = np.array([e + draw(st.integers(-3, 5)) for e in ends], float)
    end_y = np.array([draw(st.integers(0, 60)) * 0.5 for _ in range(P)], float)
    return dict(rank_off=rank_off, has=np.array(has, bool), cont=np.array(cont, bool), ts=ts,
                te=te, rs=rs, re=re, end_x=end_x, end_y=end_y, n=n)


@settings(max_examples=300, deadline=None)
@given(rank_rows())
def test_join_call_rows_is_the_numpy_rule(d):
    rs, re = d["rs"].copy(), d["re"].copy()
    join_call_rows(d["cont"], rs, re)
    ref_s, ref_e = _join_reference(d["cont"], d["rs"], d["re"])
    assert np.array_equal(rs, ref_s) and np.array_equal(re, ref_e)


@settings(max_examples=300, deadline=None)
@given(rank_rows())
def test_time_warp_is_the_numpy_rule(d):
    rs, re = d["rs"].copy(), d["re"].copy()
    time_warp(d["rank_off"], d["has"], d["ts"], d["te"], 1000, rs, re, d["end_x"], d["end_y"])
    ref_s, ref_e = _warp_reference(d["rank_off"], d["has"], (d["ts"] - 1000).astype(float),
                                   (d["te"] - 1000).astype(float), d["rs"], d["re"],
                                   d["end_x"], d["end_y"])
    assert np.array_equal(rs, ref_s, equal_nan=True) and np.array_equal(re, ref_e, equal_nan=True)


@st.composite
def intervals(draw):
    """(rank, start, length) triples: in any order, or rank by rank with each rank's intervals
    in time order, touching or apart (how a trace's calls come), with ties between ranks."""
    if draw(st.booleans()):
        return draw(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 20), st.integers(0, 3)),
                             max_size=40))
    out = []
    for r in range(draw(st.integers(0, 4))):
        t = 0
        for _ in range(draw(st.integers(0, 8))):
            t += draw(st.integers(0, 2))
            d = draw(st.integers(0, 3))
            out.append((r, t, d))
            t += d
    return out


@settings(max_examples=300, deadline=None)
@given(intervals())
def test_sweep_events_by_time_ends_first_then_interval_order(iv):
    s = np.array([a for _, a, _ in iv], float)
    e = s + np.array([d for _, _, d in iv], float)
    rank = np.array([r for r, _, _ in iv], np.int64)
    t, delta, rk = N._sorted_events(s, e, rank)
    keep = e > s
    ts = np.concatenate([s[keep], e[keep]])
    dl = np.concatenate([np.ones(keep.sum(), np.int8), -np.ones(keep.sum(), np.int8)])
    order = np.lexsort((dl, ts))
    assert np.array_equal(t, ts[order])
    assert np.array_equal(delta, dl[order])
    assert np.array_equal(rk, np.concatenate([rank[keep], rank[keep]])[order])
