"""``np.unique`` against ``hindsight.sortedsets.unique`` (a sort), on the integer arrays the
replay's sets are made of: row numbers (every value distinct) and ranks (64 values), at
several sizes. NumPy 2.3 and later find ``np.unique``'s values with a hash table; this prints
both times and their ratio, alternating the two (medians of ``--rounds``), so that the choice
in ``hindsight/sortedsets.py`` can be checked on any machine and NumPy. It also times lookups:
``np.searchsorted`` of values in random order against ``sortedsets.positions`` (which searches
them in sorted order), for as many values as the set has.

    .venv/bin/python benchmarks/unique_speed.py
    .venv/bin/python benchmarks/unique_speed.py --sizes 1e5 1e6 --rounds 7
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from hindsight.sortedsets import positions, unique  # noqa: E402
from yardstick import line as yardstick_line  # noqa: E402


def _time(fn, a: np.ndarray) -> float:
    t = time.perf_counter()
    fn(a)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=float, nargs="+", default=[1e4, 1e5, 1e6, 4e6])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    print(f"numpy {np.__version__}; load average {os.getloadavg()[0]:.2f}; "
          f"{yardstick_line('before')}")
    rng = np.random.default_rng(0)
    print(f"{'array':<22} {'size':>9} {'np.unique':>11} {'sort':>9} {'ratio':>7}")
    for size in (int(s) for s in args.sizes):
        cases = {"row numbers (shuffled)": rng.permutation(size).astype(np.int64),
                 "ranks (64 values)": rng.integers(0, 64, size).astype(np.int64)}
        for name, a in cases.items():
            if not np.array_equal(np.unique(a), unique(a)):
                raise SystemExit(f"Error: sortedsets.unique differs from np.unique on {name}")
            hashed, sorted_ = [], []
            for _ in range(args.rounds):
                hashed.append(_time(np.unique, a))
                sorted_.append(_time(unique, a))
            h, s = statistics.median(hashed), statistics.median(sorted_)
            print(f"{name:<22} {size:>9} {h * 1e3:>9.2f}ms {s * 1e3:>7.2f}ms {h / s:>6.1f}x")
    print(f"\n{'lookups':<22} {'size':>9} {'searchsorted':>12} {'positions':>10} {'ratio':>7}")
    for size in (int(s) for s in args.sizes):
        table = np.sort(rng.integers(0, 1 << 62, size))
        values = rng.integers(0, 1 << 62, size)
        if not np.array_equal(np.searchsorted(table, values), positions(table, values)):
            raise SystemExit("Error: sortedsets.positions differs from np.searchsorted")
        plain, ordered = [], []
        for _ in range(args.rounds):
            plain.append(_time(lambda v: np.searchsorted(table, v), values))
            ordered.append(_time(lambda v: positions(table, v), values))
        p, o = statistics.median(plain), statistics.median(ordered)
        print(f"{'random 64-bit values':<22} {size:>9} {p * 1e3:>10.2f}ms {o * 1e3:>8.2f}ms "
              f"{p / o:>6.1f}x")
    print(f"load average after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
