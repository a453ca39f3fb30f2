"""The prepared form of a trace, cached next to it: ``TRACE/.replay-cache/prepared-<fingerprint>/``
holds one ``.npy`` per array (memory-mapped when read back) and ``meta.json``. The leading dot
keeps pyarrow from reading the directory as part of the trace; the fingerprint (of the rank
files' names, sizes and modification times, and of CACHE_VERSION) retires a cache as soon as
the trace or the cache's layout changes."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from hindsight import trace as tf
from replay.instances import Instances
from replay.rma_epochs import EpochOps
from replay.rows import Messages, Rows

CACHE_DIR = tf.REPLAY_CACHE_DIR
CACHE_VERSION = 17

# the prefix of each table's arrays in the cache
_TABLES = (("r_", "rows", Rows), ("m_", "msgs", Messages), ("c_", "coll", Instances),
           ("e_", "rma", EpochOps))


def fingerprint(trace_dir: Path) -> str:
    """16 hex digits that change when a rank file or the manifest (or CACHE_VERSION) does."""
    h = hashlib.sha1(str(CACHE_VERSION).encode())
    for p in sorted(trace_dir.glob("rank-*.parquet")) + [trace_dir / tf.MANIFEST_NAME]:
        st = p.stat()
        h.update(f"{p.name}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()[:16]


def cache_path(trace_dir: Path) -> Path | None:
    """Where the prepared form of ``trace_dir`` is cached (None: its files cannot be read)."""
    try:
        return trace_dir / CACHE_DIR / f"prepared-{fingerprint(trace_dir)}"
    except OSError:
        return None


def save(prep: Any, path: Path) -> None:
    """Write ``prep`` (a ``replay.prepare.Prepared``) as the directory ``path``: one ``.npy``
    per array and ``meta.json``, under a temporary name renamed into place (a reader never sees
    half a cache; of two writers the second finds the directory there and drops its copy).
    Older caches are removed."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(exist_ok=True)
        for old in path.parent.glob("prepared-*"):
            if old.is_dir() and old != path:
                shutil.rmtree(old, ignore_errors=True)
            elif old.is_file():  # the single-file caches of earlier versions
                old.unlink()
        tmp.mkdir()
        arrays = {"trail": prep.trail, "host_of_rank": prep.host_of_rank}
        for prefix, attr, _ in _TABLES:
            table = getattr(prep, attr)
            arrays.update({prefix + f.name: getattr(table, f.name)
                           for f in dataclasses.fields(table)})
        for name, arr in arrays.items():
            np.save(tmp / f"{name}.npy", np.ascontiguousarray(arr))
        meta = dict(nranks=prep.nranks, t0=prep.t0, region_names=prep.region_names,
                    comm_members={str(k): v for k, v in prep.comm_members.items()},
                    problems=prep.problems, notes=prep.notes, version=CACHE_VERSION,
                    measured_makespan_ns=prep.measured_makespan_ns,
                    measured_rank_end_ns=prep.measured_rank_end_ns.tolist(),
                    arrays=sorted(arrays))
        (tmp / "meta.json").write_text(json.dumps(meta))
        os.rename(tmp, path)
    except OSError:
        pass  # a read-only trace directory (or a cache another process just wrote)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def load(path: Path) -> dict[str, Any]:
    """The cached fields of a ``Prepared`` (all but its path and manifest), its arrays
    memory-mapped copy-on-write: nothing is read until used (a warm load costs page-cache
    faults only), and writing to an array never changes the file. Raises on a cache of another
    version or a damaged one."""
    meta = json.loads((path / "meta.json").read_text())
    if meta.get("version") != CACHE_VERSION:
        raise ValueError("old cache")
    z = {name: np.load(path / f"{name}.npy", mmap_mode="c") for name in meta["arrays"]}
    out: dict[str, Any] = {
        attr: cls(**{f.name: z[prefix + f.name] for f in dataclasses.fields(cls)})
        for prefix, attr, cls in _TABLES}
    out.update(nranks=int(meta["nranks"]), region_names=meta["region_names"],
               trail=z["trail"], t0=int(meta["t0"]), host_of_rank=z["host_of_rank"],
               comm_members={int(k): v for k, v in meta["comm_members"].items()},
               problems=list(meta["problems"]), notes=list(meta["notes"]),
               measured=(float(meta["measured_makespan_ns"]),
                         np.array(meta["measured_rank_end_ns"], np.float64)))
    return out
