"""One line on stderr when numba compiles, so that a cold cache is not a silent minute.

hindsight's kernels are numba functions cached on disk (``cache=True``): the first command that
uses them on a machine, or after the source changed, compiles them, which takes about a minute
on this project's 2-core machine, and nothing else is printed meanwhile. ``announce`` arranges
that the first compilation in the process writes one ``note:`` line. It does not import numba
itself (``hindsight --help`` must not: tests/test_cli_startup.py): a finder on ``sys.meta_path``
waits for numba's import and registers a listener for numba's compile events then (numba's
documented event API, ``numba.core.event``). Standard library only.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from typing import TextIO

NOTE = ("note: compiling hindsight's kernels for this machine (once: later runs load them from "
        "numba's cache); this takes about a minute")


def announce(stream: TextIO | None = None) -> None:
    """Write ``NOTE`` to ``stream`` (stderr) when numba first compiles in this process."""
    stream = stream or sys.stderr
    if "numba" in sys.modules:
        _listen(stream)
    elif not any(isinstance(f, _WhenNumba) for f in sys.meta_path):
        sys.meta_path.insert(0, _WhenNumba(stream))


def _listen(stream: TextIO) -> None:
    from numba.core import event

    class Note(event.Listener):
        said = False

        def on_start(self, ev) -> None:
            if not Note.said:
                Note.said = True
                stream.write(NOTE + "\n")
                stream.flush()

        def on_end(self, ev) -> None:
            pass

    event.register("numba:compile", Note())


class _WhenNumba(importlib.abc.MetaPathFinder):
    """Finds nothing itself: once numba's own loader has run, registers the listener."""

    def __init__(self, stream: TextIO):
        self.stream = stream

    def find_spec(self, name, path=None, target=None):
        if name != "numba":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        real_exec = spec.loader.exec_module
        stream = self.stream

        def exec_module(module) -> None:
            real_exec(module)
            _listen(stream)

        spec.loader.exec_module = exec_module
        return spec
