"""Where numba keeps hindsight's compiled kernels, and when they are stale.

numba's on-disk cache (``cache=True``) checks a cached function against the source file that
defines it, not against the files of the functions it calls and inlines or of the constants it
reads (``replay.rules``, ``replay.loggopsim.codes``, ...): after an upgrade that changed only
those, a replay would run the machine code of the old version. ``ProjectCacheLocator`` is the
first cache locator numba tries once ``hindsight`` is imported (``import hindsight`` has
``hindsight.compiling.fresh_kernels`` put it there when numba is imported, in the process only:
a setting in the environment would reach the programs hindsight starts): for a function
defined in one of the project's packages it is numba's own locator (same folder,
``__pycache__``), with the digest of every Python file of those packages added to the source's
stamp and an ``h`` to the file names (so that a process where it is not in place, an MPI rank or
one that loaded kernels before importing hindsight, keeps its own files instead of overwriting
these back and forth). Any change of
the project's Python files therefore retires every cached kernel, which numba compiles again at
its next use (about a minute for a replay's kernels on this project's 2-core machine). Functions
outside the project are located as numba locates them. The digest reads only the files changed
since the last command (``hindsight.sources``: each file's sha1 is kept with its stamp).
"""

from __future__ import annotations

import functools
from pathlib import Path

from numba.core import caching

from hindsight.sources import PACKAGES, ROOT, project_digest


def locator_classes() -> list | None:
    """numba's list of cache locators, tried in order (None where this numba keeps none: then
    its own locators are used, stale callees and all)."""
    impl = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl", None)
    classes = getattr(impl, "_locator_classes", None)
    return classes if isinstance(classes, list) else None


@functools.cache
def _in_project(py_file: str) -> bool:
    try:
        rel = Path(py_file).resolve().relative_to(ROOT)
    except (OSError, ValueError):
        return False
    return len(rel.parts) > 1 and rel.parts[0] in PACKAGES


class ProjectCacheLocator(caching._CacheLocator):
    """numba's own locator for a function (the first of its defaults that takes it), stamped
    with ``project_digest`` for functions of the project (see the module docstring)."""

    def __init__(self, inner: caching._CacheLocator, project: bool):
        self._inner = inner
        self._project = project

    @classmethod
    def from_function(cls, py_func, py_file):
        for c in locator_classes() or ():
            if c is cls:
                continue
            inner = c.from_function(py_func, py_file)
            if inner is not None:
                return cls(inner, _in_project(py_file))
        return None

    def ensure_cache_path(self):
        self._inner.ensure_cache_path()

    def get_cache_path(self):
        return self._inner.get_cache_path()

    def get_source_stamp(self):
        stamp = self._inner.get_source_stamp()
        return (stamp, project_digest()) if self._project else stamp

    def get_disambiguator(self):
        d = self._inner.get_disambiguator()
        return d + "h" if self._project else d

    def __getattr__(self, name):
        # numba reads some attributes of its locators directly (``_py_file`` in a warning)
        if name == "_inner":
            raise AttributeError(name)
        return getattr(self._inner, name)
