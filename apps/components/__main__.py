"""Connected components on the four paradigms (paper 002's algorithm).

The edge list is divided, each part is conquered with union-find into a root vector (root =
smallest vertex id of the component), and root vectors are combined by merging them.
hypercube: rank 0 loads the edge list, halves are sent down the hypercube, partners exchange and
combine root vectors, every rank ends with the full root vector (paper 002).
pipeline / tree / master-worker: a task is a slice of ``--edges-per-task`` edges, its result a
root vector, and the merge is the root-vector combine (associative and commutative).
Checked against ``scipy.sparse.csgraph.connected_components``.
"""
from __future__ import annotations

import sys
from typing import Any

import numpy as np
from mpi4py import MPI

from apps import common
from apps.common import region
from apps.components import graphs, kernels
from apps.skeletons import DivideConquer, Reduction, run


def load_graph(ns: Any, seed: int) -> tuple[int, np.ndarray]:
    if ns.graph == "gnm":
        return ns.vertices, graphs.gnm(ns.vertices, ns.edges, seed)
    if ns.graph == "rmat":
        return 1 << ns.scale, graphs.rmat(ns.scale, ns.edge_factor, seed)
    edges = graphs.read_edge_list(ns.input)
    return max(int(edges.max()) + 1, ns.vertices if ns.vertices_given else 0), edges


def reduction_app(n: int, edges: np.ndarray, per_task: int) -> Reduction:
    m = edges.shape[0]
    return Reduction(
        n_tasks=-(-m // per_task),
        load=lambda i: edges[i * per_task:(i + 1) * per_task],
        task=lambda e: kernels.conquer(n, e),
        merge=kernels.combine,
        size=len,
        task_size=lambda i: min(per_task, m - i * per_task),
    )


def hypercube_app(loader: Any) -> DivideConquer:
    """The problem is (n, edges), so n travels with the edges to ranks that did not load."""
    def divide(p: tuple[int, np.ndarray]) -> tuple[tuple[int, np.ndarray], tuple[int, np.ndarray]]:
        n, e = p
        half = (e.shape[0] + 1) // 2  # first half gets the extra edge, as in paper 002's example
        return (n, e[:half]), (n, e[half:].copy())

    return DivideConquer(load=loader, divide=divide,
                         conquer=lambda p: kernels.conquer(p[0], p[1]),
                         combine=kernels.combine,
                         problem_size=lambda p: int(p[1].shape[0]), result_size=len)


@common.guarded
def main(argv: list[str] | None = None) -> None:
    p = common.make_parser("components", __doc__.splitlines()[0])
    p.add_argument("--graph", choices=("gnm", "rmat", "file"), default="gnm",
                   help="input graph: uniform random G(n, m), R-MAT (Graph500), or --input file "
                        "(default gnm)")
    p.add_argument("--input", metavar="FILE", default=None,
                   help='edge list in "u v" text format, # or %% comments (implies --graph file)')
    p.add_argument("--vertices", type=int, default=None,
                   help="gnm: vertices n (default 65536); file: at least this many vertices")
    p.add_argument("--edges", type=int, default=65536, help="gnm: edges m (default 65536)")
    p.add_argument("--scale", type=int, default=14, help="rmat: 2^scale vertices (default 14)")
    p.add_argument("--edge-factor", type=int, default=16, help="rmat: edges per vertex (16)")
    p.add_argument("--edges-per-task", type=int, default=4096,
                   help="pipeline, tree, master-worker: edges per task (default 4096)")
    ns = p.parse_args(argv)
    c = common.check_common("components", ns)
    if ns.input is not None:
        ns.graph = "file"
    if ns.graph == "file" and ns.input is None:
        common.fail("--graph file needs --input FILE")
    ns.vertices_given = ns.vertices is not None
    if ns.vertices is None:
        ns.vertices = 65536
    common.positive("--vertices", ns.vertices)
    common.positive("--edges", ns.edges)
    common.positive("--edge-factor", ns.edge_factor)
    common.positive("--edges-per-task", ns.edges_per_task)
    if not 1 <= ns.scale <= 30:
        common.fail(f"--scale must be between 1 and 30 (got {ns.scale})")
    if ns.graph == "file":  # every rank checks, so a bad file is reported once, exit 2
        graphs.read_edge_list(ns.input)

    kernels.combine(kernels.conquer(3, np.array([[0, 1]])), np.arange(3))  # load compiled kernels
    comm = common.start(c.trace, "components", c.paradigm, vars(ns))
    t0 = MPI.Wtime()
    me = comm.Get_rank()
    graph: tuple[int, np.ndarray] | None = None
    if c.paradigm == "hypercube":
        def loader() -> tuple[int, np.ndarray]:
            nonlocal graph
            graph = load_graph(ns, c.seed)
            return graph
        result = run("hypercube", comm, hypercube_app(loader))
    else:
        with region("io"):
            graph = load_graph(ns, c.seed)
        result = run(c.paradigm, comm, reduction_app(graph[0], graph[1], ns.edges_per_task),
                     c.group_size)

    elapsed = MPI.Wtime() - t0
    common.end_of_program(written_by_root=bool(c.output))
    ok = None
    if me == 0:
        assert graph is not None
        n, edges = graph
        if c.output:
            with region("io", size=result.size):
                with open(c.output, "wb") as f:
                    np.save(f, result)
        common.end_of_program()
        ok = bool(np.array_equal(result, graphs.reference_roots(n, edges)))
        ncomp = int(np.count_nonzero(result == np.arange(n)))
        print(f"components: n={n} m={edges.shape[0]} -> {ncomp} components, paradigm "
              f"{c.paradigm}, P={comm.Get_size()}, {common.wall_time_text(elapsed)}: {'verified' if ok else 'WRONG'}",
              file=sys.stderr)
    common.conclude(comm, ok, "components")


if __name__ == "__main__":
    main()
