"""Network calibration: measure LogGP/LogGPS, Hockney and M/M/1 parameters of the MPI in use and
write a profile for `hindsight replay --profile` (docs/calibration.md).

``bench`` is the mpi4py micro-benchmark (run under mpiexec; ``calls`` its probe of the per-call
overheads), ``fit`` the fitting, ``run`` the
orchestration (launch, transport verification, profile), ``quality`` the checks of a profile's
fit and conditions, ``profile`` the TOML file, ``plot`` the PNG, ``cli`` the `hindsight calibrate`
command.
"""
