"""Cost of rules lock_epoch and pscw_epoch in preparation (``replay.rma_epochs.epoch_ops``):
rows per second of a synthetic trace's one-sided rows, built as arrays (no Parquet).

Each of P ranks makes N lock epochs on its right neighbour (Win_lock, Put 64 B, Get 64 B,
Win_unlock: 4 rows, one round trip) and N PSCW epochs with it (Win_post to the left one,
Win_start on the right one, Put 64 B, Win_complete, Win_wait: 5 rows, two messages).

    .venv/bin/python benchmarks/rma_epochs.py            # P = 4, N = 50000 (1.8 M rows)
    .venv/bin/python benchmarks/rma_epochs.py --n 10000 --repeat 7
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hindsight import trace as tf  # noqa: E402
from replay.rma_epochs import epoch_ops  # noqa: E402

W = 77


def rows(p: int, n: int) -> tuple[np.ndarray, ...]:
    """(rank, op, peer, comm, nbytes, t_start) of the synthetic trace, in (rank, seq) order."""
    lock = [("Win_lock", 1, -1), ("Put", 1, 64), ("Get", 1, 64), ("Win_unlock", 1, -1)]
    pscw = [("Win_post", -1, -1), ("Win_start", 1, -1), ("Put", 1, 64),
            ("Win_complete", 0, -1), ("Win_wait", 0, -1)]
    one = lock + pscw
    k = len(one)
    code = np.array([tf.OP_CODE[x] for x, _, _ in one] * n, np.int8)
    shift = np.array([s for _, s, _ in one] * n)
    nb = np.array([b for _, _, b in one] * n, np.int64)
    cols = []
    for r in range(p):
        peer = np.where(shift == 1, (r + 1) % p, np.where(shift == -1, (r - 1) % p, -1))
        cols.append((np.full(n * k, r, np.int32), code, peer.astype(np.int32),
                     np.full(n * k, W, np.int32), nb, np.arange(n * k, dtype=np.int64) * 100))
    return tuple(np.concatenate([c[i] for c in cols]) for i in range(6))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--p", type=int, default=4)
    ap.add_argument("--n", type=int, default=50000)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    cols = rows(a.p, a.n)
    times = []
    for _ in range(a.repeat):
        t0 = time.perf_counter()
        ep = epoch_ops(*cols)
        times.append(time.perf_counter() - t0)
    n = len(cols[0])
    med = statistics.median(times)
    print(f"epoch_ops: {n} rows, {len(ep.ops.row)} operations, {len(ep.ops.m_bytes)} messages; "
          f"median {med:.2f} s (min {min(times):.2f}, max {max(times):.2f}), "
          f"{n / med / 1e6:.2f} M rows/s; unmatched {ep.unmatched}, unclosed {ep.unclosed}")


if __name__ == "__main__":
    main()
