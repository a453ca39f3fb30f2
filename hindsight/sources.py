"""The project's Python files and their digest, which retires what was compiled from them:
numba's cached kernels (``hindsight.kernel_cache``) and the kernels compiled ahead of time
(``hindsight.jit``). Standard library only."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

#: the packages whose files the digest covers: those with kernels and those below them in the
#: layers (docs/extending.md), whose constants and functions a kernel may take in; validation and
#: predict sit above every kernel and have none (tests/test_compiling.py checks it)
PACKAGES = ("hindsight", "instrument", "replay", "apps", "workloads")
ROOT = Path(__file__).resolve().parent.parent


@functools.cache
def project_digest() -> str:
    """sha1 of the project's Python files (their paths under the root and their contents)."""
    h = hashlib.sha1()
    for pkg in PACKAGES:
        for p in sorted((ROOT / pkg).rglob("*.py")):
            h.update(p.relative_to(ROOT).as_posix().encode() + b"\0")
            h.update(p.read_bytes())
    return h.hexdigest()
