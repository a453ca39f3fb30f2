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

import codecs
import mmap
import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np

from hindsight import bytetext
from hindsight.bytetext import put_int as _put_int
from hindsight.errors import DataError
from hindsight.jit import njit
from replay.loggopsim.simulator import (ANY, CALC, RECV, SCHEDULE_TYPES, SEND, Schedule,
                                        narrow)


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


class GoalLabels(Sequence):
    """Per operation its GOAL label, or None if it has none: the labels' bytes end to end
    (``buf``) and where each starts (``off``, one more than the operations), turned into a str
    only when asked for."""

    def __init__(self, off: np.ndarray, buf: np.ndarray):
        self.off, self.buf = off, buf

    def __len__(self) -> int:
        return len(self.off) - 1

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        i = range(len(self))[i]
        a, b = int(self.off[i]), int(self.off[i + 1])
        return self.buf[a:b].tobytes().decode("ascii") if b > a else None


def parse_goal(text: str, source: str = "<schedule>") -> Schedule:
    """Parse GOAL text into a Schedule. Raises GoalError naming ``source`` and the line."""
    try:
        raw = text.encode()
    except UnicodeEncodeError:          # lone surrogates: only the regular expressions take them
        return _parse_goal_slow(text, source)
    return _parse(np.frombuffer(raw, np.uint8), source, lambda: text)


def _parse(buf: np.ndarray, source: str, text: Callable[[], str]) -> Schedule:
    """The compiled scanner's schedule; on anything it does not take, the regular expressions'
    (which raise the GoalError naming the line; if they take the text after all, their schedule
    is the answer)."""
    # the scanner's kernels load only for a parse (a replay maps the parsed schedule)
    from replay.loggopsim import goal_parts

    code, nranks, arrays = goal_parts.scan(buf)
    if code:
        return _parse_goal_slow(text(), source)
    rank, kind, size, peer, tag, cpu, nic, dep_op, dep_on, dep_start, lab_off, lab_buf = arrays
    return Schedule(int(nranks), rank, kind, size, peer, tag, cpu, nic, dep_op, dep_on,
                    dep_start, GoalLabels(lab_off, lab_buf))


def _parse_goal_slow(text: str, source: str = "<schedule>") -> Schedule:
    """``parse_goal`` with regular expressions, line by line: the reference the compiled
    scanner (``goal_scan``) must agree with, and the one that words every error."""
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
            for unit in ("cpu", "nic"):
                if m.group(unit) and int(m.group(unit)) >= 2**63:
                    raise err(lineno, f"{unit} {m.group(unit)} is not a plausible index")
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
            cpu.append(c), nic.append(n), labs.append(lab)
        for a, b, start, lineno in deps.get(r, []):
            for name in (a, b):
                if name not in labels[r]:
                    raise GoalError(f"{source}:{lineno}: rank {r}: dependency names label "
                                    f"'{name}', which is not defined on this rank")
            dep_op.append(base + labels[r][a])
            dep_on.append(base + labels[r][b])
            dep_start.append(start)
        base += len(ops.get(r, []))
    # the scanner's types (SCHEDULE_TYPES), where the values fit them
    def i(x, f=None):
        return narrow(np.asarray(x, np.int64), SCHEDULE_TYPES.get(f, np.int32))
    return Schedule(nranks, i(rank, "rank"), i(kind, "kind"), np.asarray(size, np.float64),
                    i(peer, "peer"), i(tag, "tag"), i(cpu, "cpu"), i(nic, "nic"), i(dep_op),
                    i(dep_on), np.asarray(dep_start, bool), labs)


def read_goal(path: Path | str) -> Schedule:
    path = Path(path)
    try:
        buf = _map(path)
    except OSError as exc:
        raise GoalError(f"{path}: cannot read ({exc.strerror})") from None
    if not buf[:4096].all():
        raise GoalError(f"{path}: binary file, not a GOAL text schedule (a LogGOPSim .bin? "
                        "import the text it was made from)")
    if len(buf) and buf.max() >= 0x80 and not _is_utf8(buf):
        raise GoalError(f"{path}: not UTF-8 text, not a GOAL schedule")
    return _parse(buf, str(path), lambda: buf.tobytes().decode())


def _map(path: Path) -> np.ndarray:
    """The file's bytes, memory-mapped (no copy in the process's memory) where possible."""
    with open(path, "rb") as f:
        try:
            return np.frombuffer(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ), np.uint8)
        except (OSError, ValueError):       # empty, a pipe, a file system without mmap
            return np.frombuffer(f.read(), np.uint8)


def _is_utf8(buf: np.ndarray, chunk: int = 1 << 20) -> bool:
    """Whether the bytes decode as UTF-8 (a chunk at a time: no str of the whole file)."""
    dec = codecs.getincrementaldecoder("utf-8")()
    try:
        for a in range(0, len(buf), chunk):
            dec.decode(buf[a:a + chunk].tobytes(), final=False)
        dec.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


# ------------------------------------------------------------------------------------------------
# Writing


def format_goal(s: Schedule, header: str = "") -> str:
    """GOAL text of a schedule. Labels are ``l<index>`` per rank (unique, valid identifiers)."""
    chunks = _body_chunks(s)
    if chunks is None:
        return _format_goal_slow(s, header)
    return _header(header) + b"".join(bytes(c) for c in chunks).decode("ascii")


def write_goal(s: Schedule, out: Path | str, header: str = "") -> None:
    """Write ``format_goal(s, header)`` to ``out`` (UTF-8), formatted a buffer at a time by
    compiled code and streamed, never held whole."""
    chunks = _body_chunks(s)
    with open(out, "wb") as fh:
        if chunks is None:
            fh.write(_format_goal_slow(s, header).encode())
            return
        fh.write(_header(header).encode())
        bytetext.write_overlapped(fh, chunks)


def _header(header: str) -> str:
    return "".join(f"// {ln}\n" for ln in header.splitlines())


def _format_goal_slow(s: Schedule, header: str = "") -> str:
    """``format_goal`` line by line in Python: the reference of the compiled writer, and what
    runs for sizes it cannot write (not finite, or too large for an integer)."""
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


@njit(cache=True, inline="always")
def _put(buf, p, w):
    # a byte loop: a slice assignment costs more than the few bytes of a word
    for k in range(len(w)):
        buf[p + k] = w[k]
    return p + len(w)


def _word(w: str) -> np.ndarray:
    return np.frombuffer(w.encode(), np.uint8).copy()


_S_RANK, _S_OPEN, _S_CLOSE = _word("rank "), _word(" {\n"), _word("}\n")
_S_CALC, _S_SEND, _S_RECV = _word(": calc "), _word(": send "), _word(": recv ")
_S_TO, _S_FROM, _S_TAG = _word("b to "), _word("b from "), _word(" tag ")
_S_CPU, _S_NIC = _word(" cpu "), _word(" nic ")
_S_REQ, _S_IREQ = _word(" requires l"), _word(" irequires l")
_LIMIT = 9.2e18                 # below 2**63: the float sizes that convert to int64


#: the most one line takes: a label and five integers of up to 20 characters, and the words
_LINE = 256


@njit(cache=True)
def _check_and_group(nranks, rank, kind, size, dep_op):
    """ok False if a size does not convert to an integer or an index is out of range; else the
    dependencies grouped by the rank of the operation that waits, in their order (``by_rank``,
    rank r's from ``cnt[r]`` to ``cnt[r + 1]``)."""
    nd = len(dep_op)
    cnt = np.zeros(nranks + 1, np.int64)
    by_rank = np.empty(nd, np.int64)
    for i in range(len(rank)):
        if not 0 <= rank[i] < nranks:
            return cnt, by_rank, False
        x = np.rint(size[i]) if kind[i] == CALC else size[i]
        if not abs(x) < _LIMIT:
            return cnt, by_rank, False
    for k in range(nd):
        if not 0 <= dep_op[k] < len(rank):
            return cnt, by_rank, False
        cnt[rank[dep_op[k]] + 1] += 1
    for r in range(nranks):
        cnt[r + 1] += cnt[r]
    pos = cnt[:nranks].copy()
    for k in range(nd):
        r = rank[dep_op[k]]
        by_rank[pos[r]] = k
        pos[r] += 1
    return cnt, by_rank, True


# Without reference counting (``_nrt=False``; it allocates nothing): counted, the arrays it
# hands its inlined helpers cost an atomic add each at every line.
@njit(cache=True, nogil=True, _nrt=False)
def _write(buf, r, i, j, nranks, rank_off, kind, size, peer, tag, cpu, nic, dep_op, dep_on,
           dep_st, cnt, by_rank):
    """The text of the rank blocks from state (r, i, j) on into ``buf`` while a line still fits:
    rank r, its next operation i (-1: its ``rank r {`` line is next) and its next dependency j
    (``_check_and_group``'s order). Returns the next state and the bytes written."""
    p = 0
    while r < nranks and p + _LINE <= len(buf):
        lo, hi = rank_off[r], rank_off[r + 1]
        if i < 0:
            p = _put(buf, p, _S_RANK)
            p = _put_int(buf, p, r)
            p = _put(buf, p, _S_OPEN)
            i, j = lo, cnt[r]
        elif i < hi:
            k = kind[i]
            x = np.rint(size[i]) if k == CALC else size[i]
            buf[p] = 108
            p = _put_int(buf, p + 1, i - lo)
            if k == CALC:
                p = _put(buf, p, _S_CALC)
                p = _put_int(buf, p, np.int64(x))
            else:
                p = _put(buf, p, _S_SEND if k == SEND else _S_RECV)
                p = _put_int(buf, p, np.int64(x))
                p = _put(buf, p, _S_TO if k == SEND else _S_FROM)
                p = _put_int(buf, p, peer[i])
                p = _put(buf, p, _S_TAG)
                p = _put_int(buf, p, tag[i])
            if cpu[i] != 0:
                p = _put(buf, p, _S_CPU)
                p = _put_int(buf, p, cpu[i])
            if nic[i] != 0 and k != CALC:
                p = _put(buf, p, _S_NIC)
                p = _put_int(buf, p, nic[i])
            buf[p] = 10
            p += 1
            i += 1
        elif j < cnt[r + 1]:
            k = by_rank[j]
            buf[p] = 108
            p = _put_int(buf, p + 1, dep_op[k] - lo)
            p = _put(buf, p, _S_IREQ if dep_st[k] else _S_REQ)
            p = _put_int(buf, p, dep_on[k] - lo)
            buf[p] = 10
            p += 1
            j += 1
        else:
            p = _put(buf, p, _S_CLOSE)
            r, i = r + 1, -1
    return r, i, j, p


def _body_chunks(s: Schedule) -> Iterator[memoryview | bytes] | None:
    """GOAL text (ASCII) from ``num_ranks`` on, in chunks of two buffers used in turn (each
    unchanged until the one after the next is asked for: ``bytetext.write_overlapped``); None
    if a size is not finite or too large for an integer (the caller's formatter then says what
    Python says)."""
    i64 = lambda x: np.ascontiguousarray(x, np.int64)  # noqa: E731
    rank, kind, size = i64(s.rank), i64(s.kind), np.ascontiguousarray(s.size, np.float64)
    dep_op = i64(s.dep_op)
    cnt, by_rank, ok = _check_and_group(int(s.nranks), rank, kind, size, dep_op)
    if not ok:
        return None
    cols = (int(s.nranks), i64(s.rank_off), kind, size, i64(s.peer), i64(s.tag), i64(s.cpu),
            i64(s.nic), dep_op, i64(s.dep_on), np.ascontiguousarray(s.dep_start, bool), cnt,
            by_rank)

    def chunks() -> Iterator[memoryview | bytes]:
        yield f"num_ranks {int(s.nranks)}\n".encode()
        bufs = bytetext.buffers(_LINE)
        r, i, j = 0, -1, 0
        while r < s.nranks:
            buf = bufs[0]
            bufs.reverse()
            r, i, j, p = _write(buf, r, i, j, *cols)
            yield memoryview(buf)[:p]
    return chunks()
