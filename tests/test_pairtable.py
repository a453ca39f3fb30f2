"""The pair-keyed tables of compiled kernels without reference counting
(hindsight/interop/pairtable.py) against a Python dict: puts, finds, removals and growth in
random order, keys colliding on purpose, and a table that must never fill with the removed."""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit

from hindsight.interop import pairtable as PT


# (not cached: numba's cache of a test module would not notice a change of pairtable.py)
@njit(_nrt=False)
def _apply(t, counts, ops, out):
    """Run ``ops`` (kind, k0, k1, value) on table ``t`` (entry count ``counts[0]``) until one
    needs room: kind 0 puts, 1 finds (``out[i]``: the value, -1 if absent), 2 removes if
    present. Returns the index of the first op not run (``len(ops)``: all). Compiled as the
    OTF2 conversion is, without reference counting."""
    for i in range(len(ops)):
        kind, k0, k1, v = ops[i, 0], ops[i, 1], ops[i, 2], ops[i, 3]
        if kind == 0:
            if not PT.room(t, counts, 0, 1):
                return i
            s = PT.put(t, counts, 0, k0, k1)
            t[s, PT.VAL] = v
        else:
            s = PT.find(t, k0, k1)
            out[i] = t[s, PT.VAL] if s >= 0 else -1
            if kind == 2 and s >= 0:
                PT.remove(t, counts, 0, s)
    return len(ops)


def _run(ops: np.ndarray, capacity: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    t = PT.new_table(1, capacity)
    counts = np.zeros(1, np.int64)
    out = np.full(len(ops), -2, np.int64)
    i, grows = 0, 0
    while i < len(ops):
        i = _apply(t, counts, ops[i:], out[i:]) + i
        if i < len(ops):
            t = PT.grown(t, counts, 0, 1)
            grows += 1
    return t, counts, out, grows


@pytest.mark.parametrize("seed,keys", [(0, 50), (1, 5000), (2, 3)])
def test_a_table_answers_as_a_dict_does_through_puts_finds_removals_and_growth(seed, keys):
    rng = np.random.default_rng(seed)
    n = 20000
    ops = np.stack([rng.integers(0, 3, n), rng.integers(0, 4, n),
                    rng.integers(-keys, keys, n) * (1 << 40), rng.integers(0, 1 << 30, n)],
                   axis=1).astype(np.int64)
    t, counts, out, _ = _run(ops, 8)
    ref: dict[tuple[int, int], int] = {}
    for i, (kind, k0, k1, v) in enumerate(ops.tolist()):
        if kind == 0:
            ref[(k0, k1)] = v
        else:
            assert out[i] == ref.get((k0, k1), -1), f"op {i}"
            if kind == 2:
                ref.pop((k0, k1), None)
    assert counts[0] == len(ref)
    live = t[t[:, PT.STATE] == PT.LIVE]
    assert {(a, b): c for a, b, c in live[:, PT.K0:].tolist()} == ref


def test_entries_that_come_and_go_never_fill_the_table():
    """A million requests posted and completed, never more than 100 open: the table stays at
    its first size (a removal leaves no slot behind that a search must pass)."""
    k = np.arange(1_000_000, dtype=np.int64)
    put = np.stack([np.zeros_like(k), k % 7, k, k], axis=1)
    rem = np.stack([np.full_like(k, 2), k % 7, k, k], axis=1)
    ops = np.empty((2 * len(k), 4), np.int64)
    ops[0::2] = put
    ops[1::2] = np.roll(rem, 100, axis=0)     # each removed 100 puts later (the first 100:
    ops[1:200:2, 0] = 1                         # finds of keys not there yet)
    t, counts, out, grows = _run(ops, 256)
    assert grows == 0 and t.shape[0] == 256
    assert counts[0] == 100
    assert (out[201::2] == k[:-100]).all()      # each removal found its entry first
