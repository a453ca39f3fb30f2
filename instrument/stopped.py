"""Where each rank was when `hindsight collect` stopped the run (its --timeout, Ctrl-C).

Nothing is recorded per call for this. At start-up every traced rank opens
``DIR/.staging/rank-NNNNN/stopped_in.txt`` (hindsight.trace.core.STOP_FILE), leaves a handler
on ``SIGNAL`` and then writes its pid there (``pid N``). Before `collect` stops a run it sends
``SIGNAL`` to every rank that wrote its pid (``request``); the handler appends, from inside
the signal, where the rank is:

- an mpi4py program (``install``): Python's faulthandler dumps the stack of every thread. It
  does so from a C signal handler, so a thread blocked inside a C MPI call is dumped too: the
  innermost frames are the tracer's wrappers (instrument/comm.py ...), and the one the program
  called names the MPI call;
- a compiled program (instrument/pmpi/hindsight_pmpi.c): the library keeps the op code of the
  traced call the rank is inside and that call's return address in two static variables (stored
  at the call's entry, the op code cleared at its exit); the handler writes them with write(2)
  (``pmpi op N caller 0xADDR``, for a call it counts but does not record ``pmpi call NAME
  caller 0xADDR``, then ``end``). At start-up the library wrote the address range
  and load bias of every loaded ELF module (``module LO HI BIAS PATH``), so the return address
  becomes a module and an address in it, and addr2line makes it a source line where the program
  has debug information (-g);
- a Python program recorded by the library (``collect --recorder pmpi``): faulthandler's dump,
  chained before the library's handler into the same file (instrument/run.py); the call is the
  library's, the line the program's.

``read`` (run by the sealer, instrument.seal.finalize_manifest) turns a dump into ``{"call":
NAME or None, "where": "FILE:LINE" or None}``; call None means the rank was not inside a traced
MPI call (computing, or in a call the tracer does not wrap).

The rank side (``install``) imports the standard library only (docs/robustness.md, "No observer
effect").
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from hindsight.system import is_elf
from hindsight.trace import core as fc

#: The signal that asks a rank where it is: a real-time signal, which programs rarely use
#: themselves (SIGUSR1/SIGUSR2 often are). The same number reaches compiled programs through
#: HINDSIGHT_STOP_SIGNAL (instrument.native.prepare).
SIGNAL = int(signal.SIGRTMIN) + 4

#: The tracer's modules whose functions the program calls as MPI (the call is the outermost of
#: them on the stack); instrument/run.py only launches the program.
WRAPPER_MODULES = ("comm.py", "completion.py", "untraced.py", "session.py")
#: wrapper functions whose name is not the call's
CALL_NAMES = {"_finalize": "Finalize"}

_open_files: list[Any] = []


def install(stage: Path) -> None:
    """Leave the dump handler in this process and write its pid into ``stage``'s stop file.

    The handler is registered before the pid is written: `collect` signals only ranks whose pid
    it found, and a real-time signal without a handler would kill the process."""
    import faulthandler

    f = open(Path(stage) / fc.STOP_FILE, "w")
    faulthandler.register(SIGNAL, file=f, all_threads=True, chain=False)
    f.write(f"pid {os.getpid()}\n")
    f.flush()
    _open_files.append(f)          # faulthandler writes to its descriptor until the rank exits


# ----------------------------------------------------------------------------------------------
# `hindsight collect`'s side


def _pid(path: Path) -> int | None:
    try:
        with open(path) as f:
            first = f.readline().split()
    except OSError:
        return None
    if len(first) == 2 and first[0] == "pid" and first[1].isdigit():
        return int(first[1])
    return None


def request(trace_dir: Path, running: set[int], wait_s: float = 2.0) -> int:
    """Ask every rank of the run in ``trace_dir`` whose pid is in ``running`` (the processes below
    the launcher, so a pid reused by another process is never signalled) where it is, and wait
    until each has written its answer (at most ``wait_s``). Returns how many were asked."""
    import time

    sizes: dict[Path, int] = {}
    for path in sorted((Path(trace_dir) / fc.STAGING_DIR).glob(f"rank-*/{fc.STOP_FILE}")):
        pid = _pid(path)
        if pid is None or pid not in running:
            continue
        try:
            size = path.stat().st_size
            os.kill(pid, SIGNAL)
        except (OSError, ProcessLookupError):
            continue
        sizes[path] = size
    deadline = time.monotonic() + wait_s
    last: dict[Path, int] = {}
    while sizes and time.monotonic() < deadline:
        time.sleep(0.05)
        now = {}
        for path, before in sizes.items():
            try:
                now[path] = path.stat().st_size
            except OSError:
                now[path] = before
        # answered: the file grew and stopped growing (faulthandler writes line by line)
        if all(n > sizes[p] and last.get(p) == n for p, n in now.items()):
            break
        last = now
    return len(sizes)


# ----------------------------------------------------------------------------------------------
# The sealer's side


def read(stage: Path, program: str | None = None) -> dict[str, Any] | None:
    """Where the rank whose staging folder is ``stage`` was when it was asked (``request``):
    ``{"call": ..., "where": ...}``, or None if it was never asked or did not answer."""
    try:
        text = (Path(stage) / fc.STOP_FILE).read_text(errors="replace")
    except OSError:
        return None
    lines = text.splitlines()[1:]            # after "pid N"
    if not lines:
        return None
    if not any(s.startswith(("module ", "pmpi op ", "pmpi call ")) for s in lines):
        return _read_python(lines, program)
    found = _read_pmpi(lines, program)
    # A Python program recorded by the library (`collect --recorder pmpi`): Python's dump came
    # first (chained handlers), and its line is the program's; the library knows the call.
    python = _read_python(lines, program)
    if found is not None and python is not None and python["where"]:
        found["where"] = python["where"]
    elif found is not None and found["call"] == "Finalize" and (
            python is not None or (program is not None and not is_elf(program))):
        # No frame of the program: the interpreter was finishing, and mpi4py finalizes MPI at
        # its exit (the library's caller is a line of Python's own C sources, not the user's)
        found["where"] = "the program's exit (it had returned or called sys.exit)"
    return found


def _shown(path: str, program: str | None) -> str:
    """A file as the user knows it: relative to the program's folder, else to the working folder,
    when it lies there."""
    p = Path(os.path.abspath(path))
    for base in ([Path(program).resolve().parent] if program else []) + [Path.cwd()]:
        try:
            return str(p.relative_to(base))
        except ValueError:
            continue
    return str(p)


def _library_dirs() -> tuple[str, ...]:
    import sys
    import sysconfig

    paths = sysconfig.get_paths()
    dirs = {paths.get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    dirs |= {os.path.join(p, "lib") for p in (sys.base_prefix, sys.prefix)}
    return tuple(os.path.realpath(d) + os.sep for d in dirs if d)


def _threads(lines: list[str]) -> list[list[tuple[str, int, str]]]:
    """faulthandler's dump as threads, each a list of (file, line, function), innermost first;
    the thread that took the signal first."""
    threads: list[list[tuple[str, int, str]]] = []
    current = None
    for line in lines:
        if line.startswith(("Thread 0x", "Current thread 0x")):
            frames: list[tuple[str, int, str]] = []
            if line.startswith("Current"):
                threads.insert(0, frames)
            else:
                threads.append(frames)
            current = frames
        elif current is not None and line.startswith('  File "'):
            path, _, rest = line[len('  File "'):].rpartition('", line ')
            number, _, func = rest.partition(" in ")
            if path and number.strip().isdigit():
                current.append((path, int(number), func.strip()))
    return [t for t in threads if t]


def _read_python(lines: list[str], program: str | None) -> dict[str, Any] | None:
    here = str(Path(__file__).resolve().parent) + os.sep
    libs = _library_dirs()

    def ours(path: str) -> bool:
        return os.path.realpath(path).startswith(here)

    def users(path: str) -> bool:
        return not path.startswith("<") and not ours(path) and \
            not os.path.realpath(path).startswith(libs)

    def wrapper(frame: tuple[str, int, str]) -> bool:
        return ours(frame[0]) and Path(frame[0]).name in WRAPPER_MODULES

    # The tracer's own thread (the signal watcher of instrument.session) is not the program's.
    threads = [t for t in _threads(lines)
               if not any(ours(f) and fn == "watcher" for f, _, fn in t)]
    if not threads:
        return None
    in_mpi = [t for t in threads if any(wrapper(f) for f in t)]
    main = [t for t in threads if t[-1][2] != "_bootstrap"]
    frames = (in_mpi or main or threads)[0]
    first_user = next((i for i, f in enumerate(frames) if users(f[0])), len(frames))
    calls = [f[2] for f in frames[:first_user] if wrapper(f)]
    call = CALL_NAMES.get(calls[-1], calls[-1]) if calls else None
    where = None
    if first_user < len(frames):
        path, number, _ = frames[first_user]
        where = f"{_shown(path, program)}:{number}"
    return {"call": call, "where": where}


def _read_pmpi(lines: list[str], program: str | None) -> dict[str, Any] | None:
    modules: list[tuple[int, int, int, str]] = []
    op = caller = None
    for line in lines:
        words = line.split(maxsplit=4)
        try:
            if words[:1] == ["module"] and len(words) == 5:
                modules.append((int(words[1], 16), int(words[2], 16), int(words[3], 16),
                                words[4]))
            elif words[:2] == ["pmpi", "op"] and len(words) >= 5:
                op, caller = int(words[2]), int(words[4], 16)
            elif words[:2] == ["pmpi", "call"] and len(words) >= 5:
                op, caller = words[2], int(words[4], 16)      # a counted call, by its name
        except ValueError:
            continue
    if op is None:
        return None                       # asked, but the answer did not arrive
    if op == 0:
        return {"call": None, "where": None}
    if isinstance(op, str):
        call = op
    else:
        call = "Finalize" if op < 0 else (fc.OPS[op] if 0 < op < len(fc.OPS) else str(op))
    return {"call": _pmpi_call_name(call), "where": _symbolize(caller, modules, program)}


def _pmpi_call_name(op: str) -> str:
    # Sendrecv's rows are its two halves; the call is one
    return "Sendrecv" if op.startswith("Sendrecv_") else op


def _symbolize(addr: int, modules: list[tuple[int, int, int, str]],
               program: str | None) -> str | None:
    """``FILE:LINE`` of the call whose return address is ``addr`` (addr2line, from the module's
    debug information), else ``MODULE+0xOFFSET``; None if no module holds it."""
    import shutil
    import subprocess

    for lo, hi, bias, path in modules:
        if lo <= addr < hi:
            break
    else:
        return None
    rel = addr - bias - 1                 # the call instruction ends just before its return
    tool = shutil.which("addr2line")
    if tool and os.path.isfile(path):
        try:
            done = subprocess.run([tool, "-e", path, hex(rel)], capture_output=True, text=True,
                                  timeout=30, check=False)
            out = done.stdout.strip().splitlines()
        except (OSError, subprocess.SubprocessError):
            out = []
        if out and not out[0].startswith("??"):
            file, _, number = out[0].partition(":")
            number = number.split()[0] if number else ""
            if file and number.isdigit() and number != "0":
                return f"{_shown(file, program)}:{number}"
    return f"{Path(path).name}+{hex(rel)}"


# ----------------------------------------------------------------------------------------------
# Saying it


def _ranges(ranks: list[int]) -> str:
    """``0-3,5``"""
    out, start = [], None
    for i, r in enumerate(ranks):
        if start is None:
            start = r
        if i + 1 == len(ranks) or ranks[i + 1] != r + 1:
            out.append(str(start) if start == r else f"{start}-{r}")
            start = None
    return ",".join(out)


def describe(stopped_in: dict[str, Any], most: int = 8) -> list[str]:
    """The manifest's ``stopped_in`` as lines, ranks at the same place together:
    ``ranks 0-3 stopped in Recv at prog.py:12``; at most ``most`` places, then how many more."""
    places: dict[tuple, list[int]] = {}
    for rank, at in stopped_in.items():
        key = (at.get("call"), at.get("where")) if isinstance(at, dict) else None
        places.setdefault(key, []).append(int(rank))
    lines = []
    for key, ranks in sorted(places.items(), key=lambda kv: min(kv[1])):
        who = f"rank{'s' * (len(ranks) > 1)} {_ranges(sorted(ranks))}"
        if key is None:
            lines.append(f"{who} did not say where {'they were' if len(ranks) > 1 else 'it was'}")
            continue
        call, where = key
        at = f" at {where}" if where else ""
        lines.append(f"{who} stopped in {call}{at}" if call
                     else f"{who} stopped outside any traced MPI call{at}")
    if len(lines) > most:
        lines = lines[:most] + [f"... and {len(lines) - most} more places (manifest stopped_in)"]
    return lines
