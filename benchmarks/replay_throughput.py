"""Replay throughput: operations per second per model, bytes per operation, compile time.

Synthetic kernel inputs are built directly as arrays (no Parquet, no Python per event): ring,
pairwise exchange, binary-tree allreduce, incast (many ranks send to one receiver that drains
them in rank order, so messages pile up), all-to-all. A separate case measures loading a
Parquet trace into the prepared arrays, and an optional sweep times many configurations.

    .venv/bin/python benchmarks/replay_throughput.py             # 1e5..1e6 operations
    .venv/bin/python benchmarks/replay_throughput.py --full      # up to 1e7 operations, 8192 ranks
    .venv/bin/python benchmarks/replay_throughput.py --sweep 1000
    .venv/bin/python benchmarks/replay_throughput.py --one-core  # the targets are per core

"Operations" are kernel operations (a send, a receive, a post or a wait; compute bursts ride on
them and are not counted separately).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hindsight.system import keep_freed_memory  # noqa: E402
from replay import collectives as C  # noqa: E402
from replay import kernel as K  # noqa: E402
from replay import models as M  # noqa: E402
from replay.engine import _kernel, _Ctx  # noqa: E402
from replay.stream import Stream  # noqa: E402


def stream_from_messages(P: int, src, dst, nbytes: float, iters: int, burst: float = 2000.0,
                         blocking: bool = False) -> Stream:
    """Tile one iteration (messages src[j] -> dst[j]) ``iters`` times.

    Non-blocking form per rank and iteration: its Isends, its Irecvs, Wait on the receives, Wait on
    the sends. Blocking form: sends as SEND, receives as RECV, in message order."""
    src = np.asarray(src, np.int64)
    dst = np.asarray(dst, np.int64)
    Mi = len(src)
    j = np.arange(Mi)
    if blocking:
        who = np.concatenate([src, dst])
        order = np.repeat([0, 1], Mi)
        kinds = np.array([K.SEND, K.RECV], np.int8)[order]
        mid = np.concatenate([j, j])
    else:
        who = np.concatenate([src, dst, dst, src])
        order = np.repeat(np.arange(4), Mi)
        kinds = np.array([K.ISEND, K.IRECV, K.WRECV, K.WSEND], np.int8)[order]
        mid = np.concatenate([j] * 4)
    srt = np.lexsort((mid, order, who))
    who, kinds, mid = who[srt], kinds[srt], mid[srt]
    per = np.bincount(who, minlength=P)            # ops per rank per iteration
    rank_off = np.zeros(P + 1, np.int64)
    np.cumsum(per * iters, out=rank_off[1:])
    nops = int(rank_off[-1])
    # op index = rank_off[r] + it * per[r] + position within the rank's iteration
    pos_in_rank = np.arange(len(who)) - np.repeat(np.cumsum(per) - per, per)
    it = np.arange(iters, dtype=np.int64)
    idx = (rank_off[who][None, :] + it[:, None] * per[who][None, :] + pos_in_rank[None, :]).ravel()
    kind = np.empty(nops, np.int8)
    msg = np.empty(nops, np.int32)  # message, row and rank numbers: int32, as prepare makes them
    kind[idx] = np.tile(kinds, iters)
    msg[idx] = (it[:, None] * Mi + mid[None, :]).ravel()
    b = np.zeros(nops)
    b[idx] = np.tile(np.where(np.isin(kinds, (K.ISEND, K.SEND)), burst, 0.0), iters)
    nmsg = Mi * iters
    e = np.zeros(0)
    return Stream(rank_off, kind, msg, b, b, np.full(nops, -1, np.int16),
                  np.zeros(nops, np.int32), np.full(nmsg, float(nbytes)),
                  np.tile(src, iters).astype(np.int32), np.tile(dst, iters).astype(np.int32),
                  np.zeros(0, np.int64),
                  np.zeros(0, np.int64), e, e, np.zeros(0, np.int64))


def incast(P: int, per_sender: int, nbytes: float) -> Stream:
    """Ranks 1..P-1 each send ``per_sender`` messages to rank 0, which receives them sender by
    sender: the last senders' messages wait in a backlog the whole run."""
    senders = np.arange(1, P)
    src = np.repeat(senders, per_sender)
    dst = np.zeros(len(src), np.int64)
    n = len(src)
    kind = np.concatenate([np.full(n, K.RECV, np.int8), np.full(n, K.SEND, np.int8)])
    # rank 0 receives message m = (sender-1)*per_sender + i in order; sender s sends its block
    msg = np.concatenate([np.arange(n), np.arange(n)]).astype(np.int32)
    rank_off = np.concatenate([[0, n], n + np.arange(1, P) * per_sender]).astype(np.int64)
    b = np.where(kind == K.SEND, 2000.0, 100.0)
    return Stream(rank_off, kind, msg, b, b, np.full(2 * n, -1, np.int16),
                  np.zeros(2 * n, np.int32), np.full(n, float(nbytes)), src.astype(np.int32),
                  dst.astype(np.int32),
                  np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), np.zeros(0),
                  np.zeros(0, np.int64))


def workloads(full: bool):
    sizes = [(16, 1e5), (64, 1e6)] + ([(1024, 1e7), (8192, 1e7)] if full else [(512, 1e6)])
    for P, target in sizes:
        r = np.arange(P)
        it = max(1, int(target // (4 * P)))
        yield f"ring P={P}", stream_from_messages(P, r, (r + 1) % P, 4096, it)
        yield f"pairwise P={P}", stream_from_messages(P, r, r ^ 1, 4096, it)
        s, d = C.pattern("Allreduce", "reduce_bcast", P, 0)[:2]
        it = max(1, int(target // (4 * len(s))))
        yield f"tree-allreduce P={P}", stream_from_messages(P, s, d, 8192, it)
        yield f"incast P={P}", incast(P, max(1, int(target // (2 * (P - 1)))), 1024)
        if P <= 1024:
            src = np.repeat(r, P - 1)
            dst = (src + np.tile(np.arange(1, P), P)) % P
            it = max(1, int(target // (4 * len(src))))
            yield f"alltoall P={P}", stream_from_messages(P, src, dst, 1024, it)


class _FakePrep:
    def __init__(self, st: Stream):
        self.nranks = len(st.rank_off) - 1
        self.host_of_rank = np.arange(self.nranks)
        self.trail = np.zeros(self.nranks)


def time_model(st: Stream, model: str, sets: dict, reps: int = 3):
    mod = M.get_model(model)
    v = M.resolve(mod, sets)
    fp = _FakePrep(st)

    def context():
        # a fresh context per timed replay: what a model caches on it (M/M/1's paths and
        # histogram) is built inside the timing, as in one `hindsight replay`
        ctx = _Ctx.__new__(_Ctx)
        ctx.nranks, ctx.m_bytes, ctx.m_src, ctx.m_dst = fp.nranks, st.m_bytes, st.m_src, st.m_dst
        ctx.host_of_rank, ctx._prep, ctx._st = fp.host_of_rank, fp, st
        return ctx

    prm = mod.kernel_params(v, context())
    scale = np.ones(1)
    best = 1e30
    for _ in range(reps):
        ctx = context()
        tracemalloc.start()
        t = time.perf_counter()
        out = None
        for p in range(mod.passes(v)):
            delay, _ = mod.message_delay(
                v, ctx, out.m_sp if out is not None else None,
                float(out.rank_end.max()) if out is not None else 0.0, p == mod.passes(v) - 1)
            stuck, out = _kernel(st, prm, K.MODE_NETWORK, scale, fp.trail, False, delay, False)
        dt = time.perf_counter() - t
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert stuck == 0, "deadlock in a benchmark workload"
        best = min(best, dt)
    return best, peak, float(out.rank_end.max())


def stream_bytes(st: Stream) -> int:
    return sum(a.nbytes for a in (st.rank_off, st.kind, st.msg, st.burst, st.reg, st.m_bytes,
                                  st.m_src, st.m_dst))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true", help="up to 1e7 operations and 8192 ranks")
    ap.add_argument("--sweep", type=int, default=0, help="also time a sweep of N configurations")
    ap.add_argument("--load-rows", type=int, nargs="+", default=[1_000_000, 5_200_000],
                    help="rows of the Parquet ring cases (default: 1M, and 5.2M, the size of "
                         "the reference simulator's 64-rank ring)")
    ap.add_argument("--one-core", action="store_true",
                    help="run on one core (the issue's targets are per core; loading then "
                         "decodes in one thread)")
    ap.add_argument("--release-memory", action="store_true",
                    help="let glibc return freed memory to the kernel (the default of a plain "
                         "Python process; the hindsight CLI keeps it, see hindsight/system.py)")
    args = ap.parse_args()
    if args.one_core:
        core = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {core})
        print(f"pinned to core {core}")
    if not args.release_memory:
        print(f"freed memory kept for reuse, as the CLI does: {keep_freed_memory()}")

    t = time.perf_counter()
    tiny = stream_from_messages(2, [0], [1], 8, 1)
    _kernel(tiny, K.make_params(), 0, np.ones(1), np.zeros(2), False, np.zeros(1), False)
    print(f"kernel ready in {time.perf_counter() - t:.2f} s (compile, or load from numba's cache)")

    models = [("loggp", {}), ("loggps", {"S": "4KiB"}), ("hockney", {}),
              ("mm1", {"rho": "measured", "saturation": "cap"})]   # the incast floods its link
    print(f"{'workload':<24}{'ops':>11}  " + "".join(f"{m:>16}" for m, _ in models) +
          "   bytes/op (arrays + run peak)")
    for name, st in workloads(args.full):
        cells = []
        extra = 0
        for m, sets in models:
            dt, peak, _ = time_model(st, m, sets, reps=2 if st.nops > 3e6 else 3)
            cells.append(f"{st.nops / dt / 1e6:>11.1f} Mop/s")
            if m == "loggps":
                extra = peak
        bpo = (stream_bytes(st) + extra) / st.nops
        print(f"{name:<24}{st.nops:>11,}  " + "".join(cells) + f"   {bpo:6.1f}")

    # incast scaling: cost must be linear in the number of operations
    print("incast scaling (loggps):", end="")
    for per in (2000, 8000, 32000):
        st = incast(64, per, 1024)
        dt, _, _ = time_model(st, "loggps", {}, reps=3)
        print(f"  {st.nops:,} ops {dt * 1e3:.1f} ms ({st.nops / dt / 1e6:.1f} Mop/s)", end="")
    print()

    # loading a Parquet trace into the prepared arrays
    import replay
    from tests.synthetic import ring_columns, write_trace
    with tempfile.TemporaryDirectory() as d:
        P = 64
        cases = []  # (directory, name, ranks, events)
        # the first size also from 8 and 256 rank files: a load costs a fixed time per file
        # plus a time per event, and these two give both
        sizes = [(rows, P) for rows in args.load_rows]
        sizes[1:1] = [(args.load_rows[0], 8), (args.load_rows[0], 256)]
        for rows, ranks in sizes:
            iters = max(1, rows // (2 * ranks))
            write_trace(Path(d) / f"ring-{rows}-{ranks}", ring_columns(ranks, iters))
            cases.append((f"ring-{rows}-{ranks}", "ring", ranks, 2 * ranks * iters))
        # the same with an Allreduce per iteration (as hindsight/examples/ring.py): a third of
        # the rows are collectives, each instance decomposed into its algorithm's messages
        iters_c = max(1, args.load_rows[0] // (3 * P))
        write_trace(Path(d) / "ring-allreduce", ring_columns(P, iters_c, allreduce=True))
        cases.append(("ring-allreduce", "ring-allreduce", P, 3 * P * iters_c))
        best = {}
        print("load Parquet -> prepared arrays (the prepared form, as cached) -> the kernel's "
              "operations; M events/s (ms)")
        print(f"{'trace':<26}{'events':>10}  {'first':>14}  {'warm best':>14}  {'median':>14}  "
              f"{'prepared only':>14}  {'from cache':>14}")
        for dirname, name, ranks, n in cases:

            def load(use_cache: bool) -> tuple[float, float]:
                """(seconds to the prepared arrays, seconds to the kernel's operations)"""
                t = time.perf_counter()
                prep = replay.prepare(Path(d) / dirname, use_cache=use_cache)
                t_prep = time.perf_counter() - t
                prep.stream(True)
                return t_prep, time.perf_counter() - t

            def rate(seconds: float) -> str:
                return f"{n / seconds / 1e6:6.2f} ({seconds * 1e3:4.0f})"

            # first: the process's first load of the trace (fresh memory, faulted in page by
            # page); warm: five more in the same process (memory reused, as in a sweep or a
            # notebook; best and median: this VM's speed swings)
            t_first = load(False)[1]
            warm = [load(False) for _ in range(5)]
            whole = sorted(w[1] for w in warm)
            prepared = min(w[0] for w in warm)
            replay.prepare(Path(d) / dirname)  # writes the cache
            t_cache = min(load(True)[1] for _ in range(3))
            best[dirname] = (ranks, n, whole[0])
            print(f"{name + f' P={ranks}':<26}{n:>10,}  {rate(t_first):>14}  {rate(whole[0]):>14}  "
                  f"{rate(whole[2]):>14}  {rate(prepared):>14}  {rate(t_cache):>14}")
        (f8, n8, t8), (f256, n256, t256) = (best[f"ring-{args.load_rows[0]}-{r}"] for r in (8, 256))
        per_file = (t256 - t8 - (n256 - n8) * t8 / n8) / (f256 - f8)
        per_event = (t8 - f8 * per_file) / n8
        print(f"a warm load costs {per_file * 1e3:.2f} ms per rank file + {per_event * 1e9:.0f} ns "
              f"per event (fit to the rings of 8 and 256 ranks): {1e-6 / per_event:.1f} M events/s "
              "when files are few")
        if args.sweep:
            from replay.sweeps import sweep
            target = 1_000_000
            iters = max(1, target // (4 * P))
            write_trace(Path(d) / "big", ring_columns(P, iters // 1))
            prep = replay.prepare(Path(d) / "big")
            nops = prep.stream(True).nops
            n = args.sweep
            t = time.perf_counter()
            df = sweep(prep, "loggps", {}, [f"G=0.01ns..10ns:log:{n}"], workers=2)
            dt = time.perf_counter() - t
            print(f"sweep: {len(df)} configurations of a {nops:,}-operation trace in {dt:.1f} s "
                  f"on 2 threads ({len(df) * nops / dt / 1e6:.1f} M op/s overall)")


if __name__ == "__main__":
    main()
