"""hindsight: trace-driven post-mortem replay and validation of MPI programs."""
__version__ = "0.1.0"
