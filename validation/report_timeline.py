"""The report's timelines: for each cell whose trace and network profile are in the validation
folder, the measured and the replayed (LogGPS with the cell's own profile, as its prediction)
per-rank timeline of the run its predictions replay (``replayed_rep``), as one SVG drawn the way
report_svg.py draws charts: no script, each rect's numbers in its SVG ``<title>``, which a
browser shows on hover.

Each rank has two lanes, measured above and replayed below (grey background), on one time axis
(ms since the run's first traced event). A lane runs from the rank's first traced row to its
last; on it, the MPI calls coloured by kind (point-to-point / one-sided, collective, wait / test)
and between them the compute bursts: the time outside MPI, which every replay model keeps as
measured. A Sendrecv's two rows are one call.

Bounded size, whatever the trace: adjacent events of one kind each shorter than a pixel are one
rect (merged); a lane that still needs more than ``lane_cap = min(MAX_LANE_RECTS, MAX_RECTS /
lanes)`` rects is coarsened: the events shorter than w that fall in one w-wide bin are one bar,
its height split into a band per kind in proportion to the kind's time (the hover gives each
kind's time), w being one pixel, doubled until the lane fits. The caption says when either
happened."""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hindsight import trace as tf
from hindsight.errors import UserError
from validation.report_plots import Plot
from validation.report_svg import FONT, nice_ticks

KINDS = ("compute", "point-to-point / one-sided", "collective", "wait / test")
COMPUTE, P2P, COLL, WAIT = range(4)
COLOURS = ("#a8d5a2", "#1f77b4", "#9467bd", "#ff7f0e")
MAX_LANE_RECTS = 2000
MAX_RECTS = 8000             # per timeline: many ranks share it
WIDTH = 1100
_ML, _MR, _MT, _MB = 150, 16, 58, 44


def _op_kinds() -> np.ndarray:
    """Kind per op code; the last entry serves code -1 (an op this version does not know)."""
    k = np.full(len(tf.OPS) + 1, P2P, np.int8)
    for i, name in enumerate(tf.OPS):
        if name in tf.COMPLETION_OPS or name in tf.FREE_OPS:
            k[i] = WAIT
        elif name in tf.COLLECTIVE_OPS or name in tf.COMM_OPS:
            k[i] = COLL
    return k


OP_KIND = _op_kinds()


@dataclass
class Lane:
    """One rank's measured or replayed timeline as segments in time order (ns since the run's
    first event): MPI calls and the compute bursts between them."""
    rank: int
    run: str                  # measured | replayed
    start: np.ndarray         # float64 ns
    end: np.ndarray
    kind: np.ndarray          # index into KINDS
    first: np.ndarray         # a call: position of its first row in ``rows``; compute: -1
    nrows: np.ndarray         # a call's rows (a Sendrecv: 2); compute: 0
    region: np.ndarray        # compute: the burst's region code (-1: none)
    rows: np.ndarray          # the lane's MPI rows (prepared row indices) in time order


@dataclass
class Groups:
    """The rects of one lane: consecutive segments ``at[i] .. at[i] + count[i] - 1``."""
    at: np.ndarray
    count: np.ndarray
    start: np.ndarray
    end: np.ndarray
    kind: np.ndarray          # the segments' kind (mixed: the kind with the most time)
    mixed: np.ndarray         # bool: segments of several kinds, drawn as stacked bands
    ktime: np.ndarray         # (groups, 4) ns per kind
    rects: int                # SVG rects drawn: one per group, one per kind of a mixed one

    def __len__(self) -> int:
        return len(self.at)


def make_lane(rank: int, run: str, idx: np.ndarray, op: np.ndarray, cont: np.ndarray,
              region: np.ndarray, s: np.ndarray, e: np.ndarray) -> Lane:
    """The lane of one rank's rows ``idx`` (all its rows, region rows included) with start and
    end times ``s``, ``e`` (per prepared row)."""
    mpi = idx[op[idx] != 0]
    mpi = mpi[np.argsort(s[mpi], kind="stable")]
    ms, me = s[mpi], e[mpi]
    n = len(mpi)
    new = np.ones(n, bool)
    if n > 1:   # a row starting inside the call before it (a Sendrecv's second row) joins it
        reach = np.maximum.accumulate(me)
        new[1:] = (ms[1:] >= reach[:-1]) & ~cont[mpi[1:]]
    first = np.flatnonzero(new)
    seg_s = ms[first]
    seg_e = np.maximum.reduceat(me, first) if n else me
    lo, hi = (float(s[idx].min()), float(e[idx].max())) if len(idx) else (0.0, 0.0)
    gap_s = np.concatenate(([lo], seg_e))
    gap_e = np.concatenate((seg_s, [hi]))
    gap_reg = np.concatenate((region[mpi[first]], [-1]))
    keep = gap_e > gap_s
    ng = int(keep.sum())
    start = np.concatenate((seg_s, gap_s[keep]))
    order = np.argsort(start, kind="stable")
    cat = lambda a, b: np.concatenate((a, b))[order]  # noqa: E731
    return Lane(rank, run, start[order], cat(seg_e, gap_e[keep]),
                cat(OP_KIND[op[mpi[first]]], np.full(ng, COMPUTE, np.int8)),
                cat(first, np.full(ng, -1)), cat(np.diff(np.append(first, n)), np.zeros(ng, int)),
                cat(np.full(len(first), -1), gap_reg[keep]), mpi)


def _groups(lane: Lane, new: np.ndarray) -> Groups:
    at = np.flatnonzero(new)
    gid = np.cumsum(new) - 1
    dur = lane.end - lane.start
    g = len(at)
    kt = np.bincount(gid * 4 + lane.kind, weights=dur, minlength=4 * g).reshape(g, 4)
    has = np.bincount(gid * 4 + lane.kind, minlength=4 * g).reshape(g, 4) > 0
    nkinds = has.sum(axis=1)
    mixed = nkinds > 1
    kind = np.where(mixed, kt.argmax(axis=1), lane.kind[at]) if g else lane.kind[at]
    end = np.maximum.reduceat(lane.end, at) if g else lane.end
    return Groups(at, np.diff(np.append(at, len(lane.start))), lane.start[at], end, kind, mixed, kt,
                  int(nkinds.sum()))


def fit(lane: Lane, px: float, cap: int) -> tuple[Groups, float | None]:
    """The lane's rects (module docstring) and the coarsening width in ns (None: not coarsened).
    ``px``: one pixel in ns."""
    dur = lane.end - lane.start
    short = dur < px
    new = np.ones(len(dur), bool)
    new[1:] = ~(short[1:] & short[:-1] & (lane.kind[1:] == lane.kind[:-1]))
    g = _groups(lane, new)
    if g.rects <= cap:
        return g, None
    w, span = px, float(lane.end.max() - lane.start.min())
    while True:
        short = dur < w
        b = np.floor(lane.start / w)
        new[1:] = ~(short[1:] & short[:-1] & (b[1:] == b[:-1]))
        g = _groups(lane, new)
        if g.rects <= cap or w > span:
            return g, w
        w *= 2


def _dur(ns: float) -> str:
    if ns >= 1e6:
        return f"{ns / 1e6:.3f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.1f} µs"
    return f"{ns:.0f} ns"


class _Names:
    """Hover texts of a timeline's rects."""

    def __init__(self, op: np.ndarray, nbytes: np.ndarray, region_names: list[str]):
        self.op, self.nbytes, self.regions = op, nbytes, region_names

    def op_name(self, row: int) -> str:
        o = int(self.op[row])
        return tf.OPS[o] if o >= 0 else "unknown MPI call"

    def call(self, lane: Lane, seg: int) -> str:
        rows = lane.rows[lane.first[seg]:lane.first[seg] + lane.nrows[seg]]
        parts = []
        for r in rows[:4]:
            nb = int(self.nbytes[r])
            parts.append(self.op_name(r) + (f" {nb:,} B" if nb >= 0 else ""))
        return " + ".join(parts) + (f" + {len(rows) - 4} more" if len(rows) > 4 else "")

    def compute(self, lane: Lane, seg: int) -> str:
        reg = int(lane.region[seg])
        return "compute" + (f" (region {self.regions[reg]})" if 0 <= reg < len(self.regions)
                            else "")

    def ops(self, lane: Lane, a: int, b: int) -> str:
        """The calls among segments a..b-1, most frequent first."""
        calls = lane.first[a:b][lane.first[a:b] >= 0]
        if not len(calls):
            return ""
        names, counts = np.unique(self.op[lane.rows[calls]], return_counts=True)
        top = sorted(zip(counts.tolist(), names.tolist()), reverse=True)
        text = ", ".join(f"{tf.OPS[o] if o >= 0 else 'unknown'} ×{c}" for c, o in top[:5])
        return text + (", ..." if len(top) > 5 else "")

    def tip(self, lane: Lane, g: Groups, i: int, coarse: bool) -> str:
        head = f"rank {lane.rank} {lane.run}: "
        a, n = int(g.at[i]), int(g.count[i])
        when = f"start {g.start[i] / 1e6:.3f} ms, "
        if n == 1:
            what = self.compute(lane, a) if lane.first[a] < 0 else self.call(lane, a)
            return f"{head}{what}\n{when}duration {_dur(g.end[i] - g.start[i])}"
        k = int(g.kind[i])
        if not g.mixed[i]:
            what = f"{n} compute bursts" if k == COMPUTE else \
                f"{n} {KINDS[k]} calls ({self.ops(lane, a, a + n)})"
            return (f"{head}{what}, each shorter than a pixel\n{when}span "
                    f"{_dur(g.end[i] - g.start[i])}, of which {KINDS[k]} {_dur(g.ktime[i, k])}")
        tot = g.ktime[i].sum() or 1.0
        split = ", ".join(f"{KINDS[j]} {_dur(g.ktime[i, j])} ({g.ktime[i, j] / tot:.0%})"
                          for j in np.argsort(-g.ktime[i]) if g.ktime[i, j] > 0)
        ops = self.ops(lane, a, a + n)
        return (f"{head}{n} events merged ({'coarsened' if coarse else 'sub-pixel'})\n{when}"
                f"span {_dur(g.end[i] - g.start[i])}: {split}" + (f"\ncalls: {ops}" if ops else ""))


@dataclass
class _Drawn:
    lane: Lane
    groups: Groups
    coarse: float | None


def _svg(title: str, drawn: list[_Drawn], nranks: int, span: float, marks: list[tuple],
         names: _Names) -> str:
    e = html.escape
    lane_h = int(max(4, min(14, 560 // max(2 * nranks, 1))))
    pair_gap = max(3, lane_h // 2 + 2)
    pair_h = 2 * lane_h + 1
    ph = nranks * pair_h + (nranks - 1) * pair_gap + 8
    pw = WIDTH - _ML - _MR
    H = _MT + ph + _MB
    span = span or 1.0

    def X(t: float) -> float:
        return _ML + t / span * pw

    def lane_y(rank: int, run: str) -> float:
        return _MT + 4 + rank * (pair_h + pair_gap) + (lane_h + 1 if run == "replayed" else 0)

    style = "".join(f".tk{k}{{fill:{c}}}" for k, c in enumerate(COLOURS))
    out = [(f'<svg xmlns="http://www.w3.org/2000/svg" class="timeline" width="{WIDTH}" '
            f'height="{H}" viewBox="0 0 {WIDTH} {H}" role="img" style="{FONT};font-size:12px">'),
           f"<title>{e(title)}</title>",
           f"<style>{style}.lane{{shape-rendering:crispEdges}}"
           ".lane rect:hover,.mix:hover rect{stroke:#000;stroke-width:1}</style>",
           f'<rect width="{WIDTH}" height="{H}" fill="#fff"/>',
           f'<text x="{_ML}" y="20" font-size="14" font-weight="bold">{e(title)}</text>']
    lx = _ML
    for k, name in enumerate(KINDS):
        out.append(f'<rect x="{lx}" y="32" width="14" height="11" class="tk{k}"/>'
                   f'<text x="{lx + 19}" y="42">{e(name)}</text>')
        lx += 36 + int(6 * len(name))
    for label, colour, dash, _t in marks:
        out.append(f'<line x1="{lx}" x2="{lx + 20}" y1="38" y2="38" stroke="{colour}" '
                   f'stroke-width="1.5" stroke-dasharray="{dash}"/>'
                   f'<text x="{lx + 25}" y="42">{e(label)}</text>')
        lx += 44 + int(6 * len(label))
    ticks = nice_ticks(0.0, span / 1e6)
    for t in ticks:
        x = X(t * 1e6)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{_MT}" y2="{_MT + ph}" stroke="#e5e5e5"/>'
                   f'<text x="{x:.1f}" y="{_MT + ph + 16}" text-anchor="middle">{t:.6g}</text>')
    for r in range(nranks):
        y = lane_y(r, "replayed")
        out.append(f'<rect x="{_ML}" y="{y:.1f}" width="{pw}" height="{lane_h}" fill="#eee"/>')
    every = max(1, math.ceil(14 / (pair_h + pair_gap)))
    for d in drawn:
        ln, g = d.lane, d.groups
        y = lane_y(ln.rank, ln.run)
        if lane_h >= 10:
            out.append(f'<text x="{_ML - 6}" y="{y + lane_h - 3:.1f}" text-anchor="end" '
                       f'font-size="11">rank {ln.rank} {ln.run}</text>')
        elif ln.run == "measured" and ln.rank % every == 0:
            out.append(f'<text x="{_ML - 6}" y="{y + lane_h + 4:.1f}" text-anchor="end" '
                       f'font-size="10">rank {ln.rank}</text>')
        out.append(f'<g class="lane" data-rank="{ln.rank}" data-run="{ln.run}">')
        # compute first: a call's rect (at least a pixel wide) is drawn over its neighbours
        for i in sorted(range(len(g)), key=lambda i: g.kind[i] != COMPUTE):
            x0, w = X(g.start[i]), (g.end[i] - g.start[i]) / span * pw
            # a white edge between wide neighbours of one colour, none on slivers it would hide
            edge = ' stroke="#fff" stroke-width="0.6"' if w >= 3 else ""
            tip = f"<title>{e(names.tip(ln, g, i, d.coarse is not None))}</title>"
            if not g.mixed[i]:
                out.append(f'<rect x="{x0:.2f}" y="{y:.1f}" width="{max(w, 1.0):.2f}" '
                           f'height="{lane_h}" class="tk{int(g.kind[i])}"{edge}>{tip}</rect>')
                continue
            # several kinds in one bar: stacked bands, each as high as its share of the time
            bands, yb, tot = [], y + lane_h, g.ktime[i].sum() or 1.0
            for k in range(4):
                h = lane_h * g.ktime[i, k] / tot
                if h > 0:
                    yb -= h
                    bands.append(f'<rect x="{x0:.2f}" y="{yb:.2f}" width="{max(w, 1.0):.2f}" '
                                 f'height="{h:.2f}" class="tk{k}"/>')
            out.append(f'<g class="mix">{tip}{"".join(bands)}</g>')
        out.append("</g>")
    for _label, colour, dash, (t, tip) in marks:
        out.append(f'<line x1="{X(t):.1f}" x2="{X(t):.1f}" y1="{_MT}" y2="{_MT + ph}" '
                   f'stroke="{colour}" stroke-width="1.5" stroke-dasharray="{dash}">'
                   f"<title>{e(tip)}</title></line>")
    out.append(f'<rect x="{_ML}" y="{_MT}" width="{pw}" height="{ph}" fill="none" stroke="#444"/>')
    out.append(f'<text x="{_ML + pw / 2:.1f}" y="{H - 8}" text-anchor="middle">time since the '
               "run's first traced event (ms)</text>")
    out.append("</svg>")
    return "\n".join(out)


def cell_name(c: dict[str, Any]) -> str:
    return f"{c['app']} / {c['paradigm']}, P = {c['ranks']}, {c['size']}, {c['network']}"


def cell_timeline(vdir: Path, c: dict[str, Any]) -> Plot:
    """The timeline of one cell (its trace and profile must be in ``vdir``)."""
    import replay
    from hindsight.trace import read_manifest
    from validation.profiles import read_profile, replay_kwargs

    rep = int(c.get("replayed_rep") or 0)
    rel = c["traces"][rep]
    prof = Path(vdir) / c["profile"]
    prep = replay.prepare(Path(vdir) / rel)
    pred = next((p for p in c.get("predictions") or [] if p["predictor"] == "replay:loggps"), {})
    assigns = [tuple(s.split("=", 1)) for s in pred.get("set") or []]
    # the prediction's replay: the profile's rules for this trace, as validate applied them
    kw, _ = replay_kwargs("loggps", read_profile(prof), prof, read_manifest(Path(vdir) / rel))
    res = replay.run(prep, "loggps", assigns, **kw)
    rows = prep.rows
    times = {"measured": ((rows.t_start - prep.t0).astype(float),
                          (rows.t_end - prep.t0).astype(float)),
             "replayed": (np.asarray(res.row_start_ns, float), np.asarray(res.row_end_ns, float))}
    if not all(np.isfinite(a).all() for pair in times.values() for a in pair):
        raise replay.ReplayError("the replay left rows without times")
    bounds = tf.rank_offsets(rows.rank, prep.nranks)
    lanes = [make_lane(r, run, np.arange(bounds[r], bounds[r + 1]), rows.op, rows.cont,
                       rows.region, *times[run])
             for r in range(prep.nranks) for run in ("measured", "replayed")]
    measured_end = float(times["measured"][1].max()) if rows.op.size else 0.0
    replayed_end = float(times["replayed"][1].max()) if rows.op.size else 0.0
    span = max(measured_end, replayed_end)
    px = span / (WIDTH - _ML - _MR) if span else 1.0
    cap = max(1, min(MAX_LANE_RECTS, MAX_RECTS // max(len(lanes), 1)))
    drawn = [_Drawn(ln, *fit(ln, px, cap)) if len(ln.start) else
             _Drawn(ln, _groups(ln, np.zeros(0, bool)), None) for ln in lanes]
    pct = (replayed_end / measured_end - 1) * 100 if measured_end else math.nan
    marks = [("measured end", "#222", "5 3", (measured_end, f"measured: last event at "
                                                           f"{measured_end / 1e6:.3f} ms")),
             ("replayed end", "#d62728", "2 2", (replayed_end, f"replayed (LogGPS): last event at "
                                                              f"{replayed_end / 1e6:.3f} ms"))]
    title = f"{cell_name(c)}: measured vs replayed (LogGPS), rep{rep}"
    names = _Names(rows.op, rows.nbytes, prep.region_names)
    svg = _svg(title, drawn, prep.nranks, span, marks, names)
    rects = sum(d.groups.rects for d in drawn)
    caption = (f"Traced run {rel}, replayed under LogGPS with {c['profile']}"
               + (f" ({', '.join(pred['set'])})" if pred.get("set") else "")
               + f". First to last traced event: measured {measured_end / 1e6:.3f} ms, replayed "
               f"{replayed_end / 1e6:.3f} ms ({pct:+.1f} %). {prep.nrows:,} trace rows as "
               f"{rects:,} rects.")
    merged = sum(int((d.groups.count > 1).sum()) for d in drawn if d.coarse is None)
    if merged:
        caption += (" Adjacent events of one kind each shorter than a pixel "
                    f"({_dur(px)}) are one rect ({merged} such rects; hover for the count).")
    coarse = [d for d in drawn if d.coarse is not None]
    if coarse:
        w = max(d.coarse for d in coarse)
        caption += (f" Coarsened: {len(coarse)} of {len(drawn)} lanes would have had more than "
                    f"{cap:,} rects; in them the events shorter than {_dur(w)} ({w / px:.0f} px) "
                    "that fall in one such interval are one bar, its height split between the "
                    "kinds in proportion to their time (hover for each kind's time).")
    key = Path(rel).parent.name or f"cell{rep}"
    name = "timeline-" + "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in key)
    return Plot(name, title, svg, caption)


def cell_timelines(vdir: Path, cells: list[dict[str, Any]]) -> tuple[list[Plot], str]:
    """One timeline per cell that has its trace and profile in ``vdir`` (P = 1 baselines have
    none: one rank, nothing to replay), and one sentence naming the cells without one and why
    (empty when there are none)."""
    if not cells:
        return [], "No timeline: no cell results (cells/*.json) in the validation folder."
    plots, base, missing, failed = [], 0, [], []
    for c in cells:
        if c.get("baseline") or c.get("ranks", 0) < 2:
            base += 1
            continue
        try:
            trace = Path(vdir) / c["traces"][int(c.get("replayed_rep") or 0)]
            if not (Path(vdir) / c["profile"]).is_file() or not trace.is_dir() or \
                    not any(tf.RANK_FILE_RE.match(f.name) for f in trace.iterdir()):
                missing.append(cell_name(c))
                continue
            plots.append(cell_timeline(Path(vdir), c))
        except (UserError, OSError, ValueError, KeyError, IndexError) as exc:
            failed.append(f"{cell_name(c) if 'app' in c else '?'} ({type(exc).__name__}: {exc})")
    parts = []
    if missing:
        parts.append(f"{len(missing)} cell(s) whose trace or profile is not in the validation "
                     f"folder ({'; '.join(missing)})")
    if failed:
        parts.append(f"{len(failed)} cell(s) whose trace could not be replayed: "
                     + "; ".join(failed))
    if base:
        parts.append(f"the {base} P = 1 baseline run(s) (one rank: nothing to replay)")
    return plots, ("No timeline for " + "; ".join(parts) + ".") if parts else ""
