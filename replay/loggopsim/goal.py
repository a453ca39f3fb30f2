"""GOAL, the text form of LogGOPSim's schedules: parse it into a ``Schedule``, format one.

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
The replay reads this language too: a trace imported from GOAL keeps its schedule beside it
(``replay.loggopsim.schedule.sidecar_schedule``).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from hindsight.errors import DataError
from replay.loggopsim.simulator import ANY, CALC, RECV, SEND, Schedule


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


def parse_goal(text: str, source: str = "<schedule>") -> Schedule:
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
                kind, size, peer = SEND, int(m.group("ssize")), int(m.group("dst"))
                if peer >= nranks:
                    raise err(lineno, f"send to rank {peer}, but num_ranks is {nranks}")
                if m.group("tag") == "-1":
                    raise err(lineno, "a send cannot use the wildcard tag -1")
            elif m.group("recv"):
                kind, size, peer = RECV, int(m.group("rsize")), int(m.group("src"))
                if peer >= nranks:
                    raise err(lineno, f"recv from rank {peer}, but num_ranks is {nranks}")
            else:
                kind, size, peer = CALC, int(m.group("ns")), ANY
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
    return Schedule(nranks, i64(rank), i64(kind), np.asarray(size, np.float64), i64(peer),
                       i64(tag), i64(cpu), i64(nic), i64(dep_op), i64(dep_on),
                       np.asarray(dep_start, bool), labs)


def read_goal(path: Path | str) -> Schedule:
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


def format_goal(s: Schedule, header: str = "") -> str:
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
                    (f" nic {int(s.nic[i])}" if s.nic[i] and k != CALC else "")
            if k == CALC:
                out.append(f"l{i - lo}: calc {int(round(s.size[i]))}{extra}")
            elif k == SEND:
                out.append(f"l{i - lo}: send {int(s.size[i])}b to {int(s.peer[i])} "
                           f"tag {int(s.tag[i])}{extra}")
            else:
                out.append(f"l{i - lo}: recv {int(s.size[i])}b from {int(s.peer[i])} "
                           f"tag {int(s.tag[i])}{extra}")
        for a, b, st in by_op[r]:
            out.append(f"l{a - lo} {'irequires' if st else 'requires'} l{b - lo}")
        out.append("}")
    return "\n".join(out) + "\n"
