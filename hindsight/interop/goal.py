"""GOAL schedules, the text input of the LogGOPSim simulator: export, import, parse, write.

Grammar (what LogGOPSim's ``txt2bin`` accepts)::

    num_ranks <P>
    rank <r> {
      [label:] send <n>b to <dst> [tag <t>] [cpu <c>] [nic <k>]
      [label:] recv <n>b from <src|-1> [tag <t|-1>] [cpu <c>] [nic <k>]
      [label:] calc <ns> [cpu <c>]
      <label> requires <label>        # after the other operation completed
      <label> irequires <label>       # after the other operation started
    }

``//`` starts a comment to the end of the line, ``/* ... */`` a block comment; ``-1`` is the
wildcard source or tag; the default tag is 0. Labels are identifiers local to their rank.

Export turns a trace into the schedule the LogGOPSim semantics replays (``replay.loggopsim``:
collectives expanded into the point-to-point messages of their algorithms, compute bursts as
``calc``). Import parses a schedule, simulates it with LogGOPSim's rules to get a timeline, and
writes that as an ordinary trace; the schedule itself is kept next to it (``schedule.goal``) so
``--set semantics=loggopsim`` replays it exactly, dependency graph and all.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from hindsight import trace as tf
from replay import loggopsim as LG
from hindsight.errors import DataError

SIDECAR = "schedule.goal"
# LogGOPSim's own defaults (its simulator.ggo), used when importing without parameters.
LOGGOPSIM_DEFAULTS = {"L": "2500ns", "o": "1500ns", "g": "1000ns", "G": "6ns", "O": "0ns",
                      "S": "65535B"}


class GoalError(DataError, ValueError):
    """A GOAL file that cannot be read; the message names the file, line and problem."""


# ------------------------------------------------------------------------------------------------
# Parsing

_IDENT = r"[A-Za-z][A-Za-z0-9_]*"
_OP_RE = re.compile(
    rf"^(?:(?P<label>{_IDENT})\s*:\s*)?(?:"
    r"(?P<send>send)\s+(?P<ssize>\d+)\s*b\s+to\s+(?P<dst>\d+)"
    r"|(?P<recv>recv)\s+(?P<rsize>\d+)\s*b\s+from\s+(?P<src>-1|\d+)"
    r"|(?P<calc>calc)\s+(?P<ns>\d+))"
    r"(?:\s+tag\s+(?P<tag>-1|\d+))?(?:\s+cpu\s+(?P<cpu>\d+))?(?:\s+nic\s+(?P<nic>\d+))?$")
_DEP_RE = re.compile(rf"^(?P<a>{_IDENT})\s+(?P<how>requires|irequires)\s+(?P<b>{_IDENT})$")
_RANK_RE = re.compile(r"^rank\s+(\d+)\s*\{$")
_NUM_RE = re.compile(r"^num_ranks\s+(\d+)$")


def _strip_comments(text: str) -> list[str]:
    """Lines with comments removed (block comments keep their line breaks, so numbers stay)."""
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    if "/*" in text:
        raise GoalError("unterminated /* comment")
    return [ln.split("//", 1)[0].strip() for ln in text.split("\n")]


def parse_goal(text: str, source: str = "<schedule>") -> LG.Schedule:
    """Parse GOAL text into a Schedule. Raises GoalError naming ``source`` and the line."""
    try:
        lines = _strip_comments(text)
    except GoalError as exc:
        raise GoalError(f"{source}: {exc}") from None
    nranks = None
    cur = None
    ops: dict[int, list[tuple]] = {}
    deps: dict[int, list[tuple]] = {}
    labels: dict[int, dict[str, int]] = {}
    seen_rank_block = False

    def err(lineno: int, msg: str):
        return GoalError(f"{source}:{lineno}: {msg}")

    for lineno, ln in enumerate(lines, 1):
        if not ln:
            continue
        if cur is None:
            if m := _NUM_RE.match(ln):
                if nranks is not None:
                    raise err(lineno, "num_ranks given twice")
                nranks = int(m.group(1))
                if nranks < 1:
                    raise err(lineno, "num_ranks must be at least 1")
                continue
            if m := _RANK_RE.match(ln.replace("{", " {").replace("  {", " {")):
                if nranks is None:
                    raise err(lineno, "'rank' block before 'num_ranks' (not a GOAL schedule?)")
                cur = int(m.group(1))
                if cur >= nranks:
                    raise err(lineno, f"rank {cur} but num_ranks is {nranks}")
                if cur in ops:
                    raise err(lineno, f"rank {cur} defined twice")
                ops[cur], deps[cur], labels[cur] = [], [], {}
                seen_rank_block = True
                continue
            what = "expected 'num_ranks N'" if nranks is None else "expected 'rank N {'"
            raise err(lineno, f"{what}, got '{ln[:60]}'"
                      + (" (not a GOAL schedule?)" if not seen_rank_block else ""))
        if ln == "}":
            cur = None
            continue
        if m := _OP_RE.match(ln):
            if m.group("send"):
                kind, size, peer = LG.SEND, int(m.group("ssize")), int(m.group("dst"))
                if peer >= nranks:
                    raise err(lineno, f"send to rank {peer}, but num_ranks is {nranks}")
                if m.group("tag") == "-1":
                    raise err(lineno, "a send cannot use the wildcard tag -1")
            elif m.group("recv"):
                kind, size, peer = LG.RECV, int(m.group("rsize")), int(m.group("src"))
                if peer >= nranks:
                    raise err(lineno, f"recv from rank {peer}, but num_ranks is {nranks}")
            else:
                kind, size, peer = LG.CALC, int(m.group("ns")), LG.ANY
                if m.group("tag") or m.group("nic"):
                    raise err(lineno, "calc takes only 'cpu'")
            tag = int(m.group("tag")) if m.group("tag") else 0
            if tag >= 2**31:
                raise err(lineno, f"tag {tag} does not fit hindsight's int32 tags")
            idx = len(ops[cur])
            lab = m.group("label")
            if lab:
                if lab in labels[cur]:
                    raise err(lineno, f"label '{lab}' defined twice on rank {cur}")
                labels[cur][lab] = idx
            ops[cur].append((kind, size, peer, tag, int(m.group("cpu") or 0),
                             int(m.group("nic") or 0), lab))
            continue
        if m := _DEP_RE.match(ln):
            deps[cur].append((m.group("a"), m.group("b"), m.group("how") == "irequires", lineno))
            continue
        raise err(lineno, f"cannot parse '{ln[:60]}' (expected send, recv, calc or a "
                  "requires/irequires dependency)")
    if cur is not None:
        raise GoalError(f"{source}: rank {cur} block is not closed (missing '}}')")
    if nranks is None:
        raise GoalError(f"{source}: no 'num_ranks' line (not a GOAL schedule?)")

    rank, kind, size, peer, tag, cpu, nic, labs = [], [], [], [], [], [], [], []
    dep_op, dep_on, dep_start = [], [], []
    base = 0
    for r in range(nranks):
        for j, (k, s, p, t, c, n, lab) in enumerate(ops.get(r, [])):
            rank.append(r), kind.append(k), size.append(s), peer.append(p), tag.append(t)
            cpu.append(c), nic.append(n), labs.append(lab or f"r{r}op{j}")
        for a, b, start, lineno in deps.get(r, []):
            for name in (a, b):
                if name not in labels[r]:
                    raise GoalError(f"{source}:{lineno}: rank {r}: dependency names label "
                                    f"'{name}', which is not defined on this rank")
            dep_op.append(base + labels[r][a])
            dep_on.append(base + labels[r][b])
            dep_start.append(start)
        base += len(ops.get(r, []))
    i64 = lambda x: np.asarray(x, np.int64)  # noqa: E731
    return LG.Schedule(nranks, i64(rank), i64(kind), np.asarray(size, np.float64), i64(peer),
                       i64(tag), i64(cpu), i64(nic), i64(dep_op), i64(dep_on),
                       np.asarray(dep_start, bool), labs)


def read_goal(path: Path | str) -> LG.Schedule:
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise GoalError(f"{path}: cannot read ({exc.strerror})") from None
    if b"\0" in raw[:4096]:
        raise GoalError(f"{path}: binary file, not a GOAL text schedule (a LogGOPSim .bin? "
                        "import the text it was made from)")
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        raise GoalError(f"{path}: not UTF-8 text, not a GOAL schedule") from None
    return parse_goal(text, str(path))


# ------------------------------------------------------------------------------------------------
# Writing


def format_goal(s: LG.Schedule, header: str = "") -> str:
    """GOAL text of a schedule. Labels are ``l<index>`` per rank (unique, valid identifiers)."""
    out = [f"// {ln}" for ln in header.splitlines()]
    out.append(f"num_ranks {s.nranks}")
    off = s.rank_off
    by_op = [[] for _ in range(s.nranks)]
    for a, b, st in zip(s.dep_op.tolist(), s.dep_on.tolist(), s.dep_start.tolist()):
        by_op[int(s.rank[a])].append((a, b, st))
    for r in range(s.nranks):
        lo = int(off[r])
        out.append(f"rank {r} {{")
        for i in range(lo, int(off[r + 1])):
            k = int(s.kind[i])
            extra = (f" cpu {int(s.cpu[i])}" if s.cpu[i] else "") + \
                    (f" nic {int(s.nic[i])}" if s.nic[i] and k != LG.CALC else "")
            if k == LG.CALC:
                out.append(f"l{i - lo}: calc {int(round(s.size[i]))}{extra}")
            elif k == LG.SEND:
                out.append(f"l{i - lo}: send {int(s.size[i])}b to {int(s.peer[i])} "
                           f"tag {int(s.tag[i])}{extra}")
            else:
                out.append(f"l{i - lo}: recv {int(s.size[i])}b from {int(s.peer[i])} "
                           f"tag {int(s.tag[i])}{extra}")
        for a, b, st in by_op[r]:
            out.append(f"l{a - lo} {'irequires' if st else 'requires'} l{b - lo}")
        out.append("}")
    return "\n".join(out) + "\n"


def export_goal(trace_dir: Path | str, out: Path | str, *, compute_scale: float = 1.0,
                algorithms: Mapping[str, str] | None = None) -> LG.Schedule:
    """Write the GOAL schedule of a trace to ``out`` (a trace imported from GOAL gives back its
    schedule)."""
    import replay
    from replay.engine import _scale_array
    trace_dir = Path(trace_dir)
    prep = replay.prepare(trace_dir)
    side = sidecar_schedule(prep)
    if side is not None:
        sched = side
        header = f"hindsight export of {trace_dir} (the schedule it was imported from)"
    else:
        scale = _scale_array(prep, compute_scale, None)
        sched = LG.schedule_from_trace(prep, scale, cpu_time=False, algorithms=algorithms)
        header = (f"hindsight export of {trace_dir} ({prep.nranks} ranks, "
                  f"{sched.nops} operations; collectives as point-to-point messages)")
    Path(out).write_text(format_goal(sched, header))
    return sched


def sidecar_schedule(prep) -> LG.Schedule | None:
    """The GOAL schedule a trace was imported from, if it was (kept as TRACE/schedule.goal)."""
    origin = (prep.manifest or {}).get("origin") or {}
    if origin.get("format") != "goal" or prep.path is None:
        return None
    path = Path(prep.path) / SIDECAR
    if not path.is_file():
        raise GoalError(f"{path}: missing; the manifest says this trace was imported from a GOAL "
                        "schedule kept in that file")
    return read_goal(path)


# ------------------------------------------------------------------------------------------------
# Import: schedule -> simulated timeline -> trace rows


def import_goal(path: Path | str, out: Path | str,
                params: Mapping[str, Any] | list[tuple[str, Any]] | None = None) -> Path:
    """Parse a GOAL schedule, simulate it (LogGOPSim rules, LogGOPSim's default parameters unless
    ``params`` overrides them, hindsight units) and write the timeline as a trace in ``out``."""
    from replay import models as M
    from replay.synthetic import write_trace

    path = Path(path)
    sched = read_goal(path)
    mod = M.get_model("loggps")
    assign = dict(LOGGOPSIM_DEFAULTS)
    assign.update(dict(params or {}))
    values = M.resolve(mod, list(assign.items()))
    try:
        sim = LG.simulate(sched, LG.params_from_values(values, sched.nranks))
    except LG.ScheduleError as exc:
        raise GoalError(f"{path}: {exc}") from None
    ranks = _rows_from_simulation(sched, sim)
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise GoalError(f"{out}: exists and is not empty (choose a new --out)")
    shown = {k: v for k, v in M.resolve(mod, list(assign.items())).items()}
    write_trace(out, ranks, extra_manifest={
        "app": path.stem, "paradigm": None,
        "origin": {"format": "goal", "source": str(path), "schedule": SIDECAR,
                   "timeline": "simulated with LogGOPSim rules",
                   "params_ns": {k: (v if np.isfinite(v) else "inf") if isinstance(v, float)
                                 else v for k, v in shown.items()}}})
    shutil.copyfile(path, out / SIDECAR)
    return out


def _rows_from_simulation(s: LG.Schedule, sim: LG.SimResult) -> list[dict[str, list]]:
    """Linearise each rank's simulated operations into trace rows.

    Sends become Isend and receives Irecv at their simulated start; each request gets a Wait row
    right before the first operation that requires it (or at the end), ending when the operation
    completed; calcs become ``calc`` region rows (the time between MPI rows is compute)."""
    from replay.synthetic import empty_columns

    ranks = []
    off = s.rank_off
    req_deps: dict[int, list[int]] = {}
    for a, b, st in zip(s.dep_op.tolist(), s.dep_on.tolist(), s.dep_start.tolist()):
        if not st:
            req_deps.setdefault(a, []).append(b)
    for r in range(s.nranks):
        c = empty_columns()
        lo, hi = int(off[r]), int(off[r + 1])
        order = sorted(range(lo, hi), key=lambda i: (sim.op_start[i], i))
        # request ids are the operation's index on its rank: a replay of the trace under
        # semantics=loggopsim maps rows back to the schedule's operations through them
        request: dict[int, int] = {}
        waited: set[int] = set()
        busy = 0.0      # end of the last MPI row: MPI calls of one rank never overlap

        def row(op, t0, t1, peer=-1, tag=-1, nbytes=-1, req=-1, region=None, cpu=-1, comm=0):
            c["op"].append(op), c["region"].append(region)
            c["t_start"].append(int(round(t0))), c["t_end"].append(int(round(max(t1, t0))))
            c["cpu_ns"].append(cpu), c["peer"].append(peer), c["tag"].append(tag)
            c["comm"].append(comm), c["nbytes"].append(nbytes), c["request"].append(req)
            c["root"].append(-1)

        def wait(ys):
            """One Wait (Waitall for several) from the end of the last call until the last of
            the operations completed; one row per request, as the collector records them."""
            nonlocal busy
            t0 = busy
            t1 = max([t0] + [float(sim.op_end[y]) for y in ys])
            name = "Wait" if len(ys) == 1 else "Waitall"
            for y in ys:
                m = int(sim.match[y])
                if s.kind[y] == LG.RECV:
                    row(name, t0, t1, int(s.rank[m]), int(s.tag[m]), int(s.size[m]), request[y])
                else:
                    row(name, t0, t1, req=request[y])
                waited.add(y)
            busy = t1

        for i in order:
            ys = [y for y in req_deps.get(i, []) if y in request and y not in waited]
            if ys:
                wait(sorted(set(ys)))
            k = int(s.kind[i])
            t0, t1 = sim.op_start[i], sim.op_end[i]
            if k == LG.CALC:
                row("region", t0, t1, region="calc", cpu=int(round(s.size[i])), comm=-1)
                continue
            t0 = max(t0, busy)
            request[i] = i - lo
            if k == LG.SEND:
                t1 = max(t1, t0)
                row("Isend", t0, t1, int(s.peer[i]), int(s.tag[i]), int(s.size[i]), request[i])
            else:
                src = int(s.peer[i]) if s.peer[i] != LG.ANY else tf.ANY_SOURCE
                tag = int(s.tag[i]) if s.tag[i] != LG.ANY else tf.ANY_TAG
                t1 = t0
                row("Irecv", t0, t1, src, tag, int(s.size[i]), request[i])
            busy = t1
        rest = [y for y in sorted(request) if y not in waited]
        if rest:
            wait(rest)
        ranks.append(c)
    return ranks
