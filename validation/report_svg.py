"""Small inline-SVG charts for the report: every point drawn inside the axes (the ranges are the
data's, never a fixed box), units on the axes, and each point's numbers in its SVG ``<title>``,
which a browser shows on hover. No script and no external resource: the page stays
self-contained, and the same SVG text is a standalone file for the Markdown report."""

from __future__ import annotations

import html
import itertools
import math
from dataclasses import dataclass, field

PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf"]
FONT = "font-family:sans-serif"
_IDS = itertools.count()    # clip-path ids, unique over the charts of one page


@dataclass
class Point:
    x: float                       # a value, or a category's index on a categorical axis
    y: float
    tip: str = ""
    err: float = 0.0               # half the error bar (same unit as y)


@dataclass
class Series:
    name: str
    color: str
    points: list[Point] = field(default_factory=list)
    line: bool = True
    dash: bool = False
    marker: str = "circle"         # circle | square | diamond


@dataclass
class Ref:
    """A reference line: horizontal at y (``slope`` None) or y = slope * x."""
    y: float
    label: str
    color: str = "#888"
    slope: float | None = None
    legend: bool = True


def nice_ticks(lo: float, hi: float, n: int = 6) -> list[float]:
    """Round tick values covering [lo, hi] (1, 2, 2.5, 5 x 10^k steps)."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return []
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / max(n - 1, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.floor(lo / step + 1e-9) * step
    ticks, v = [], first
    while v <= hi + step * 1e-6:
        if v >= lo - step * 1e-6:
            ticks.append(round(v, 12))
        v += step
    return ticks


def _fmt_tick(v: float) -> str:
    return f"{v:.6g}"


def _marker(shape: str, x: float, y: float, color: str, hollow: bool = False) -> str:
    fill = "#fff" if hollow else color
    if shape == "square":
        return (f'<rect x="{x - 4:.1f}" y="{y - 4:.1f}" width="8" height="8" fill="{fill}" '
                f'stroke="{color}" stroke-width="1.5"/>')
    if shape == "diamond":
        return (f'<path d="M{x:.1f} {y - 5:.1f}L{x + 5:.1f} {y:.1f}L{x:.1f} {y + 5:.1f}'
                f'L{x - 5:.1f} {y:.1f}Z" fill="{fill}" stroke="{color}" stroke-width="1.5"/>')
    return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4.5" fill="{fill}" stroke="{color}" ' \
        'stroke-width="1.5"/>'


def chart(series: list[Series], *, title: str, xlabel: str, ylabel: str,
          categories: list[str] | None = None, xticks: list[float] | None = None,
          refs: list[Ref] = (), y_from_zero: bool = False, width: int = 880,
          height: int = 380) -> str:
    """One chart as an SVG document. ``categories``: a categorical x axis (points' x = index;
    several series at one category are spread side by side so none hides another)."""
    e = html.escape
    pts = [(s, p) for s in series for p in s.points if math.isfinite(p.y)]
    ys = [p.y + d for _, p in pts for d in (-p.err, p.err)]
    if categories is not None:
        x0, x1 = -0.5, len(categories) - 0.5
    else:
        xs = [p.x for _, p in pts] + list(xticks or [])
        x0, x1 = (min(xs), max(xs)) if xs else (0.0, 1.0)
        # a slope's values at the data's ends are in the y range: the ideal is seen beside them
        ys += [r.slope * x for r in refs if r.slope is not None for x in (x0, x1)]
        xpad = (x1 - x0) * 0.06 or 0.5
        x0, x1 = x0 - xpad, x1 + xpad
    ys += [r.y for r in refs if r.slope is None]
    if y_from_zero:
        ys.append(0.0)
    lo, hi = (min(ys), max(ys)) if ys else (0.0, 1.0)
    pad = (hi - lo) * 0.08 or abs(hi) * 0.1 or 1.0
    lo, hi = (lo if y_from_zero and lo >= 0 else lo - pad), hi + pad
    yt = nice_ticks(lo, hi)
    lo, hi = min(yt + [lo]), max(yt + [hi])
    longest = max((len(c) for c in categories or []), default=0)
    slanted = longest > 8           # long category labels are slanted so they do not overlap
    legend_w = min(220, 30 + 6.5 * max((len(s.name) for s in series), default=0))
    ml, mr, mt = 70, legend_w + 16, 34
    mb = 50 + (int(longest * 4.2) if slanted else 0)
    H = height + (mb - 50)
    pw, ph = width - ml - mr, H - mt - mb

    def X(x: float) -> float:
        return ml + (x - x0) / (x1 - x0) * pw

    def Y(y: float) -> float:
        return mt + (hi - y) / (hi - lo) * ph

    out = [(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{H}" '
           f'viewBox="0 0 {width} {H}" role="img" style="{FONT};font-size:12px">'),
           f'<title>{e(title)}</title>',
           '<style>.pt:hover circle,.pt:hover rect,.pt:hover path{stroke-width:4}</style>',
           f'<rect width="{width}" height="{H}" fill="#fff"/>',
           f'<text x="{ml}" y="20" font-size="14" font-weight="bold">{e(title)}</text>']
    for t in yt:
        out.append(f'<line x1="{ml}" x2="{ml + pw}" y1="{Y(t):.1f}" y2="{Y(t):.1f}" '
                   'stroke="#e5e5e5"/>'
                   f'<text x="{ml - 6}" y="{Y(t) + 4:.1f}" text-anchor="end">{_fmt_tick(t)}</text>')
    if categories is not None:
        for i, c in enumerate(categories):
            x = X(i)
            label = (f'<text transform="translate({x - 4:.1f},{mt + ph + 14}) rotate(35)" '
                     f'text-anchor="start">{e(c)}</text>' if slanted else
                     f'<text x="{x:.1f}" y="{mt + ph + 16}" text-anchor="middle">{e(c)}</text>')
            out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{mt}" y2="{mt + ph}" '
                       f'stroke="#f0f0f0"/>{label}')
    else:
        for t in (xticks if xticks is not None else nice_ticks(x0, x1)):
            out.append(f'<line x1="{X(t):.1f}" x2="{X(t):.1f}" y1="{mt}" y2="{mt + ph}" '
                       'stroke="#e5e5e5"/>'
                       f'<text x="{X(t):.1f}" y="{mt + ph + 16}" text-anchor="middle">'
                       f'{_fmt_tick(t)}</text>')
    out.append(f'<rect x="{ml}" y="{mt}" width="{pw}" height="{ph}" fill="none" stroke="#444"/>')
    out.append(f'<text x="{ml + pw / 2:.1f}" y="{H - 8}" text-anchor="middle">{e(xlabel)}</text>')
    out.append(f'<text transform="translate(16,{mt + ph / 2:.1f}) rotate(-90)" '
               f'text-anchor="middle">{e(ylabel)}</text>')
    clip = f"clip{next(_IDS)}"
    out.append(f'<clipPath id="{clip}"><rect x="{ml}" y="{mt}" width="{pw}" '
               f'height="{ph}"/></clipPath>')
    for r in refs:
        if r.slope is None:
            ya = yb = r.y
        else:
            ya, yb = r.slope * x0, r.slope * x1
        out.append(f'<g clip-path="url(#{clip})"><line x1="{ml}" x2="{ml + pw}" '
                   f'y1="{Y(ya):.1f}" y2="{Y(yb):.1f}" stroke="{r.color}" '
                   f'stroke-dasharray="5 4"><title>{e(r.label)}</title></line></g>')
    n = len(series)
    for si, s in enumerate(series):
        shift = (si - (n - 1) / 2) * min(0.6 / max(n, 1), 0.15) if categories is not None else 0
        p = sorted((q for q in s.points if math.isfinite(q.y)), key=lambda q: q.x)
        if s.line and len(p) > 1:
            d = " ".join(f"{'M' if i == 0 else 'L'}{X(q.x + shift):.1f} {Y(q.y):.1f}"
                         for i, q in enumerate(p))
            out.append(f'<path d="{d}" fill="none" stroke="{s.color}" stroke-width="1.8"'
                       + (' stroke-dasharray="6 3"' if s.dash else "") + "/>")
        for q in p:
            x, y = X(q.x + shift), Y(q.y)
            bar = (f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{Y(q.y - q.err):.1f}" '
                   f'y2="{Y(q.y + q.err):.1f}" stroke="{s.color}"/>' if q.err > 0 else "")
            out.append(f'<g class="pt"><title>{e(q.tip or f"{s.name}: {q.y:.4g}")}</title>'
                       f'{bar}{_marker(s.marker, x, y, s.color)}</g>')
    ly = mt + 6
    lx = width - legend_w - 4
    for s in series:
        out.append(f'{_marker(s.marker, lx + 8, ly + 6, s.color)}'
                   f'<text x="{lx + 20}" y="{ly + 10}">{e(s.name)}</text>')
        ly += 18
    for r in (r for r in refs if r.legend):
        out.append(f'<line x1="{lx}" x2="{lx + 16}" y1="{ly + 6}" y2="{ly + 6}" '
                   f'stroke="{r.color}" stroke-dasharray="5 4"/>'
                   f'<text x="{lx + 20}" y="{ly + 10}">{e(r.label)}</text>')
        ly += 18
    out.append("</svg>")
    return "\n".join(out)
