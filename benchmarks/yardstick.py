"""A yardstick of this machine's speed, printed beside absolute rates (rows/s): these VMs' speed
differs from one machine to the next and swings within minutes, so that a rate means little
without it. The yardstick is two fixed pieces of work in a fresh process, on one core, timed
3 times (medians): computing, NumPy's sort of 2**23 random int64; and new memory, the
nanoseconds a byte of filling 256 MiB the process never had (the kernel's page faults and
zeroing, which these VMs price very differently from day to day, and which the conversions
pay for every array and file they make). Compare rates taken on different days by them: a run
whose sort took twice as long ran on a machine half as fast.

    .venv/bin/python benchmarks/yardstick.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys

_CODE = ("import time, numpy as np; a = np.random.default_rng(0).integers(0, 1 << 62, 1 << 23);"
         "t = time.perf_counter(); np.sort(a, kind='quicksort'); s = time.perf_counter() - t;"
         "t = time.perf_counter(); b = np.empty(1 << 28, np.uint8); b.fill(1);"
         "m = (time.perf_counter() - t) / b.nbytes * 1e9; print(s, m)")


def yardstick(runs: int = 3) -> tuple[float, float]:
    """(the sort's seconds, new memory's ns a byte): medians of ``runs``, each in a fresh
    interpreter."""
    got = [tuple(map(float, subprocess.run([sys.executable, "-c", _CODE], check=True,
                                           text=True, capture_output=True).stdout.split()))
           for _ in range(runs)]
    return statistics.median(g[0] for g in got), statistics.median(g[1] for g in got)


def line(label: str) -> str:
    """The yardstick as a line to print."""
    sort_s, mem_ns = yardstick()
    return (f"yardstick {label}: sort {sort_s:.3f} s (2**23 int64), new memory "
            f"{mem_ns:.2f} ns/B (one core)")


if __name__ == "__main__":
    print(line("now"))
