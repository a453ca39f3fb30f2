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

# numba's cache checks a compiled kernel against its own source file only: from numba's import
# on, the project's kernels are also retired when any other file of the project changes (a
# callee, a constant it inlined), so that an upgraded checkout never runs stale machine code
# (hindsight/kernel_cache.py). Standard library only until numba is imported; not inside an MPI
# rank (as above).
if not any(v in os.environ for v in _RANK_VARIABLES):
    from hindsight.compiling import fresh_kernels
    fresh_kernels()

__version__ = "0.1.0"
