"""What a fresh byte costs on this machine: in a NumPy array, with NumPy's transparent-huge-page
advice (its default) and without it (what hindsight's commands use: ``NUMPY_MADVISE_HUGEPAGE=0``
in ``hindsight.OWN_SETTINGS``); in the page cache, written by one ``write`` of a whole array
(what ``np.save`` does) and by writes of ``replay.cache.WRITE_BLOCK`` bytes (what hindsight's
caches do: ``replay.cache._save_array``).

    python benchmarks/fresh_memory.py [--rounds 5] [--mb 512] [--pause 4]

Each sample is a new process that fills one array of ``--mb`` MiB (every page touched for the
first time) or writes such an array to a new file in this script's temporary directory. The
variants alternate, A B C D A B C D, with ``--pause`` seconds before each sample, so that all
find the machine's free memory in the same state (a virtual machine's kernel reports free
memory to its host after a few seconds). Printed: per variant the median (min-max) of ns per
byte, of the sample's system time, and the ratios; the kernel's THP settings and the load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_CHILD = """
import json, resource, sys, time
import numpy as np
mb, what, block, where = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
n = mb * 2**20 // 8
if what == "array":
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t = time.perf_counter()
    a = np.ones(n)
else:
    a = np.ones(n)
    flat = a.view(np.uint8)
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t = time.perf_counter()
    with open(where, "wb") as fh:
        for off in range(0, len(flat), block):
            fh.write(flat[off:off + block])
wall = time.perf_counter() - t
r1 = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps([wall / a.nbytes * 1e9, r1.ru_stime - r0.ru_stime]))
"""


def _variants(mb: int) -> dict[str, tuple[str, str, int]]:
    """name -> (NUMPY_MADVISE_HUGEPAGE, what is filled, bytes per write)."""
    sys.path.insert(0, str(ROOT))
    from replay.cache import WRITE_BLOCK

    return {"array, huge-page advice (NumPy's default)": ("1", "array", 0),
            "array, ordinary pages (hindsight)": ("0", "array", 0),
            "file, one write of the array (np.save)": ("0", "file", mb << 20),
            f"file, writes of {WRITE_BLOCK >> 10} KiB (hindsight)": ("0", "file", WRITE_BLOCK)}


def _thp() -> str:
    base = Path("/sys/kernel/mm/transparent_hugepage")
    parts = []
    for name in ("enabled", "defrag"):
        try:
            parts.append(f"{name} {(base / name).read_text().strip()}")
        except OSError:
            parts.append(f"{name} unknown")
    return "; ".join(parts)


def _sample(flag: str, what: str, block: int, mb: int, where: Path) -> list[float]:
    env = dict(os.environ, NUMPY_MADVISE_HUGEPAGE=flag)
    where.unlink(missing_ok=True)
    try:
        done = subprocess.run([sys.executable, "-c", _CHILD, str(mb), what, str(block),
                               str(where)], env=env, capture_output=True, text=True,
                              timeout=600)
    finally:
        where.unlink(missing_ok=True)
    if done.returncode:
        raise SystemExit(f"Error: a sample failed: {done.stderr.strip()[-500:]}")
    return json.loads(done.stdout)


def _fmt(xs: list[float], unit: str, digits: int) -> str:
    return (f"{statistics.median(xs):.{digits}f} {unit} "
            f"({min(xs):.{digits}f}-{max(xs):.{digits}f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--mb", type=int, default=512)
    ap.add_argument("--pause", type=float, default=4.0)
    a = ap.parse_args()
    if a.rounds < 1 or a.mb < 8 or a.pause < 0:
        raise SystemExit("Error: --rounds >= 1, --mb >= 8 and --pause >= 0 are needed")
    variants = _variants(a.mb)
    print(f"THP: {_thp()}")
    print(f"load before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    got: dict[str, list[list[float]]] = {v: [] for v in variants}
    with tempfile.TemporaryDirectory(dir=ROOT) as tmp:
        where = Path(tmp) / "sample.bin"
        for _ in range(a.rounds):
            for name, (flag, what, block) in variants.items():
                time.sleep(a.pause)
                got[name].append(_sample(flag, what, block, a.mb, where))
    print(f"load after:  {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{a.mb} MiB a sample, {a.rounds} rounds alternating")
    med = {}
    for name, samples in got.items():
        ns = [s[0] for s in samples]
        med[name] = statistics.median(ns)
        print(f"  {name:44s} {_fmt(ns, 'ns/B', 2)}, system time "
              f"{_fmt([s[1] for s in samples], 's', 3)}")
    names = list(variants)
    print(f"huge-page advice / ordinary pages: {med[names[0]] / med[names[1]]:.2f}x")
    print(f"one write / block writes:          {med[names[2]] / med[names[3]]:.2f}x")


if __name__ == "__main__":
    main()
