"""`hindsight trace check`: the invariants of docs/trace-format.md, one readable line per problem.

A trace that cannot be read at all is an error (``TraceError``: one ``Error:`` line on stderr,
exit 1); the problems of a readable trace are the command's output (stdout, exit 1)."""

from __future__ import annotations

import contextlib
import json
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

import numpy as np

from hindsight import sortedsets
from hindsight import trace as tf
from hindsight.info import untraced_text
from hindsight.system import release_freed_memory
from replay.matching import match_messages

MAX_LINES_PER_KIND = 10


def untraced_problem(trace_dir: Path | str, manifest: dict[str, Any]) -> str:
    """The check's problem for a trace whose recorder counted calls it did not record
    (manifest ``untraced_calls``)."""
    return (f"{Path(trace_dir) / tf.MANIFEST_NAME}: traffic incomplete: "
            f"{untraced_text(manifest['untraced_calls'])} not traced; replay leaves them out "
            "(docs/trace-format.md, \"What is not traced\")")


def check_trace(trace_dir: Path | str, window: int | None = None) -> list[str]:
    """Every problem found, as lines; an empty list means complete and consistent. A trace that
    cannot be read at all is one problem line here (``find_problems`` raises instead)."""
    try:
        return find_problems(trace_dir, window)
    except tf.UntracedRunError:
        raise
    except tf.TraceError as exc:
        return [str(exc)]


def check_result(trace_dir: Path | str, window: int | None = None) -> dict[str, Any]:
    """`hindsight trace check --json`'s document: ``{"trace": path, "ok": bool, "problems":
    [lines]}``. Raises ``TraceError`` (a ``DataError``: one ``Error:`` line, exit 1) when the
    trace cannot be read at all; problems found in a readable trace are in ``problems``."""
    problems = find_problems(trace_dir, window)
    return {"trace": str(trace_dir), "ok": not problems, "problems": problems}


def format_check(result: dict[str, Any], as_json: bool = False) -> str:
    """What `hindsight trace check` prints on stdout: the problems, one a line, or
    ``<trace>: ok``; with ``as_json`` the document of ``check_result``."""
    if as_json:
        return json.dumps(result, indent=2)
    return "\n".join(result["problems"]) if result["problems"] else f"{result['trace']}: ok"


def find_problems(trace_dir: Path | str, window: int | None = None) -> list[str]:
    """Every problem of a readable trace, as lines; raises ``TraceError`` if it cannot be read.
    With ``window`` the trace is streamed (``stream_problems``)."""
    if window is not None:
        return stream_problems(trace_dir, window)
    trace_dir = Path(trace_dir)
    return _column_problems(trace_dir, tf.read_columns(trace_dir))[0]


def check_and_prepare(trace_dir: Path | str,
                      unmatched: Callable[[list[str]], None] | None = None) -> list[str]:
    """``check_trace`` of a trace just written (an import's); when it finds no problem, the
    trace's prepared form is also cached beside it (``replay.prepare.cache_prepared``), made
    from the check's own read of the rows and its message matching: the first replay then
    finds it, as it finds what an earlier replay cached, instead of reading and matching the
    rows a second time. ``unmatched`` is called with the matching's own problems as soon as
    it has them (an importer raises its format's error there)."""
    from replay.prepare import cache_prepared, stage_messages, stage_prepared

    trace_dir = Path(trace_dir)
    # The CPU times and regions, which no check reads, are read after the checks, for the
    # preparing: 10 bytes a row less while the matching runs (the import's peak but one).
    later = ["cpu_ns", "region"]
    try:
        trace = tf.read_columns(trace_dir, [c for c in tf.COLUMNS if c not in later])
    except tf.UntracedRunError:
        raise
    except tf.TraceError as exc:
        return [str(exc)]
    # The cache of the prepared form is written while the checks run: the columns it keeps as
    # read at once, the messages once matched (a writer beside the matching, on the core the
    # row checks leave: at 8 M rows 0.3 s less of writing after the preparing). A problem
    # abandons it.
    staged = stage_prepared(trace) if trace.complete else None
    with staged or contextlib.nullcontext():

        def matched_now(matched: tuple) -> None:
            if unmatched is not None:
                unmatched(matched[1])
            if staged is not None and not matched[1]:
                stage_messages(staged, matched[0])

        problems, matched = _column_problems(trace_dir, trace, matched_now)
        if problems or matched is None or not trace.complete:
            return problems
        # the request ids served the check's matching only: freed before the preparing's
        # per-row arrays are made (8 bytes a row at the import's peak)
        del trace.arrays["request"]
        # The checks' and the matching's freed temporaries, kept by glibc for reuse, are
        # given back: the next phase's arrays are of other sizes, so they came on top of them
        # (some 45 bytes a row at the import's peak).
        release_freed_memory()
        try:
            rest = tf.read_columns(trace_dir, later)
        except tf.TraceError as exc:        # (the files were read a moment ago)
            return [str(exc)]
        trace.arrays.update(rest.arrays)
        trace.region_names = rest.region_names
        del rest
        release_freed_memory()          # (what decoding them left)
        cache_prepared(trace, matched, own=True, staged=staged)
    return problems


def _column_problems(trace_dir: Path, trace: tf.Columns,
                     matched_now: Callable[[tuple], None] | None = None
                     ) -> tuple[list[str], Any]:
    """``find_problems`` of a trace read as ``trace``, and the message matching it made
    (``match_messages``' answer on the rows in file order; None when the row checks did not
    run). ``unmatched``: see ``check_and_prepare``."""
    problems, stop = _header_problems(trace_dir, trace.manifest, trace.sources)
    if stop:
        return problems, None
    cols = trace.arrays
    ops = cols["op"]           # codes into tf.OPS, whatever each file's dictionary
    files = {s.rank: (s.files[0] if s.files else trace_dir) for s in trace.sources}
    complete = {s.rank for s in trace.sources if s.complete}

    def row_checks() -> list[str]:
        found = (_check_counts(trace.manifest, files, complete,
                               dict(enumerate(np.bincount(cols["rank"],
                                                          minlength=len(files)).tolist())))
                 + _capped(_check_order(cols, ops, files))
                 + _capped(_check_send_requests(cols, ops, files, complete))
                 + _capped(_check_collectives(cols, ops, trace.manifest, files))
                 + _capped(_check_members(cols, trace.manifest)))
        # this thread's freed temporaries, which glibc keeps in the thread's own arena where
        # the matching's allocations cannot reuse them, are handed back before its peak
        release_freed_memory()
        return found

    # The row checks run on a second core while the matching runs: they read the columns only,
    # mostly in NumPy and compiled passes that let go of the GIL (an import's 8 M rows: 0.12 s
    # of checks beside 0.4 s of matching; the check's peak 50-100 MB higher, below the
    # preparing's that follows).
    with ThreadPoolExecutor(1) as pool:
        rows = pool.submit(row_checks)
        matched = match_messages(cols)
        if matched_now is not None:
            matched_now(matched)
        problems += rows.result()
    problems += _capped(_check_matching(cols, files, matched=matched))
    problems += _check_epochs(cols, ops, trace_dir)
    return problems, matched


def _header_problems(trace_dir: Path, manifest: dict, sources: list) -> tuple[list[str], bool]:
    """The problems the manifest and the rank files' footers show, and whether the row checks
    are to be skipped (a rank called MPI from two threads at once: its rows end there)."""
    problems: list[str] = []
    concurrent = manifest.get("concurrent_mpi") or {}
    for src in sources:
        problems.extend(src.problems)
        if str(src.rank) in concurrent and src.status == tf.CONCURRENT_STATUS:
            continue                    # said once below, with the cause
        if not src.complete:
            where = trace_dir / tf.rank_file_name(src.rank)
            if where in src.files:
                held = f"the file holds its {src.metadata.get('events', '?')} events up to then"
            elif src.files:
                held = (f"its records staged in {tf.STAGING_DIR}/ are readable, not sealed "
                        f"(`hindsight trace seal {trace_dir}` seals them)")
            else:
                held = "no data was saved"
            if src.status == tf.REMOVED:
                problems.append(f"{where}: missing, although the manifest says rank {src.rank} "
                                "finished (the file was removed or moved after the run)")
                continue
            problems.append(f"{where}: rank {src.rank} did not finish (status {src.status}); "
                            f"{held}")
    text = tf.concurrent_text(manifest)
    if text:
        # Its rows end at the first overlap: the traffic after it is missing, so every message
        # and collective check would only repeat that.
        problems.append(f"{trace_dir / tf.MANIFEST_NAME}: {text}: its recording stopped there, "
                        "so the trace holds its calls up to then only (the message and "
                        "collective checks are not run)")
    if not manifest.get("complete") and all(s.complete for s in sources):
        problems.append(f"{trace_dir / tf.MANIFEST_NAME}: manifest says the run is incomplete")
    status = manifest.get("rank_status") or []
    for src in sources:
        if src.complete and src.rank < len(status) and status[src.rank] != "complete":
            problems.append(f"{trace_dir / tf.MANIFEST_NAME}: rank {src.rank} is "
                            f"'{status[src.rank]}' in the manifest but its file is complete")
    if manifest.get("untraced_calls"):
        problems.append(untraced_problem(trace_dir, manifest))
    for rank, text2 in tf.rank_errors(manifest):
        problems.append(f"{trace_dir / tf.MANIFEST_NAME}: rank {rank} raised: {text2}")
    if manifest.get("result_verified") is False:
        problems.append(f"{trace_dir / tf.MANIFEST_NAME}: the application's result was wrong "
                        "(result_verified false)")
    return problems, bool(text)


def stream_problems(trace_dir: Path | str, window: int) -> list[str]:
    """``find_problems`` of a complete trace read ``window`` rows per rank at a time: segment by
    segment between consistent cuts (``replay.segments``; any message may cross a cut), each
    check run on each segment and carried across (sequence numbers, the last call of each rank,
    each communicator's collective count). The same lines as ``find_problems`` on a trace that
    has none; a problem that leaves no consistent cut after it (a receive never sent, members
    of a collective that disagree) is reported where the segmenting stops, with a line saying
    the rest was not checked."""
    from replay.errors import ReplayError
    from replay.budget import max_window
    from replay.segments import NotStreamable, segments

    trace_dir = Path(trace_dir)
    manifest, sources = tf.open_trace(trace_dir, allow_partial=True)
    problems, stop = _header_problems(trace_dir, manifest, sources)
    if stop:
        return problems
    if not all(s.complete for s in sources):
        return problems + [f"{trace_dir}: an incomplete trace is not streamed: its rows were "
                           "not checked (they are, in memory, without --window)"]
    files = {s.rank: (s.files[0] if s.files else trace_dir) for s in sources}
    complete = {s.rank for s in sources}
    found: dict[str, list[str]] = defaultdict(list)
    state = _OrderState()
    coll_seen: dict[int, int] = defaultdict(int)
    members_said: set[int] = set()
    rows = np.zeros(len(files), np.int64)
    try:
        for seg in segments(trace_dir, window, crossing="all", max_window=max_window(manifest)):
            cols, real = seg.cols.arrays, ~seg.stand_in
            # (a segment without stand-ins, most of them, is checked as it is: no copy)
            own = cols if real.all() else {k: v[real] for k, v in cols.items()}
            rows += np.bincount(own["rank"], minlength=len(files))[:len(files)]
            ops = own["op"]
            found["order"] += _check_order(own, ops, files, state)
            found["requests"] += _check_send_requests(own, ops, files, complete)
            found["collectives"] += _check_collectives(own, ops, manifest, files, coll_seen)
            found["members"] += _check_members(own, manifest, members_said)
            found["matching"] += _check_matching(cols, files, seg.later)
    except NotStreamable as exc:
        raise tf.TraceError(str(exc)) from None
    except ReplayError as exc:
        text = str(exc) if str(exc).startswith(str(trace_dir)) else f"{trace_dir}: {exc}"
        found["stopped"].append(f"{text}; the rows after it were not checked")
    if not found["stopped"]:    # (the counts of a check that stopped are not the files')
        problems += _check_counts(manifest, files, complete, dict(enumerate(rows.tolist())))
    for kind in ("order", "requests", "collectives", "members", "matching", "stopped"):
        # (a problem every segment sees, such as a communicator without members, once)
        problems += _capped(list(dict.fromkeys(found[kind])))
    return problems


def _check_counts(manifest: dict, files: dict, complete: set[int],
                  rows: dict[int, int]) -> list[str]:
    """Each complete rank's file holds the events the manifest counted for it (``rows``: the
    rows read per rank; a rank missing from it is not judged): rows lost or added after the
    run are named, whatever else they shift."""
    counts = manifest.get("events")
    if not isinstance(counts, list):
        return []
    out = []
    for r in sorted(complete):
        said = counts[r] if r < len(counts) else None
        n = rows.get(r)
        if isinstance(said, int) and r in files and n is not None and n != said:
            out.append(f"{files[r]}: holds {n} events, the manifest counted {said} for rank {r} "
                       "(rows were lost or added after the run)")
    return out


def _name(code: int) -> str:
    return tf.OPS[code] if code >= 0 else "?"


def _capped(lines: list[str]) -> list[str]:
    if len(lines) <= MAX_LINES_PER_KIND:
        return lines
    return lines[:MAX_LINES_PER_KIND] + [f"... and {len(lines) - MAX_LINES_PER_KIND} more like "
                                         "the above"]


def _rows_by_rank(rank: np.ndarray):
    """(rank, its row numbers) for each rank present, in rank order: slices of the rows when
    they come grouped by rank (files read in rank order), else a search per rank."""
    if len(rank) and bool(np.all(rank[1:] >= rank[:-1])):
        cuts = np.flatnonzero(rank[1:] != rank[:-1]) + 1
        for lo, hi in zip([0, *cuts.tolist()], [*cuts.tolist(), len(rank)]):
            yield rank[lo], np.arange(lo, hi)
        return
    for r in sortedsets.unique(rank):
        yield r, np.flatnonzero(rank == r)


class _OrderState:
    """What the order check carries from one segment of a streamed check to the next: per rank
    the next sequence number, and the times, seq and op of its last MPI row."""

    def __init__(self):
        self.next_seq: dict[int, int] = {}
        self.last: dict[int, tuple[int, int, int, int]] = {}


def _check_order(cols, ops, files, state: _OrderState | None = None) -> list[str]:
    out = []
    rank, seq, t0, t1 = cols["rank"], cols["seq"], cols["t_start"], cols["t_end"]
    bad = np.flatnonzero(t1 < t0)
    for i in bad[:MAX_LINES_PER_KIND + 1]:
        out.append(f"{files[rank[i]]}: seq {seq[i]}: t_end {t1[i]} is before t_start {t0[i]}")
    neg = np.flatnonzero(t0 < 0)
    for i in neg[:MAX_LINES_PER_KIND + 1]:
        out.append(f"{files[rank[i]]}: seq {seq[i]}: negative timestamp {t0[i]}")
    is_mpi = ops != tf.OP_CODE["region"]
    for r, sel in _rows_by_rank(rank):
        r = int(r)
        base = state.next_seq.get(r, 0) if state is not None else 0
        if state is not None and base < 0:
            continue                    # said in an earlier segment
        expected = base + np.arange(len(sel))
        if not np.array_equal(seq[sel], expected):
            first = int(np.flatnonzero(seq[sel] != expected)[0])
            out.append(f"{files[r]}: seq is not 0..n-1 in file order (row {base + first} has "
                       f"seq {seq[sel][first]})")
            if state is not None:
                state.next_seq[r] = -1
            continue
        m = sel[is_mpi[sel]]
        a0, a1, aseq, aop = t0[m], t1[m], seq[m], ops[m]
        if state is not None:
            if r in state.last and len(m):     # the last call of the segment before
                p = state.last[r]
                a0, a1 = np.concatenate([[p[0]], a0]), np.concatenate([[p[1]], a1])
                aseq, aop = np.concatenate([[p[2]], aseq]), np.concatenate([[p[3]], aop])
            state.next_seq[r] = base + len(sel)
            if len(m):
                state.last[r] = (int(t0[m[-1]]), int(t1[m[-1]]), int(seq[m[-1]]),
                                 int(ops[m[-1]]))
        if len(a0) < 2:
            continue
        same_call = (a0[1:] == a0[:-1]) & (a1[1:] == a1[:-1])
        overlap = (a0[1:] < a1[:-1]) & ~same_call
        for k in np.flatnonzero(overlap)[:MAX_LINES_PER_KIND + 1]:
            out.append(f"{files[r]}: seq {aseq[k + 1]} ({_name(aop[k + 1])}) starts before "
                       f"seq {aseq[k]} ({_name(aop[k])}) ended: MPI calls of one rank "
                       "overlap")
    return out


def _check_send_requests(cols, ops, files, complete_ranks: set[int]) -> list[str]:
    """A rank that finished must have completed every non-blocking send and collective it
    posted, or freed it (a send: MPI_Request_free of an active send is legal, the send
    completes on its own); the other request problems, receives included, are reported by the
    matching. Freeing a non-blocking collective's request is erroneous (MPI 4.0 §6.12)."""
    req, rank, seq = cols["request"], cols["rank"], cols["seq"]
    open_, freed = _open_requests(ops, req, rank, complete_ranks)
    out = [f"{files[rank[i]]}: seq {seq[i]}: {_name(ops[i])} request {req[i]} is never completed"
           for i in open_]
    for i, post in zip(freed.tolist(), _first_posts(ops, req, rank, freed).tolist()):
        out.append(f"{files[rank[i]]}: seq {seq[i]}: Request_free frees request {req[i]} of "
                   f"{_name(ops[post])} (seq {seq[post]}): freeing a non-blocking collective's "
                   "request is erroneous MPI (MPI 4.0 §6.12)")
    return out


def _first_posts(ops: np.ndarray, req: np.ndarray, rank: np.ndarray,
                 rows: np.ndarray) -> np.ndarray:
    """For each of ``rows``, the first row posting a non-blocking collective with its (rank,
    request id): one sort of the posts' keys, and a binary search each."""
    if not len(rows):
        return rows
    posts = np.flatnonzero(tf.op_mask(ops, tf.NONBLOCKING_COLLECTIVE_OPS) & (req >= 0))
    kp, kr = _pair_keys(rank, req, posts, rows)
    uniq, first = np.unique(kp, return_index=True)
    return posts[first[np.searchsorted(uniq, kr)]]


def _open_requests(ops: np.ndarray, req: np.ndarray, rank: np.ndarray,
                   complete_ranks: set[int]) -> tuple[np.ndarray, np.ndarray]:
    """The rows of ``_check_send_requests``' two problems: non-blocking sends and collectives
    never completed nor freed on a complete rank, and Request_free rows freeing a non-blocking
    collective's request; each in row order. A request is (rank, request id)."""
    from hindsight.trace import rowscan
    from hindsight.trace.oplut import op_lut

    posted = tf.NONBLOCKING_SEND_OPS | tf.NONBLOCKING_COLLECTIVE_OPS
    ends = tf.COMPLETION_OPS | tf.FREE_OPS
    lo, hi = (int(x) for x in rowscan.id_range(req))
    width = max(hi - lo + 1, 1)
    nranks = int(rank.max()) + 1 if len(rank) else 0
    if nranks * width <= 4 * len(req) + (1 << 16):
        # request ids numbered per rank (what tracers record): a byte of flags per request
        complete = np.zeros(nranks, bool)
        complete[[r for r in complete_ranks if r < nranks]] = True
        return rowscan.open_requests(
            ops, req, rank, op_lut(posted), op_lut(tf.NONBLOCKING_COLLECTIVE_OPS), op_lut(ends),
            op_lut(tf.FREE_OPS), complete, lo, width)
    # sparse ids (addresses, 64-bit handles): sorted lookups of (rank, id) pairs
    posts = np.flatnonzero(tf.op_mask(ops, posted) & (req >= 0))
    done = np.flatnonzero(tf.op_mask(ops, ends) & (req >= 0))
    open_ = posts[~_pairs_in(rank, req, posts, done)]
    open_ = open_[np.isin(rank[open_], list(complete_ranks))]
    freed = done[tf.op_mask(ops[done], tf.FREE_OPS)]
    colls = posts[tf.op_mask(ops[posts], tf.NONBLOCKING_COLLECTIVE_OPS)]
    return open_, freed[_pairs_in(rank, req, freed, colls)]


def _pair_keys(rank: np.ndarray, req: np.ndarray, *row_sets: np.ndarray) -> list[np.ndarray]:
    """For each of ``row_sets``, its rows' (rank, request id) as int64 keys that compare as the
    pairs do: ``rank · n + c``, c numbering the n distinct ids of all the sets in order (a key
    ``rank · width + id`` would wrap for ids of 64 bits; records of two fields sort 20x
    slower). ``np.unique`` with ``return_inverse`` sorts (docs/extending.md)."""
    ids, code = np.unique(np.concatenate([req[r] for r in row_sets]), return_inverse=True)
    n = max(len(ids), 1)
    at = np.cumsum([0] + [len(r) for r in row_sets])
    return [rank[r].astype(np.int64) * n + code[a:b] for r, a, b in zip(row_sets, at, at[1:])]


def _pairs_in(rank: np.ndarray, req: np.ndarray, rows: np.ndarray,
              table: np.ndarray) -> np.ndarray:
    """Whether each of ``rows``' (rank, request id) is one of ``table``'s rows'."""
    want, have = _pair_keys(rank, req, rows, table)
    return sortedsets.contains(sortedsets.unique(have), want)


def _check_collectives(cols, ops, manifest, files,
                       seen: dict[int, int] | None = None) -> list[str]:
    """Every member of a communicator makes the same sequence of collectives (op and root).
    ``seen`` (a streamed check): per communicator, the collectives of the segments before."""
    out = []
    sel = np.flatnonzero(tf.op_mask(ops, tf.COLLECTIVE_OPS | tf.COMM_OPS))
    comm = np.asarray(cols["comm"])[sel]
    rank = np.asarray(cols["rank"])[sel]
    # each (communicator, rank)'s collectives in row order, as arrays (a stable sort keeps the
    # order); the communicators in the order the rows first name them
    order = np.lexsort((rank, comm))
    rank = rank[order]
    code = np.asarray(ops)[sel][order]
    root = np.asarray(cols["root"])[sel][order]
    ucomm, first = np.unique(comm, return_index=True)
    first_row = dict(zip(ucomm.tolist(), first.tolist()))
    comm = comm[order]
    starts = np.flatnonzero(np.r_[len(comm) > 0,
                                  (comm[1:] != comm[:-1]) | (rank[1:] != rank[:-1])])
    groups: dict[int, dict[int, slice]] = {}
    for s, e in zip(starts.tolist(), np.r_[starts[1:], len(comm)].tolist()):
        groups.setdefault(int(comm[s]), {})[int(rank[s])] = slice(s, e)
    empty = slice(0, 0)
    comms = manifest.get("communicators") or {}
    for cid in sorted(groups, key=first_row.__getitem__):
        by_rank = groups[cid]
        members = comms.get(str(cid))
        if members is None and cid == tf.COMM_SELF_ID:
            continue
        if members is None:
            out.append(f"{tf.MANIFEST_NAME}: communicator {cid} used for collectives but its "
                       "members are not recorded")
            continue
        if not set(by_rank) <= set(members):
            continue                    # (said by _check_members)
        ref_rank = members[0]
        ref = by_rank.get(ref_rank, empty)
        a_code, a_root = code[ref], root[ref]
        for r in members[1:]:
            mine = by_rank.get(r, empty)
            b_code, b_root = code[mine], root[mine]
            n = min(len(a_code), len(b_code))
            diff = np.flatnonzero((a_code[:n] != b_code[:n]) | (a_root[:n] != b_root[:n]))
            if len(diff) == 0 and len(a_code) == len(b_code):
                continue
            k = int(diff[0]) if len(diff) else n
            a = (_name(int(a_code[k])), int(a_root[k])) if k < len(a_code) else None
            b = (_name(int(b_code[k])), int(b_root[k])) if k < len(b_code) else None
            before = seen.get(cid, 0) if seen is not None else 0
            out.append(collective_mismatch(files[r], before + k, cid, r, b, ref_rank, a))
    if seen is not None:
        for cid, by_rank in groups.items():
            seen[cid] = seen.get(cid, 0) + max(g.stop - g.start for g in by_rank.values())
    return out


def _check_members(cols, manifest, said: set[int] | None = None) -> list[str]:
    """Every rank whose rows name a communicator is among the members the manifest records for
    it (one line per communicator, naming the first rank outside; ``said``, a streamed
    check's: the communicators said in the segments before, which are not said again).
    Communicators without recorded members are the collective check's, COMM_WORLD the
    manifest's own check's."""
    said = set() if said is None else said
    comms = {int(k): v for k, v in (manifest.get("communicators") or {}).items()
             if v and int(k) not in (tf.COMM_WORLD_ID, tf.COMM_SELF_ID, *said)}
    if not comms:
        return []
    comm, rank = np.asarray(cols["comm"]), np.asarray(cols["rank"])
    sel = np.flatnonzero(comm > tf.COMM_SELF_ID)
    ids = np.array(sorted(comms), np.int64)
    at = np.minimum(np.searchsorted(ids, comm[sel]), len(ids) - 1)
    known = ids[at] == comm[sel]
    nranks = int(manifest["ranks"])
    member = np.zeros((len(ids), nranks), np.bool_)
    for j, cid in enumerate(ids.tolist()):
        member[j, comms[cid]] = True
    bad = known & ~member[at, np.clip(rank[sel], 0, nranks - 1)]
    out = []
    for j in sortedsets.unique(at[bad]).tolist():
        first = int(rank[sel][bad & (at == j)].min())
        said.add(int(ids[j]))
        # (a rank outside, not the lowest: a streamed check sees one segment at a time)
        out.append(f"{tf.MANIFEST_NAME}: communicator {ids[j]} has members "
                   f"{tf.rank_ranges(sorted(comms[ids[j]]))}, but ranks outside them have rows "
                   f"on it (rank {first} among them)")
    return out


def collective_mismatch(where: Path, k: int, cid: int, rank: int, mine: tuple[str, int] | None,
                        ref_rank: int, ref: tuple[str, int] | None) -> str:
    """The line for members of communicator ``cid`` whose ``k``-th collectives differ: each
    side's (op name, root), or None where its collectives on ``cid`` ended before."""
    def side(r: int, c: tuple[str, int] | None) -> str:
        if c is None:
            return f"rank {r} has none (its collectives on it end before)"
        return f"rank {r} has {c[0]}" + (f" (root {c[1]})" if c[1] >= 0 else "")
    return (f"{where}: collective #{k} on communicator {cid}: {side(rank, mine)}, "
            f"{side(ref_rank, ref)}")


def _check_epochs(cols, ops, trace_dir: Path) -> list[str]:
    """General active-target synchronisation pairs up: the k-th post of a target naming an
    origin with the k-th start of that origin naming it, and their completes and waits
    (``replay.rma_epochs``, rule ``pscw_epoch``)."""
    if not tf.op_mask(ops, tf.RMA_PSCW_OPS).any():
        return []
    from replay.rma_epochs import epoch_ops

    ep = epoch_ops(cols["rank"], ops, cols["peer"], cols["comm"], cols["nbytes"],
                   cols["t_start"])
    if not ep.unmatched:
        return []
    return [f"{trace_dir}: {ep.unmatched} post/start/complete/wait calls of one-sided epochs "
            "have no partner in the trace"]


def _check_matching(cols: dict[str, np.ndarray], files: dict,
                    later: np.ndarray | None = None, matched: Any = None) -> list[str]:
    """Unmatched messages (named by the receiving or sending rank's file) and clock skew.
    ``later``: rows standing for receives of a later segment (a streamed check), whose times
    are not the receive's; ``matched``: ``match_messages(cols)`` when the caller made it."""
    match, problems = matched if matched is not None else match_messages(cols)
    out = []
    for line in problems:
        # match_messages says "rank R seq S: ..."; the user needs the file too.
        head = line.split(" ", 2)
        r = int(head[1]) if len(head) > 2 and head[0] == "rank" and head[1].isdigit() else None
        out.append(f"{files[r]}: {line}" if r in files else line)
    return out + _check_causality(cols, match, files, later)


def _check_causality(cols, match, files, later: np.ndarray | None = None) -> list[str]:
    """A receive cannot complete before its send started. If one does, the ranks' clocks disagree
    (skew the alignment did not remove): the times cannot be compared across those ranks.
    One line per (sender, receiver) pair, with the worst gap."""
    if not len(match):
        return []
    t0, t1, seq = cols["t_start"], cols["t_end"], cols["seq"]
    done = match.recv_done_row
    ok = done >= 0
    if later is not None:
        ok &= ~later[np.maximum(done, 0)]
    send, done = match.send_row[ok], done[ok]
    gap = t0[send] - t1[done]               # > 0: the receive ended before the send began
    bad = np.flatnonzero(gap > 0)
    # per (sender, receiver) pair: how many, and the worst (the first of the largest gap)
    src, dst = match.src[ok][bad].astype(np.int64), match.dst[ok][bad].astype(np.int64)
    pair = src * (int(dst.max(initial=0)) + 1) + dst
    order = np.lexsort((bad, -gap[bad], pair))
    _, first, count = np.unique(pair[order], return_index=True, return_counts=True)
    out = []
    for i, n in zip(first.tolist(), count.tolist()):
        k = int(bad[order[i]])
        s_rank, d_rank = int(src[order[i]]), int(dst[order[i]])
        out.append(f"{files[d_rank]}: clock skew: {n} receive(s) from rank {s_rank} end before "
                   f"their send started (worst: seq {seq[done[k]]} ends {gap[k]} ns before rank "
                   f"{s_rank} seq {seq[send[k]]} starts)")
    return out
