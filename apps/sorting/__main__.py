"""Sorting on the four paradigms.

pipeline / tree: paper 000 §VII-D. A task quicksorts one array of ``--array-size`` integers;
merges are linear two-way merges, so messages double at each stage of the reduction tree.
master-worker: paper 003's block sort. Rank 0 reads the input in blocks of ``--block-size``,
deals block i to rank i mod p, every rank sorts its blocks as they arrive and merges them
locally, and rank 0 runs the p-way merge, pulling result parts of ``--block-size`` on demand,
and writes the output file as it goes.
hypercube: rank 0 loads the input, halves are sent down the hypercube, leaves quicksort,
partners exchange and merge (every rank ends with the sorted array).

The result is checked against ``numpy.sort`` of the same input (for master-worker, the output
file itself is read back and checked when ``--output`` is given).
"""
from __future__ import annotations

import sys
from typing import Any, Iterator

import numpy as np
from mpi4py import MPI

from apps import common
from apps.common import region
from apps.skeletons import DivideConquer, Reduction, run
from apps.skeletons.master_worker import BlockStream, block_stream
from apps.sorting import data, kernels


def reduction_app(src: data.IntSource, array_size: int) -> Reduction:
    n_arrays = -(-src.total // array_size)

    def load(i: int) -> np.ndarray:
        return src.read(i * array_size, array_size)

    return Reduction(
        n_tasks=n_arrays,
        load=load,
        task=kernels.quicksort,
        merge=kernels.merge2,
        size=len,
        task_size=lambda i: min(array_size, src.total - i * array_size),
    )


def hypercube_app(src: data.IntSource) -> DivideConquer:
    def divide(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        half = (a.size + 1) // 2
        return a[:half], a[half:].copy()  # copy: do not pickle a view of the whole array

    return DivideConquer(load=lambda: src.read(0, src.total), divide=divide,
                         conquer=kernels.quicksort, combine=kernels.merge2,
                         problem_size=len, result_size=len)


def block_app(src: data.IntSource, block: int, output: str | None) -> BlockStream:
    n_blocks = -(-src.total // block)

    def parts(local: np.ndarray) -> Iterator[np.ndarray]:
        for s in range(0, local.size, block):
            yield local[s:s + block].copy()

    def global_merge(streams: list[Iterator[np.ndarray]]) -> np.ndarray:
        """p-way merge over the streams, pulling a stream's next part when its current part
        is used up. Everything <= the smallest last element of the current parts is final,
        so that much is merged and written at each step."""
        out_file = open(output, "wb") if output else None
        chunks: list[np.ndarray] = []
        cur: list[np.ndarray | None] = [next(s, None) for s in streams]
        try:
            while True:
                active = [k for k, c in enumerate(cur) if c is not None]
                if not active:
                    break
                bound = min(cur[k][-1] for k in active)  # type: ignore[index]
                take = []
                for k in active:
                    c = cur[k]
                    cut = int(np.searchsorted(c, bound, side="right"))  # type: ignore[arg-type]
                    take.append(c[:cut])  # type: ignore[index]
                    cur[k] = c[cut:]  # type: ignore[index]
                with region("merge", size=sum(t.size for t in take)):
                    chunk = kernels.merge_many(take)
                if out_file is not None:
                    with region("io", size=chunk.size):
                        chunk.astype(data.DTYPE, copy=False).tofile(out_file)
                chunks.append(chunk)
                for k in active:
                    if cur[k].size == 0:  # type: ignore[union-attr]
                        cur[k] = next(streams[k], None)  # pull the next part on demand
        finally:
            if out_file is not None:
                out_file.close()
        return np.concatenate(chunks) if chunks else np.empty(0, dtype=np.int64)

    return BlockStream(
        n_blocks=n_blocks,
        read_block=lambda i: src.read(i * block, block),
        process=kernels.quicksort,
        local_merge=kernels.merge_many,
        parts=parts,
        global_merge=global_merge,
        size=len,
    )


@common.guarded
def main(argv: list[str] | None = None) -> None:
    p = common.make_parser("sorting", __doc__.splitlines()[0])
    p.add_argument("--input", metavar="FILE", default=None,
                   help="raw little-endian int64 file to sort (default: generated from --seed)")
    p.add_argument("--arrays", type=int, default=32,
                   help="generated input: number of arrays (default 32)")
    p.add_argument("--array-size", type=int, default=65536,
                   help="integers per array = per task (pipeline, tree) (default 65536)")
    p.add_argument("--block-size", type=int, default=16384,
                   help="master-worker: block size s of dealing and of result parts "
                        "(default 16384)")
    ns = p.parse_args(argv)
    c = common.check_common("sorting", ns)
    common.positive("--arrays", ns.arrays)
    common.positive("--array-size", ns.array_size)
    common.positive("--block-size", ns.block_size)
    if c.paradigm == "master-worker" and c.group_size != MPI.COMM_WORLD.Get_size():
        common.fail("sorting on master-worker is paper 003's block sort: one master, "
                    "no --group-size/--masters")
    src = data.IntSource(ns.arrays * ns.array_size, c.seed, ns.input)

    kernels.merge_many([np.arange(3), np.arange(2), np.arange(1)])  # load compiled kernels
    comm = common.start(c.trace, "sorting", c.paradigm, vars(ns))
    t0 = MPI.Wtime()
    result: Any
    if c.paradigm == "master-worker":
        result = block_stream(comm, block_app(src, ns.block_size, c.output))
    elif c.paradigm == "hypercube":
        result = run("hypercube", comm, hypercube_app(src))
    else:
        result = run(c.paradigm, comm, reduction_app(src, ns.array_size), c.group_size)

    elapsed = MPI.Wtime() - t0
    common.end_of_program(written_by_root=bool(c.output))
    ok = None
    if comm.Get_rank() == 0:
        if c.output and c.paradigm != "master-worker":  # master-worker wrote it while merging
            with region("io", size=result.size):
                data.write(c.output, result)
        common.end_of_program()
        got = np.fromfile(c.output, dtype=data.DTYPE) if c.output else result
        ok = bool(np.array_equal(got, np.sort(src.read(0, src.total))))
        print(f"sorting: {src.total} integers, paradigm {c.paradigm}, "
              f"P={comm.Get_size()}, {common.wall_time_text(elapsed)}: {'verified' if ok else 'WRONG'}", file=sys.stderr)
    common.conclude(comm, ok, "sorting")


if __name__ == "__main__":
    main()
