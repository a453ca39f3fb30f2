"""Ending a rank on SIGTERM/SIGINT without a traceback, whatever the rank is doing.

A rank blocked inside an MPI call never returns to Python to run a Python signal handler, and a
rank in Python code would print a KeyboardInterrupt traceback. So Python's handler only writes
the signal number to a wake-up pipe (done in C, at once), and a watcher thread reads it, runs
``before_exit`` (the Python tracer saves the rank's status there; the PMPI library has saved it
in its own C handler, which hands the signal on to this one) and exits with 128 + the signal,
as a shell reports a job stopped by it.
"""

from __future__ import annotations

import os
import signal
import threading
from typing import Callable

#: How long a signalled rank waits after saving its status before it exits: mpiexec forwards
#: the signal to every rank and SIGKILLs the others as soon as one exits, so each waits a moment
#: for the ranks signalled with it (scheduled later on a loaded machine) to save theirs too.
SIGNAL_GRACE_S = 1.0


def grace() -> None:
    """``before_exit`` of a rank whose status was saved elsewhere (the PMPI library's own
    handler): the wait alone."""
    import time

    time.sleep(SIGNAL_GRACE_S)


def exit_on_signals(before_exit: Callable[[], None] = lambda: None) -> None:
    """Install the wake-up pipe and its watcher (main thread only: nothing is done elsewhere)."""
    if threading.current_thread() is not threading.main_thread():
        return
    rfd, wfd = os.pipe()
    os.set_blocking(wfd, False)

    def watcher() -> None:
        while True:
            data = os.read(rfd, 1)
            if not data:
                return
            signum = data[0]
            if signum in (signal.SIGTERM, signal.SIGINT):
                before_exit()
                os._exit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)
    signal.set_wakeup_fd(wfd, warn_on_full_buffer=False)
    threading.Thread(target=watcher, name="hindsight-signals", daemon=True).start()
