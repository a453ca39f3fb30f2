"""What a fresh byte costs on this machine: in a NumPy array, with NumPy's transparent-huge-page
advice (its default) and without it (what hindsight's commands use: ``NUMPY_MADVISE_HUGEPAGE=0``
in ``hindsight.OWN_SETTINGS``); in the page cache, written by ``np.save`` (one write of the whole
array) and by ``replay.cache._save_array`` (writes of ``replay.blockwrite.BLOCK`` bytes without
the GIL, what hindsight's caches use), each alone and on a thread beside a main thread that runs
Python code (a writer that needed the GIL between its writes would wait for it there).

    python benchmarks/fresh_memory.py [--rounds 5] [--mb 512] [--pause 4] [--dir DIR]

Each sample is a new process that fills one array of ``--mb`` MiB (every page touched for the
first time) or writes such an array to a new file in a temporary directory under ``--dir``
(default: the project's folder, so that the file system is the one a trace's cache is written
on). The variants alternate, their order rotated every round, with ``--pause`` seconds before
each sample, so that all find the machine's free memory in the same state (a virtual machine's
kernel reports free memory to its host after a few seconds). Printed: per variant the median
(min-max) of ns per byte and of the sample's system time, and the ratios; the kernel, the file
system, the THP settings and the load.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_CHILD = """
import json, resource, sys, threading, time
from pathlib import Path
import numpy as np
sys.path.insert(0, sys.argv[5])
from replay.cache import _save_array
mb, what, busy, where = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "1", sys.argv[4]
n = mb * 2**20 // 8
a = None if what == "array" else np.ones(n)
write = {"np.save": lambda: np.save(where, a), "blocks": lambda: _save_array(where, a)}
_save_array(Path(where), np.ones(1))       # (its compiled loop loaded before the timing)
r0 = resource.getrusage(resource.RUSAGE_SELF)
t = time.perf_counter()
if what == "array":
    a = np.ones(n)
elif not busy:
    write[what]()
else:
    done = threading.Event()
    th = threading.Thread(target=lambda: (write[what](), done.set()))
    th.start()
    k = 0
    while not done.is_set():        # Python code holding the GIL, as a computing thread does
        k += 1
    th.join()
wall = time.perf_counter() - t
r1 = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps([wall / a.nbytes * 1e9, r1.ru_stime - r0.ru_stime]))
"""


def _variants() -> dict[str, tuple[str, str, str]]:
    """name -> (NUMPY_MADVISE_HUGEPAGE, what is filled, whether Python runs beside)."""
    sys.path.insert(0, str(ROOT))
    from replay.blockwrite import BLOCK as WRITE_BLOCK

    blocks = f"file, writes of {WRITE_BLOCK >> 10} KiB (hindsight)"
    return {"array, huge-page advice (NumPy's default)": ("1", "array", "0"),
            "array, ordinary pages (hindsight)": ("0", "array", "0"),
            "file, one write of the array (np.save)": ("0", "np.save", "0"),
            blocks: ("0", "blocks", "0"),
            "file, np.save, Python running beside": ("0", "np.save", "1"),
            f"{blocks.split(' (')[0]}, Python running beside": ("0", "blocks", "1")}


def _thp() -> str:
    base = Path("/sys/kernel/mm/transparent_hugepage")
    parts = []
    for name in ("enabled", "defrag"):
        try:
            parts.append(f"{name} {(base / name).read_text().strip()}")
        except OSError:
            parts.append(f"{name} unknown")
    return "; ".join(parts)


def _sample(flag: str, what: str, busy: str, mb: int, where: Path) -> list[float]:
    env = dict(os.environ, NUMPY_MADVISE_HUGEPAGE=flag)
    where.unlink(missing_ok=True)
    try:
        done = subprocess.run([sys.executable, "-c", _CHILD, str(mb), what, busy, str(where),
                               str(ROOT)], env=env, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        raise SystemExit("Error: a sample took more than 600 s") from None
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
    ap.add_argument("--dir", type=Path, default=ROOT)
    a = ap.parse_args()
    if a.rounds < 1 or a.mb < 8 or a.pause < 0:
        raise SystemExit("Error: --rounds >= 1, --mb >= 8 and --pause >= 0 are needed")
    if not a.dir.is_dir():
        raise SystemExit(f"Error: --dir {a.dir}: not a directory")
    variants = _variants()
    fs = subprocess.run(["findmnt", "-n", "-o", "FSTYPE", "-T", str(a.dir)],
                        capture_output=True, text=True).stdout.strip() or "unknown"
    print(f"kernel {platform.release()}; file system {fs}; THP: {_thp()}")
    print(f"load before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    got: dict[str, list[list[float]]] = {v: [] for v in variants}
    names = list(variants)
    try:
        with tempfile.TemporaryDirectory(prefix="fresh-memory-", dir=a.dir) as tmp:
            where = Path(tmp) / "sample.npy"
            for r in range(a.rounds):
                for name in names[r % len(names):] + names[:r % len(names)]:
                    time.sleep(a.pause)
                    got[name].append(_sample(*variants[name], a.mb, where))
    except KeyboardInterrupt:
        raise SystemExit("Error: interrupted") from None
    print(f"load after:  {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{a.mb} MiB a sample, {a.rounds} rounds alternating")
    med = {}
    for name, samples in got.items():
        ns = [x[0] for x in samples]
        med[name] = statistics.median(ns)
        print(f"  {name:46s} {_fmt(ns, 'ns/B', 2)}, system time "
              f"{_fmt([x[1] for x in samples], 's', 3)}")
    print(f"huge-page advice / ordinary pages:            {med[names[0]] / med[names[1]]:.2f}x")
    print(f"one write / block writes:                     {med[names[2]] / med[names[3]]:.2f}x")
    print(f"the same with Python running beside:          {med[names[4]] / med[names[5]]:.2f}x")


if __name__ == "__main__":
    main()
