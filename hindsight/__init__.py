"""hindsight: trace-driven post-mortem replay and validation of MPI programs."""
import os

#: Environment variables hindsight's own processes set for themselves; launchers remove them
#: again, so that the programs they start see the user's environment.
ENV_ADDED: dict[str, str] = {}

# pyarrow's allocator (mimalloc) faults its memory in 4 KiB pages unless allowed 2 MiB ones; on
# this kind of VM that made the first read of a 10-million-event trace 2x slower (2.2-3.6 s
# against 1.2-1.3 s, benchmarks/scale.py). It must be set before pyarrow loads; users may override.
# Not inside an MPI rank (the launchers' rank variables: MPICH/Hydra, PMIx, Open MPI, Slurm): a
# traced program must see the environment it would see untraced.
_RANK_VARIABLES = ("PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID")
if "MIMALLOC_ALLOW_LARGE_OS_PAGES" not in os.environ and \
        not any(v in os.environ for v in _RANK_VARIABLES):
    os.environ["MIMALLOC_ALLOW_LARGE_OS_PAGES"] = ENV_ADDED["MIMALLOC_ALLOW_LARGE_OS_PAGES"] = "1"

# Settings of hindsight's own commands, made before numpy loads (``own_settings``; a user's own
# setting wins); the launchers hand programs the user's environment without them (ENV_ADDED):
# * one OpenBLAS thread: numpy's OpenBLAS starts a thread per core that spins waiting for
#   matrix products hindsight does not make (a tenth of a command's CPU on a 2-core machine);
# * no huge pages asked for numpy's arrays: where the kernel compacts memory on such a request
#   (THP defrag "madvise", the usual default), a fresh large array waited for it (0.1 s for
#   67 MB here): ``import goal`` of 5 M operations and its first replay took 6.2 s with them,
#   5.6 s without (docs/interop.md, "Against LogGOPSim").
OWN_SETTINGS = {"OPENBLAS_NUM_THREADS": "1", "NUMPY_MADVISE_HUGEPAGE": "0"}


def own_settings() -> None:
    """Set ``OWN_SETTINGS`` where the environment does not set them (the CLI's first step; the
    benchmarks' too, so that they measure what a command runs)."""
    for name, value in OWN_SETTINGS.items():
        if name not in os.environ:
            os.environ[name] = ENV_ADDED[name] = value


# numba's cache checks a compiled kernel against its own source file only: from numba's import
# on, the project's kernels are also retired when any other file of the project changes (a
# callee, a constant it inlined), so that an upgraded checkout never runs stale machine code
# (hindsight/kernel_cache.py). Standard library only until numba is imported; not inside an MPI
# rank (as above).
if not any(v in os.environ for v in _RANK_VARIABLES):
    from hindsight.compiling import fresh_kernels
    fresh_kernels()

__version__ = "0.1.0"
