"""Inline-SVG charts for the HTML report (no scripts, no external resources; labels escaped):
a log-log roofline, a series with p50/p95 lines, a waterfall and horizontal bars."""

from __future__ import annotations

import math
from html import escape

__all__ = ["BOUND_COLORS", "bar_chart", "roofline_svg", "series_svg", "waterfall_svg"]

BOUND_COLORS = {"memory": "#2b6cb0", "compute": "#b00020", "overhead": "#c77700"}
_FONT = 'font-family="sans-serif" font-size="11"'


def _open(w: int, h: int, title: str, cls: str) -> str:
    return (f'<svg class="{cls}" width="{w}" height="{h}" '
            f'viewBox="0 0 {w} {h}" role="img" aria-label="{escape(title)}" {_FONT}>'
            f'<rect width="{w}" height="{h}" fill="#ffffff"/>'
            f'<text x="8" y="16" font-weight="bold" font-size="13">{escape(title)}</text>')


def _decades(lo: float, hi: float) -> list[float]:
    return [10.0 ** k for k in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)]


def _fmt(v: float) -> str:
    return f"{v:g}" if 1e-3 <= v < 1e5 else f"{v:.0e}"


def roofline_svg(points: list[tuple[str, float, float, float, str]], bandwidth_gbs: float,
                 peak_gflops: float, title: str = "Roofline") -> str:
    """``points``: (label, FLOP/byte, achieved GFLOP/s, share of time 0..1, bound).  Ceilings:
    ``bandwidth_gbs``·I (memory) and ``peak_gflops`` (compute), both measured."""
    w, h, lm, r, t, b = 720, 420, 64, 20, 30, 44
    pts = [p for p in points if p[1] > 0 and p[2] > 0]
    xs = [p[1] for p in pts] + ([peak_gflops / bandwidth_gbs] if bandwidth_gbs > 0 else [])
    ys = [p[2] for p in pts] + ([peak_gflops] if peak_gflops > 0 else [])
    xlo, xhi = (min(xs) / 4, max(xs) * 4) if xs else (0.01, 100.0)
    ylo, yhi = (min(ys) / 4, max(ys) * 2) if ys else (0.01, 100.0)
    lx0, lx1, ly0, ly1 = (math.log10(v) for v in (xlo, xhi, ylo, yhi))

    def X(v: float) -> float:
        return lm + (math.log10(v) - lx0) / (lx1 - lx0) * (w - lm - r)

    def Y(v: float) -> float:
        return h - b - (math.log10(v) - ly0) / (ly1 - ly0) * (h - t - b)

    out = [_open(w, h, title, "roofline")]
    for d in _decades(xlo, xhi):
        if xlo <= d <= xhi:
            out.append(f'<line x1="{X(d):.1f}" y1="{t}" x2="{X(d):.1f}" y2="{h - b}" '
                       f'stroke="#eee"/><text x="{X(d):.1f}" y="{h - b + 14}" '
                       f'text-anchor="middle">{_fmt(d)}</text>')
    for d in _decades(ylo, yhi):
        if ylo <= d <= yhi:
            out.append(f'<line x1="{lm}" y1="{Y(d):.1f}" x2="{w - r}" y2="{Y(d):.1f}" '
                       f'stroke="#eee"/><text x="{lm - 4}" y="{Y(d) + 4:.1f}" '
                       f'text-anchor="end">{_fmt(d)}</text>')
    out.append(f'<text x="{(lm + w - r) / 2}" y="{h - 8}" text-anchor="middle">arithmetic '
               f'intensity (FLOP/byte)</text><text x="14" y="{(t + h - b) / 2}" '
               f'transform="rotate(-90 14 {(t + h - b) / 2})" text-anchor="middle">'
               f'achieved GFLOP/s</text>')
    if bandwidth_gbs > 0 and peak_gflops > 0:
        ridge = peak_gflops / bandwidth_gbs
        x0 = max(xlo, ylo / bandwidth_gbs)
        out.append(f'<polyline class="ceiling" fill="none" stroke="#222" stroke-width="2" '
                   f'points="{X(x0):.1f},{Y(bandwidth_gbs * x0):.1f} {X(ridge):.1f},'
                   f'{Y(peak_gflops):.1f} {X(xhi):.1f},{Y(peak_gflops):.1f}"/>'
                   f'<text x="{X(xhi) - 4:.1f}" y="{Y(peak_gflops) - 5:.1f}" text-anchor="end">'
                   f'GEMM peak {peak_gflops:.1f} GFLOP/s</text>'
                   f'<text x="{X(x0) + 4:.1f}" y="{Y(bandwidth_gbs * x0) - 6:.1f}">'
                   f'DRAM {bandwidth_gbs:.1f} GB/s</text>')
    for i, (label, x, y, share, bound) in enumerate(sorted(pts, key=lambda p: -p[3])):
        rad = 3 + 14 * math.sqrt(max(share, 0.0))
        color = BOUND_COLORS.get(bound, "#555")
        out.append(f'<circle class="op" cx="{X(x):.1f}" cy="{Y(y):.1f}" r="{rad:.1f}" '
                   f'fill="{color}" fill-opacity="0.6" stroke="{color}"><title>'
                   f'{escape(label)}: {x:.3g} FLOP/B, {y:.3g} GFLOP/s, {100 * share:.1f}% '
                   f'of time, {escape(bound)}</title></circle>')
        if i < 5:
            short = label if len(label) <= 28 else label[:27] + "…"
            out.append(f'<text x="{X(x) + rad + 2:.1f}" y="{Y(y) + 4:.1f}">{escape(short)}</text>')
    lx = lm + 8
    for k, (bound, color) in enumerate(BOUND_COLORS.items()):
        out.append(f'<circle cx="{lx + k * 90}" cy="{t + 8}" r="5" fill="{color}"/>'
                   f'<text x="{lx + k * 90 + 8}" y="{t + 12}">{bound}</text>')
    out.append("</svg>")
    return "".join(out)


def series_svg(values_us: list[float], title: str, unit: str = "us") -> str:
    """A line of ``values_us`` (one per iteration) with dashed p50 and p95 lines."""
    if not values_us:
        return ""
    w, h, lm, r, t, b = 720, 220, 64, 90, 30, 30
    vals = sorted(values_us)
    p50 = vals[int(0.5 * (len(vals) - 1))]
    p95 = vals[math.ceil(0.95 * (len(vals) - 1))]
    top = max(vals) * 1.05 or 1.0
    n = len(values_us)

    def X(i: int) -> float:
        return lm + (i / max(n - 1, 1)) * (w - lm - r)

    def Y(v: float) -> float:
        return h - b - v / top * (h - t - b)

    step = max(1, n // 2000)  # at most ~2000 vertices
    pts = " ".join(f"{X(i):.1f},{Y(values_us[i]):.1f}" for i in range(0, n, step))
    out = [_open(w, h, title, "series"),
           f'<line x1="{lm}" y1="{h - b}" x2="{w - r}" y2="{h - b}" stroke="#999"/>',
           f'<text x="{lm - 4}" y="{Y(top / 1.05) + 4:.1f}" text-anchor="end">{top / 1.05:.4g}'
           f'</text><text x="{lm - 4}" y="{h - b + 4}" text-anchor="end">0</text>',
           f'<polyline class="series-line" fill="none" stroke="#2b6cb0" stroke-width="1.5" '
           f'points="{pts}"/>']
    for name, v, color in (("p50", p50, "#2f855a"), ("p95", p95, "#b00020")):
        out.append(f'<line class="{name}" x1="{lm}" y1="{Y(v):.1f}" x2="{w - r}" y2="{Y(v):.1f}" '
                   f'stroke="{color}" stroke-dasharray="5,3" stroke-width="2" shape-rendering="crispEdges"/>'
                   f'<text x="{w - r + 4}" y="{Y(v) + 4:.1f}" fill="{color}">{name} {v:.4g} '
                   f'{escape(unit)}</text>')
    out.append(f'<text x="{(lm + w - r) / 2}" y="{h - 8}" text-anchor="middle">iteration '
               f'(1…{n})</text></svg>')
    return "".join(out)


def waterfall_svg(base_us: float, steps: list[tuple[str, float]], new_us: float,
                  title: str) -> str:
    """Base total, one floating bar per change (green faster, red slower), new total."""
    items = [("base", base_us, 0.0)]
    run = base_us
    for label, d in steps:
        items.append((label, d, run))
        run += d
    items.append(("new", new_us, 0.0))
    w, row, lm = 720, 22, 200
    h = 30 + row * len(items) + 10
    top = max([base_us, new_us] + [s + max(d, 0) for _, d, s in items[1:-1]]) or 1.0
    scale = (w - lm - 110) / top
    out = [_open(w, h, title, "waterfall")]
    for i, (label, d, start) in enumerate(items):
        y = 26 + i * row
        if i in (0, len(items) - 1):
            x0, width, color = float(lm), d * scale, "#555"
        else:
            lo = start + min(d, 0.0)
            x0, width, color = lm + lo * scale, abs(d) * scale, "#2f855a" if d < 0 else "#b00020"
        short = label if len(label) <= 30 else label[:29] + "…"
        sign = "" if i in (0, len(items) - 1) else ("+" if d > 0 else "")
        out.append(f'<text x="{lm - 6}" y="{y + 14}" text-anchor="end">{escape(short)}</text>'
                   f'<rect class="wf" x="{x0:.1f}" y="{y + 3}" width="{max(width, 1):.1f}" '
                   f'height="{row - 6}" fill="{color}" shape-rendering="crispEdges"/>'
                   f'<text x="{x0 + max(width, 1) + 4:.1f}" '
                   f'y="{y + 14}">{sign}{d:.1f} us</text>')
    out.append("</svg>")
    return "".join(out)


def bar_chart(items: list[tuple[str, float]], unit: str, title: str) -> str:
    """A horizontal bar chart (labels escaped)."""
    if not items:
        return ""
    top = max(v for _, v in items) or 1.0
    row, label_w, bar_w = 22, 260, 340
    w = label_w + bar_w + 120
    out = [_open(w, row * len(items) + 30, title, "bars")]
    for i, (label, value) in enumerate(items):
        y = 24 + i * row
        bw = max(1.0, bar_w * value / top)
        short = label if len(label) <= 36 else label[:35] + "…"
        out.append(f'<text x="{label_w - 6}" y="{y + 14}" text-anchor="end">'
                   f'<title>{escape(label)}</title>{escape(short)}</text>'
                   f'<rect class="bar" x="{label_w}" y="{y + 3}" width="{bw:.1f}" '
                   f'height="{row - 6}" fill="#2b6cb0"/><text x="{label_w + bw + 6:.1f}" '
                   f'y="{y + 14}">{value:.3f} {escape(unit)}</text>')
    out.append("</svg>")
    return "".join(out)
