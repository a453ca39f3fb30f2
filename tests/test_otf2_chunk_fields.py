"""The OTF2 import's one pass over a chunk's records (``otf2_rows.chunk_fields``): times in ns
against exact integer arithmetic, negative ones (events before the clock's offset) included;
refs, those outside the look-up tables too, against ``lookup``."""

from __future__ import annotations

import numpy as np
import pytest

from hindsight.interop import otf2_events as EV
from hindsight.interop.otf2_rows import chunk_fields, lookup


def _ns_exact(ticks: np.ndarray, offset: int, res: int) -> np.ndarray:
    """ns since ``offset`` of each tick count, in Python's unbounded integers."""
    return np.array([(t - offset) * 10**9 // res for t in ticks.tolist()], np.int64)


@pytest.mark.parametrize("res", [10**9, 2_100_000_000, 1_000_000, 3, 9_223_372_035])
def test_one_pass_gives_what_the_column_passes_give(res):
    rng = np.random.default_rng(res % 1000)
    n = 5000
    recs = np.zeros((n, EV.A0 + 2), np.int64)
    offset = 10**12
    # ticks around the offset (some events before it), as far from it as int64 ns reach
    reach = min(10**15, 9 * 10**9 * res)
    recs[:, EV.TIME] = offset + rng.integers(-reach // 1000, reach, n)
    recs[:, EV.LOC] = rng.integers(-3, 40, n)       # refs below 0 and beyond the table
    recs[:, EV.F0] = rng.integers(-2, 300, n)
    recs[:, EV.F1] = rng.integers(-2, 20, n)
    loc_lut = rng.integers(-5, 8, 32).astype(np.int64)
    reg_lut = rng.integers(0, 50, 256).astype(np.int64)
    comm_lut = rng.integers(-1, 4, 16).astype(np.int64)
    missing = -(1 << 62)
    times, lrank, gidx, cidx, unknown = chunk_fields(recs, np.int64(offset), np.int64(res),
                                                     loc_lut, missing, reg_lut, comm_lut)
    assert np.array_equal(times, _ns_exact(recs[:, EV.TIME], offset, res))
    assert np.array_equal(lrank, lookup(recs[:, EV.LOC], loc_lut, missing))
    assert np.array_equal(gidx, lookup(recs[:, EV.F0], reg_lut, -1))
    assert np.array_equal(cidx, lookup(recs[:, EV.F1], comm_lut, -1))
    assert unknown == int((lrank == missing).sum()) > 0
    assert (times < 0).any()
