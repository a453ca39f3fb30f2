"""Compiled passes of message matching against the NumPy expressions they stand for."""

from __future__ import annotations

import numpy as np
import pytest

from replay.matching_kernels import _ends_of_posts, _irecv_messages, _request_ends


def _by_bisection(post_rows: np.ndarray, end_at_post: np.ndarray,
                  rows: np.ndarray) -> np.ndarray:
    if len(post_rows) == 0:
        return np.full(len(rows), -1, end_at_post.dtype)
    at = np.minimum(np.searchsorted(post_rows, rows), len(post_rows) - 1)
    return np.where(post_rows[at] == rows, end_at_post[at], -1).astype(end_at_post.dtype)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_ends_of_posts_is_the_binary_search_it_replaced(seed, dtype):
    rng = np.random.default_rng(seed)
    post_rows = np.unique(rng.integers(0, 5000, 1500)).astype(dtype)
    end_at_post = rng.integers(-1, 9000, len(post_rows)).astype(dtype)
    in_order = np.sort(rng.choice(6000, 2000, replace=False)).astype(dtype)
    shuffled = rng.permutation(in_order)           # out of order: bisection where it steps back
    mixed = np.concatenate([in_order[:700], in_order[100:300], in_order[900:]])
    for rows in (in_order, shuffled, mixed, post_rows, in_order[:0]):
        got = _ends_of_posts(post_rows, end_at_post, rows)
        assert got.dtype == end_at_post.dtype
        assert np.array_equal(got, _by_bisection(post_rows, end_at_post, rows))
    empty = post_rows[:0]
    assert np.array_equal(_ends_of_posts(empty, end_at_post[:0], in_order),
                          np.full(len(in_order), -1, dtype))


@pytest.mark.parametrize("seed", range(3))
def test_irecv_messages_are_the_selections_they_replaced(seed):
    rng = np.random.default_rng(seed)
    n, m = 4000, 900
    peer = rng.integers(-2, 16, n).astype(np.int32)
    tag = rng.integers(-1, 100, n).astype(np.int32)
    nbytes = rng.integers(-1, 1 << 40, n)
    irecv = np.sort(rng.choice(n, m, replace=False)).astype(np.int32)
    idone = np.where(rng.random(m) < 0.7, rng.integers(0, n, m), -1).astype(np.int32)
    for ifreed in (np.zeros(m, bool), (idone < 0) & (rng.random(m) < 0.5)):
        has = idone >= 0
        want = (np.where(has, peer[np.maximum(idone, 0)], peer[irecv]),
                np.where(has, tag[np.maximum(idone, 0)], tag[irecv]),
                np.where(has, nbytes[np.maximum(idone, 0)],
                         np.where(ifreed, -1, nbytes[irecv])))
        got = _irecv_messages(irecv, idone, ifreed, peer, tag, nbytes)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and np.array_equal(g, w)


@pytest.mark.parametrize("seed", range(4))
def test_request_ends_are_the_scatters_and_gathers_they_replaced(seed):
    rng = np.random.default_rng(seed)
    nreq = 300
    post_rows = np.sort(rng.choice(10_000, 400, replace=False)).astype(np.int32)
    comp_rows = np.sort(rng.choice(np.setdiff1d(np.arange(10_000), post_rows), 500,
                                   replace=False)).astype(np.int32)
    pid = rng.integers(0, nreq, len(post_rows))        # duplicates: posted more than once
    cid = rng.integers(0, nreq, len(comp_rows))        # orphans and later ends among them
    comp_post, end_at_post, dup, orphan, earlier, n_dup, n_orphan, n_later = _request_ends(
        pid, cid, post_rows, comp_rows, nreq)
    post_cnt = np.bincount(pid, minlength=nreq)
    comp_cnt = np.bincount(cid, minlength=nreq)
    post_of = np.full(nreq, -1, np.int32)
    post_of[pid] = post_rows
    comp_of = np.full(nreq, -1, np.int32)
    comp_of[cid[::-1]] = comp_rows[::-1]
    twice = (comp_cnt[cid] > 1) & (comp_of[cid] != comp_rows)
    assert np.array_equal(comp_post, post_of[cid]) and comp_post.dtype == np.int32
    assert np.array_equal(end_at_post, comp_of[pid]) and end_at_post.dtype == np.int32
    assert np.array_equal(dup, post_cnt[pid] > 1) and n_dup == dup.sum() > 0
    assert np.array_equal(orphan, post_cnt[cid] == 0) and n_orphan == orphan.sum() > 0
    assert np.array_equal(earlier >= 0, twice) and n_later == twice.sum() > 0
    assert np.array_equal(earlier[twice], comp_of[cid[twice]])
