"""Trace a compiled (C, C++) MPI program: the PMPI library in instrument/pmpi/, preloaded.

    env = prepare(out, nprocs, "./a.out", args)     # build the library once, ready `out`
    subprocess.run([mpiexec, "-n", P, "./a.out", *args], env={**os.environ, **env})
    finish(out)                                      # what the ranks left, into the manifest
    finalize_manifest(out, launcher_exit=rc)         # seal the ranks (instrument.seal)

`launch` does all of it (as `hindsight collect --program ./a.out` does); with `untraced=True`
(`hindsight collect --untraced`) the ranks take the same start-up barrier and epoch, record
nothing, and `finish` writes the run's wall time into a manifest of its own (`traced: false`,
docs/trace-format.md, "Untraced runs"). The library is built
with the environment's `mpicc` on first use into instrument/pmpi/build/ (one file per source
version and compiler, so an edited source is rebuilt and concurrent builds do not collide).
Every rank writes the raw records the Python tracer writes (hindsight.trace.core.RAW_RECORD)
into the trace's staging area and a status.json at MPI_Finalize; nothing is sealed while the
program runs. docs/native.md says what is traced and what is not.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from hindsight import conditions, system
from hindsight.errors import DataError
from hindsight.trace import core as fc
from instrument import stopped

SOURCE = Path(__file__).resolve().parent / "pmpi" / "hindsight_pmpi.c"
BUILD_DIR = SOURCE.parent / "build"
CFLAGS = ("-O2", "-shared", "-fPIC")
#: Environment variables that change how MPI moves data (as instrument.session records them).
TRANSPORT_PREFIXES = ("MPIR_CVAR_", "MPICH_", "FI_", "UCX_", "HYDRA_", "OMPI_MCA_", "I_MPI_")


class NativeError(DataError):
    """A compiled program that cannot be traced here (no mpicc, the library does not build)."""


def is_native(program: str | os.PathLike) -> bool:
    """Whether `program` is an ELF executable (traced through the PMPI library), not a script."""
    return system.is_elf(program)


def find_mpicc() -> str | None:
    """The mpicc next to this Python (the `mpich` wheel's), else the one on PATH, else None."""
    here = Path(sys.executable).parent / "mpicc"
    return str(here) if here.exists() else shutil.which("mpicc")


def _find_mpiexec() -> str:
    here = Path(sys.executable).parent / "mpiexec"
    found = str(here) if here.exists() else shutil.which("mpiexec")
    if not found:
        raise NativeError("no mpiexec found: install the project (make test) or put an MPI "
                          "launcher on PATH")
    return found


def library() -> Path:
    """The PMPI tracing library, built with mpicc if this source version has not been yet."""
    return compiled(SOURCE, BUILD_DIR, "hindsight_pmpi", CFLAGS, ".so",
                    "tracing a compiled program")


def compiled(source: Path, build_dir: Path, stem: str, flags: tuple[str, ...], suffix: str,
             purpose: str) -> Path:
    """``source`` built with mpicc and ``flags`` into ``build_dir``, once per source version,
    compiler and flags (the key is in the file's name, so an edited source is rebuilt and
    concurrent builds do not collide); a NativeError naming the file when it cannot be.
    ``purpose`` says what needs the compiler when there is none."""
    mpicc = find_mpicc()
    if mpicc is None:
        raise NativeError(f"no mpicc found: {purpose} needs the MPI compiler wrapper of the MPI "
                          "it runs with (the venv's, or one on PATH)")
    key = hashlib.sha256(source.read_bytes() + os.path.realpath(mpicc).encode()
                         + " ".join(flags).encode()).hexdigest()[:12]
    out = build_dir / f"{stem}-{key}{suffix}"
    if out.is_file():
        return out
    try:
        build_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise NativeError(f"cannot create {build_dir}: {exc.strerror or exc}") from None
    tmp = build_dir / f".{out.name}.{os.getpid()}.tmp"
    try:
        done = subprocess.run([mpicc, *flags, "-o", str(tmp), str(source)],
                              capture_output=True, text=True, timeout=300, check=False)
        if done.returncode != 0:
            tail = " ".join(done.stderr.strip().splitlines()[-3:])
            raise NativeError(f"{source}: {mpicc} failed (exit {done.returncode}): {tail}")
        os.replace(tmp, out)          # atomic: a concurrent build renames an identical file
        for old in build_dir.glob(f"{stem}-*{suffix}"):
            if old != out:
                old.unlink(missing_ok=True)   # a running program keeps its mapped copy
    except OSError as exc:
        raise NativeError(f"cannot build {out}: {exc.strerror or exc}") from None
    finally:
        tmp.unlink(missing_ok=True)
    return out


def _base_manifest(run_id: str, nprocs: int, program: str, args: list[str],
                   env: dict[str, str], untraced: bool = False) -> dict[str, Any]:
    """The start of the run's manifest, as instrument.session writes it for a Python program
    (from the ranks' environment `env`); `finish` adds what only the ranks know (hosts, clocks,
    MPI library, end times)."""
    cores = system.usable_cores()
    return {
        "format_version": fc.FORMAT_VERSION,
        "run_id": run_id,
        "traced": not untraced,
        "tracer": "pmpi",
        "app": Path(program).name,
        "paradigm": None,
        "args": {"argv": list(args)},
        "program": str(Path(program).resolve()),
        # (what the replay's rule native_call_costs asks: were the calls made from C?)
        "program_kind": "compiled" if is_native(program) else "python",
        "ranks": nprocs,
        "hosts": {},
        "ranks_per_host": {},
        "cores": cores,
        "oversubscribed": nprocs > (cores or 1),
        "mpi_library": None,
        "mpi_version": None,
        "transport": {k: v for k, v in sorted(env.items())
                      if k.startswith(TRANSPORT_PREFIXES)},
        "transport_name": env.get("HINDSIGHT_TRANSPORT", "default"),
        "clock": {
            "source": "CLOCK_MONOTONIC (clock_gettime, PMPI library)",
            "epoch": "rank 0 clock after the start-up barrier",
            "method": "shared-host-clock on rank 0's host, Cristian min-RTT of 32 per other host",
            "start_offset_ns": [0] * nprocs,
            "start_uncertainty_ns": [0] * nprocs,
        },
        "cpu_sampling": None if untraced else env.get("HINDSIGHT_CPU_SAMPLING", "regions"),
        "start_unix": time.time(),
        "end_unix": None,
        "makespan_ns": None,
        "rank_status": ["running"] * nprocs,
        "complete": False,
        "result_verified": None,
        "communicators": {"0": list(range(nprocs))},
        "git_revision": env.get("HINDSIGHT_GIT_REVISION") or system.git_revision(),
        "events": None,
        "launcher": env.get("HINDSIGHT_LAUNCHER", "mpiexec"),
    }


def prepare(out: Path, nprocs: int, program: str, args: list[str] = (),
            env: dict[str, str] | None = None, untraced: bool = False,
            plain: bool = False) -> dict[str, str]:
    """Build the library, clear `out` of an earlier run, write the run's start
    (`.staging/start.json`, described from `env`, the ranks' environment, default ours); returns
    what to add to that environment (LD_PRELOAD, the trace directory, the run id, the signal
    that asks a rank where it is: instrument.stopped; and with `untraced`
    HINDSIGHT_UNTRACED=1: the same launch, nothing recorded). With `plain` (an untraced
    Python program launched as `python prog.py`, `plain_command`) the environment also gets
    `plain_env`'s PYTHONPATH and the manifest says ``"launch": "plain"``."""
    env = dict(os.environ if env is None else env)
    lib = library()
    out = Path(out)
    run_id = secrets.token_hex(8)
    problem = fc.trace_dir_problem(out)
    if problem:
        raise NativeError(problem)
    try:
        fc.clear_run(out)
        (out / fc.STAGING_DIR).mkdir()
        start = _base_manifest(run_id, nprocs, program, list(args), env, untraced)
        if plain:
            start["launch"] = "plain"
        fc.write_json(out / fc.STAGING_DIR / "start.json", start)
    except OSError as exc:
        raise NativeError(f"cannot prepare the trace directory {out}: "
                          f"{exc.strerror or exc}") from None
    preload = env.get("LD_PRELOAD", "")
    added = {"LD_PRELOAD": f"{lib} {preload}".strip(), "HINDSIGHT_TRACE_DIR": str(out.resolve()),
             "HINDSIGHT_RUN_ID": run_id, "HINDSIGHT_STOP_SIGNAL": str(stopped.SIGNAL)}
    if untraced:
        added["HINDSIGHT_UNTRACED"] = "1"
    if plain:
        added.update(plain_env(env))
    added.update(sanitizer_env(program, env))
    return added


def sanitizer_env(program: str, env: dict[str, str]) -> dict[str, str]:
    """For a program built with AddressSanitizer (it needs libasan): ASAN_OPTIONS with
    ``verify_asan_link_order=0``, since the library preloaded before it makes ASan refuse to
    start ("ASan runtime does not come first"); a user's own setting of it is kept."""
    try:
        with open(program, "rb") as f:
            if f.read(4) != b"\x7fELF":
                return {}
            f.seek(0)
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
                needs = data.find(b"libasan.so") >= 0
    except (OSError, ValueError):
        return {}
    opts = env.get("ASAN_OPTIONS", "")
    if not needs or "verify_asan_link_order" in opts:
        return {}
    return {"ASAN_OPTIONS": ":".join(filter(None, (opts, "verify_asan_link_order=0")))}


#: put first on an untraced Python program's PYTHONPATH: its sitecustomize marks the end
PLAIN_DIR = Path(__file__).resolve().parent / "plain"


def plain_command(program: str, args: list[str] = ()) -> list[str]:
    """A rank's command in the untraced run of a Python program: the program as the user runs
    it, with nothing of hindsight imported before or around it (instrument/plain)."""
    return [sys.executable, str(program), *map(str, args)]


def plain_env(env: dict[str, str]) -> dict[str, str]:
    """The environment `plain_command` runs in, besides `prepare`'s: PLAIN_DIR first on
    PYTHONPATH, so that Python's `site` runs its sitecustomize, which hands the program's end to
    the library (instrument/plain/sitecustomize.py)."""
    before = env.get("PYTHONPATH")
    return {"PYTHONPATH": os.pathsep.join([str(PLAIN_DIR)] + ([before] if before else []))}


def _read_status(stage: Path) -> dict[str, Any]:
    try:
        data = json.loads((stage / "status.json").read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _rank_conditions(st: dict[str, Any]) -> dict[str, Any]:
    """A rank's context switches and share of its run spent waiting for a core, from what its
    status says (as instrument.session measures them: start barrier to end of program)."""
    wait, span = st.get("run_queue_wait_ns"), st.get("conditions_ns")
    share = round(wait / span, 4) if isinstance(wait, int) and isinstance(span, int) \
        and span > 0 else None
    return {"ctx_switches": st.get("ctx_switches"), "run_queue_wait": share}


def finish(out: Path) -> dict[str, Any]:
    """After the run: put into `.staging/start.json` what the ranks left beside their records
    (hosts, clock offsets, the MPI library, each rank's end of program, the machine's
    conditions), so that `finalize_manifest` seals every rank at the right epoch and writes a
    complete manifest. Returns the updated start.

    An untraced run (`prepare(untraced=True)`) has no records to seal: its manifest is written
    here, with `traced: false`, `wall_ns` = `makespan_ns` and each rank's status."""
    out = Path(out)
    start_path = out / fc.STAGING_DIR / "start.json"
    try:
        manifest = json.loads(start_path.read_text())
    except (OSError, ValueError) as exc:
        raise NativeError(f"{start_path}: the run's start is unreadable ({exc})") from None
    n = int(manifest["ranks"])
    untraced = manifest.get("traced") is False
    statuses = [_read_status(fc.staging_dir(out, r)) for r in range(n)]
    # an untraced rank's names file holds its host (and MPI library) only: its status holds its
    # epoch reading
    names = [fc.read_raw_names(fc.staging_dir(out, r)) for r in range(n)]
    epochs = [int(st.get("epoch_ns") or 0) if untraced else nm["epoch_ns"]
              for st, nm in zip(statuses, names)]
    # A rank writes its status at its end only (MPI_Finalize, a signal); a killed run's ranks
    # said their host and MPI library at start-up, in their names files.
    by_host: dict[str, list[int]] = {}
    for r, (st, nm) in enumerate(zip(statuses, names)):
        host = st.get("host") or nm.get("host")
        if host:
            by_host.setdefault(str(host), []).append(r)
    clock = manifest["clock"]
    if epochs[0]:
        # rank 0's offset is 0 by definition: its epoch reading is the run's
        clock["epoch_reading_ns"] = epochs[0]
        clock["start_offset_ns"] = [int(st.get("clock_offset_ns", 0)) for st in statuses]
        clock["start_uncertainty_ns"] = [int(st.get("clock_error_ns", 0)) for st in statuses]
    if len(by_host) <= 1:
        clock["method"] = "shared-host-clock"
    ends = [st.get("program_end_ns") for st in statuses]
    manifest.update(hosts=by_host, ranks_per_host={h: len(rs) for h, rs in by_host.items()},
                    program_end_ns=ends)
    if all(isinstance(e, int) for e in ends):
        manifest["wall_ns"] = max(ends)
    for key in ("mpi_library", "mpi_version"):
        if statuses[0].get(key) or names[0].get(key):
            manifest[key] = statuses[0].get(key) or names[0][key]
    if any(st.get("status") == "complete" for st in statuses):
        manifest["conditions"] = conditions.of_run(
            statuses[0].get("machine_start"), statuses[0].get("machine_end"),
            [_rank_conditions(st) for st in statuses], bool(manifest.get("oversubscribed")))
    try:
        if untraced:
            status = [st.get("status") or "missing" for st in statuses]
            manifest.update(makespan_ns=manifest.get("wall_ns"), rank_status=status,
                            complete=all(s == "complete" for s in status),
                            end_unix=time.time(), events=None)
            fc.write_manifest(out, manifest)
        else:
            fc.write_json(start_path, manifest)
    except OSError as exc:
        raise NativeError(f"cannot write the manifest of {out}: {exc.strerror or exc}") from None
    return manifest


def command(nprocs: int, program: str, args: list[str] = ()) -> list[str]:
    """The launch line `hindsight collect` builds: the program itself under mpiexec (the
    library comes in through the environment, not the command)."""
    return [_find_mpiexec(), "-n", str(nprocs), str(Path(program).resolve()), *map(str, args)]


def launch(nprocs: int, out: Path, program: str, args: list[str] = (),
           env: dict[str, str] | None = None, timeout: float | None = None,
           untraced: bool = False) -> tuple[subprocess.CompletedProcess, dict[str, Any]]:
    """Run `program` traced (or `untraced`: its wall time only) under mpiexec into `out`;
    returns (the finished process with its captured output, the final manifest)."""
    from instrument.seal import finalize_manifest

    full = dict(os.environ if env is None else env)
    full.update(prepare(out, nprocs, program, args, full, untraced))
    done = subprocess.run(command(nprocs, program, args), env=full, capture_output=True,
                          text=True, timeout=timeout, check=False)
    manifest = finish(out)
    if untraced:
        manifest["launcher_exit_code"] = done.returncode
        manifest["complete"] = manifest["complete"] and done.returncode == 0
        fc.write_manifest(out, manifest)
        shutil.rmtree(Path(out) / fc.STAGING_DIR, ignore_errors=True)
        return done, manifest
    return done, finalize_manifest(out, launcher_exit=done.returncode)


if __name__ == "__main__":
    # `python -m instrument.native`: build the library (if needed) and print where it is.
    print(library())
