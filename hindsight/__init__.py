"""hindsight: trace-driven post-mortem replay and validation of MPI programs."""
import os

# pyarrow's allocator (mimalloc) faults its memory in 4 KiB pages unless allowed 2 MiB ones; on
# this kind of VM that made the first read of a 10-million-event trace 2x slower (2.2-3.6 s
# against 1.2-1.3 s, benchmarks/scale.py). It must be set before pyarrow loads; users may override.
os.environ.setdefault("MIMALLOC_ALLOW_LARGE_OS_PAGES", "1")

__version__ = "0.1.0"
