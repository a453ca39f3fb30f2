"""The project's Python files and their digests, which retire what was compiled or cached from
them: numba's cached kernels (``hindsight.kernel_cache``), the kernels compiled ahead of time
(``hindsight.jit``) and the kernel streams and schedules cached beside a trace (``replay.cache``,
``replay.loggopsim.schedule``). Standard library only.

Every command that runs a kernel needs the project's digest. Reading and hashing its files
(1.6 MB) took 11 ms of each command, and ``hashlib`` loads OpenSSL (3.7 MB of memory, 4 ms).
So each file's sha1 is kept in ``MEMO`` with the file's size and modification time, and is
trusted while both are unchanged (numba's own cache checks its source files so). Only a file
whose stamp changed is read again, and ``hashlib`` is imported only then. A file changed in the
last ``SETTLE_NS`` is not kept (git's rule for "racily clean" files): another change within the
same tick of the file system's clock, of the same size, would keep its stamp. Digests of
digests are ``digest``'s, which needs no ``hashlib``.
"""

from __future__ import annotations

import functools
import json
import os
import threading
import time
import zlib
from pathlib import Path

#: the packages whose files the digest covers: those with kernels and those below them in the
#: layers (docs/extending.md), whose constants and functions a kernel may take in; validation and
#: predict sit above every kernel and have none (tests/test_compiling.py checks it)
PACKAGES = ("hindsight", "instrument", "replay", "apps", "workloads")
ROOT = Path(__file__).resolve().parent.parent
#: each file's size, modification time (ns) and sha1, by its path under ROOT
MEMO = ROOT / "hindsight" / "__pycache__" / "sources.json"
#: a file modified this recently (ns) is hashed but not kept in the memo
SETTLE_NS = 2 * 10**9


def digest(*parts: str | bytes) -> str:
    """16 hex digits that tell ``parts`` apart: zlib's CRC-32 and Adler-32 of them. Not
    cryptographic: it names versions of files and caches, which no one forges."""
    data = b"\0".join(p.encode() if isinstance(p, str) else p for p in parts)
    return f"{zlib.crc32(data):08x}{zlib.adler32(data):08x}"


def _stamps() -> list[tuple[str, int, int]]:
    """(path under ROOT, size, modification time in ns) of each Python file of PACKAGES, by
    path."""
    out = []
    root = len(str(ROOT)) + 1
    for pkg in PACKAGES:
        # (os.walk: a third of Path.rglob's time here)
        for folder, subfolders, names in os.walk(ROOT / pkg):
            subfolders[:] = [d for d in subfolders if d != "__pycache__"]
            for name in names:
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    st = os.stat(path)
                    out.append((path[root:].replace(os.sep, "/"), st.st_size, st.st_mtime_ns))
    out.sort()
    return out


@functools.cache
def file_digests() -> dict[str, str]:
    """The sha1 (hex) of each Python file of PACKAGES, by its path under ROOT (in path order):
    ``MEMO``'s where the file's stamp is the one recorded there, read and hashed otherwise (and
    the memo then written again, where it can be)."""
    try:
        memo = json.loads(MEMO.read_text())
    except (OSError, ValueError):
        memo = {}
    if not isinstance(memo, dict):
        memo = {}
    out: dict[str, str] = {}
    kept: dict[str, list] = {}
    settled = time.time_ns() - SETTLE_NS
    for path, size, mtime in _stamps():
        was = memo.get(path)
        if isinstance(was, list) and len(was) == 3 and was[:2] == [size, mtime]:
            out[path] = was[2]
        else:
            import hashlib

            out[path] = hashlib.sha1((ROOT / path).read_bytes()).hexdigest()
        if mtime < settled:
            kept[path] = [size, mtime, out[path]]
    if kept != memo:
        _write_memo(kept)
    return out


def _write_memo(kept: dict[str, list]) -> None:
    """``kept`` in ``MEMO``, whole or not at all (a file of this process's own, renamed into
    place); a project that cannot be written keeps none."""
    tmp = MEMO.with_name(f".{MEMO.name}.{os.getpid()}-{threading.get_ident()}")
    try:
        MEMO.parent.mkdir(exist_ok=True)
        tmp.write_text(json.dumps(kept))
        os.replace(tmp, MEMO)
    except OSError:
        tmp.unlink(missing_ok=True)


def digest_of(paths: list[str]) -> str:
    """A digest of the files ``paths`` (under ROOT, of ``file_digests``): their paths and
    contents."""
    d = file_digests()
    return digest(*(f"{p}:{d[p]}" for p in paths))


@functools.cache
def project_digest() -> str:
    """A digest of the project's Python files (their paths under the root and their contents)."""
    return digest_of(list(file_digests()))
