"""``hindsight.sortedsets`` gives what NumPy's set functions give, on integer arrays of every
shape the replay passes them: empty, one value, repeated values, negatives, 32-bit, 2-D."""

from __future__ import annotations

import numpy as np
import pytest

from hindsight import sortedsets

rng = np.random.default_rng(7)
CASES = [np.zeros(0, np.int64), np.array([5]), np.array([3, 3, 3]), np.array([-4, 9, -4, 0]),
         rng.integers(-50, 50, 1000), rng.integers(0, 2**40, 5000),
         rng.integers(0, 64, 10000).astype(np.int32), rng.integers(0, 9, (40, 3)),
         # past sortedsets._SORT_LOOKUPS: lookups in sorted order, values unsorted and sorted
         rng.integers(-2**62, 2**62, 40000), np.arange(30000) * 3,
         rng.integers(0, 300, (9000, 3))]


@pytest.mark.parametrize("a", CASES, ids=range(len(CASES)))
def test_unique_is_numpys(a):
    got = sortedsets.unique(a)
    want = np.unique(a)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("a", CASES, ids=range(len(CASES)))
@pytest.mark.parametrize("b", CASES, ids=range(len(CASES)))
def test_setdiff_and_contains_are_numpys(a, b):
    np.testing.assert_array_equal(sortedsets.setdiff(a, b), np.setdiff1d(a, b))
    np.testing.assert_array_equal(sortedsets.contains(sortedsets.unique(b), a.ravel()),
                                  np.isin(a.ravel(), b))


@pytest.mark.parametrize("a", CASES, ids=range(len(CASES)))
@pytest.mark.parametrize("b", CASES, ids=range(len(CASES)))
def test_positions_are_searchsorteds(a, b):
    s = np.sort(b.ravel())
    got = sortedsets.positions(s, a)
    assert got.shape == a.shape and got.dtype == np.int64
    np.testing.assert_array_equal(got, np.searchsorted(s, a))
