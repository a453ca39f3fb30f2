"""What a replay keeps in memory: file-mapped pages handed back once read (``page_out``), the
measured ends kept in the prepared cache, the critical path without per-row times."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

import replay
from hindsight.interop import goal as G
from hindsight.system import page_out
from replay.engine import run

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from goal_schedules import make_schedule  # noqa: E402


def _resident_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 1e6


def test_page_out_hands_back_clean_pages_and_keeps_written_ones(tmp_path):
    path = tmp_path / "a.npy"
    np.save(path, np.arange(8_000_000, dtype=np.int64))     # 64 MB
    for mode in ("r", "c"):
        a = np.load(path, mmap_mode=mode)
        total = int(a.sum())                                  # every page read
        before = _resident_mb()
        page_out(a)
        assert _resident_mb() < before - 40, mode
        assert int(a.sum()) == total                          # read again from the file
    a = np.load(path, mmap_mode="c")
    a[3] = -1                                                 # a private copy of one page
    int(a.sum())
    before = _resident_mb()
    page_out(a)
    assert _resident_mb() > before - 1                        # nothing handed back ...
    assert a[3] == -1 and a[4] == 4                           # ... and nothing lost
    page_out(np.arange(10), None)                             # not mapped: left alone


def _imported(tmp_path: Path) -> Path:
    text, _ = make_schedule("pairwise", 4000, P=8)
    src = tmp_path / "p.goal"
    src.write_text(text)
    return G.import_goal(src, tmp_path / "t")


def test_the_cache_keeps_the_measured_ends(tmp_path):
    from hindsight.check import check_and_prepare

    trace = _imported(tmp_path)
    assert check_and_prepare(trace) == []                     # writes the prepared cache
    cached = replay.prepare(trace)
    fresh = replay.prepare(trace, use_cache=False)
    assert cached.measured is not None                        # from meta.json, not the rows
    assert cached.measured_makespan_ns == fresh.measured_makespan_ns > 0
    assert np.array_equal(cached.measured_rank_end_ns, fresh.measured_rank_end_ns)


def test_the_critical_path_without_row_times_is_the_same(tmp_path):
    prep = replay.prepare(_imported(tmp_path))
    full = run(prep, "loggps")
    path_only = run(prep, "loggps", row_times=False)
    assert path_only.row_start_ns is None and path_only.row_end_ns is None
    assert full.row_start_ns is not None
    assert np.array_equal(full.critical_rank_ns, path_only.critical_rank_ns)
    assert np.array_equal(full.critical_rows, path_only.critical_rows)
    assert full.critical_rows.any()
    assert path_only.summary() == full.summary()


def test_match_buckets_by_sort_are_those_of_the_table():
    """--model loggopsim numbers its match buckets through a table of the possible keys when
    the tags are close together (or a power of two apart), else by a sort (built in place);
    tags moved apart (same order, so same keys) must give the same queues, wildcards
    included."""
    from replay.loggopsim.buckets import match_buckets
    from replay.loggopsim.codes import ANY, RECV

    rng = np.random.default_rng(7)
    for trial in range(40):
        n, P = int(rng.integers(50, 300)), int(rng.integers(2, 9))
        kind = rng.integers(1, 4, n).astype(np.int8)         # SEND, RECV, CALC
        rank = rng.integers(0, P, n).astype(np.int32)
        peer = rng.integers(0, P, n).astype(np.int32)
        tag = rng.integers(0, 4, n).astype(np.int64)
        recv = kind == RECV                                   # wildcards: receives only
        peer[recv & (rng.random(n) < 0.1) & (trial % 2 == 1)] = ANY
        tag[recv & (rng.random(n) < 0.1) & (trial % 3 == 0)] = ANY
        table = match_buckets(P, rank, kind, peer, tag, np.int32)
        # a table in steps of 8; a sort of keys; of tag ranks (keys would overflow)
        for far in (8, 10**9, 10**17):
            spread = np.where(tag == ANY, ANY, tag * far)
            by_sort = match_buckets(P, rank, kind, peer, spread, np.int32)
            for a, b in zip(_named_alike(table), _named_alike(by_sort)):
                assert np.array_equal(a, b), (trial, far)


def _named_alike(buckets):
    """match_buckets' arrays with the keys renumbered in the order the operations first use
    them (the numbers only name the queues: a table and a sort may number them differently)."""
    bucket, cand, ubucket, nkeys = buckets
    first = {}
    for b in bucket.tolist():
        if b >= 0:
            first.setdefault(b, len(first))
    rename = np.vectorize(lambda b: first.get(b, b) if b >= 0 else b, otypes=[np.int64])
    return rename(bucket), rename(cand), rename(ubucket), nkeys
