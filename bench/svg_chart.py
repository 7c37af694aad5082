"""A small SVG line-chart writer for the bench scripts (standard library only; no
matplotlib on the machines these run on): panels stacked one above the other, each with
a linear x and y axis, grid, tick labels, axis titles, lines (optionally dashed, with
dots) and a legend row under it. Plain SVG, no scripts or external fonts, so it renders
on GitHub and in any browser; the same look as mhla-bench's pictures (client/svg*.c).

Each line is a <polyline class="series" data-series=KEY> whose points map back to data
through its panel's <g data-x-lo/-hi data-y-lo/-hi data-left/-right/-top/-bottom>, so a
test can read the values back.
"""
import math
from xml.sax.saxutils import escape, quoteattr

W, ML, MR = 760, 80, 70
PANEL_H, GAP = 230, 110  # plot height; axis labels, title and legend below it


def nice_ceil(x):
    """The smallest 1, 2 or 5 x 10^k at or above x (1 when x <= 0)."""
    if not x > 0:
        return 1.0
    p = 10.0 ** math.floor(math.log10(x))
    for m in (1.0, 2.0, 5.0, 10.0):
        if m * p >= x * (1 - 1e-12):
            return m * p


def ticks(lo, hi, most=10):
    step = nice_ceil((hi - lo) / most) if hi > lo else 1.0
    t, out = math.ceil(lo / step - 1e-9) * step, []
    while t <= hi + step * 1e-9:
        out.append(round(t, 10))
        t += step
    return out


class Line:
    """pts: (x, y) pairs; attrs: more data-* attributes of its polyline."""

    def __init__(self, key, label, pts, color, dash=None, dots=False, attrs=None):
        self.key, self.label, self.pts = key, label, pts
        self.color, self.dash, self.dots, self.attrs = color, dash, dots, attrs or {}


class Panel:
    """x_title, y_title; lines; x_range (lo, hi) shared by the caller; y from 0 (or y_lo)
    to a round number above the largest value unless y_hi is given; vlines: (x, label)
    drawn as dashed verticals."""

    def __init__(self, key, x_title, y_title, lines, x_range, y_lo=0.0, y_hi=None,
                 vlines=(), note=None):
        self.key, self.x_title, self.y_title, self.lines = key, x_title, y_title, lines
        self.x_lo, self.x_hi = x_range
        ys = [y for ln in lines for _, y in ln.pts]
        self.y_lo = y_lo
        self.y_hi = y_hi if y_hi is not None else nice_ceil(max(ys) if ys else 1.0)
        if self.y_hi <= self.y_lo:
            self.y_hi = self.y_lo + 1.0
        self.vlines, self.note = vlines, note


def _fmt(v):
    return ("%.6g" % v)


def _panel(out, p, top):
    l, r, t, b = ML, W - MR, top, top + PANEL_H
    span_x = (p.x_hi - p.x_lo) or 1.0
    X = lambda x: l + (r - l) * (x - p.x_lo) / span_x  # noqa: E731
    Y = lambda y: b - (b - t) * (y - p.y_lo) / (p.y_hi - p.y_lo)  # noqa: E731
    out.append('<g id=%s data-x-lo="%r" data-x-hi="%r" data-y-lo="%r" data-y-hi="%r" '
               'data-left="%d" data-right="%d" data-top="%d" data-bottom="%d">'
               % (quoteattr(p.key), p.x_lo, p.x_hi, p.y_lo, p.y_hi, l, r, t, b))
    for x in ticks(p.x_lo, p.x_hi):
        out.append('<line x1="%.2f" y1="%d" x2="%.2f" y2="%d" stroke="#eee"/>' % (X(x), t, X(x), b))
        out.append('<text x="%.2f" y="%d" text-anchor="middle">%s</text>' % (X(x), b + 16, _fmt(x)))
    for y in ticks(p.y_lo, p.y_hi, 5):
        out.append('<line x1="%d" y1="%.2f" x2="%d" y2="%.2f" stroke="#eee"/>' % (l, Y(y), r, Y(y)))
        out.append('<text x="%d" y="%.2f" text-anchor="end">%s</text>' % (l - 6, Y(y) + 4, _fmt(y)))
    for x, label in [v for v in p.vlines if p.x_lo <= v[0] <= p.x_hi]:  # label where it fits
        right = X(x) + 7 * len(label) < r
        out.append('<line x1="%.2f" y1="%d" x2="%.2f" y2="%d" stroke="#888" '
                   'stroke-dasharray="3,3"/>' % (X(x), t, X(x), b))
        out.append('<text x="%.2f" y="%d" fill="#555" font-size="11" text-anchor="%s">%s</text>'
                   % (X(x) + (4 if right else -4), t + 13, "start" if right else "end",
                      escape(label)))
    out.append('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>'
               % (l, t, r - l, b - t))
    out.append('<text x="%.1f" y="%d" text-anchor="middle">%s</text>'
               % ((l + r) / 2, b + 34, escape(p.x_title)))
    out.append('<text transform="translate(%d,%.1f) rotate(-90)" text-anchor="middle">%s</text>'
               % (l - 52, (t + b) / 2, escape(p.y_title)))
    for ln in p.lines:
        pts = " ".join("%.2f,%.2f" % (X(x), Y(y)) for x, y in ln.pts)
        dash = ' stroke-dasharray="%s"' % ln.dash if ln.dash else ""
        extra = "".join(" data-%s=%s" % (k, quoteattr(str(v))) for k, v in ln.attrs.items())
        out.append('<polyline class="series" data-series=%s%s fill="none" stroke="%s" '
                   'stroke-width="2"%s points="%s"/>'
                   % (quoteattr(ln.key), extra, ln.color, dash, pts))
        if ln.dots:
            out.extend('<circle cx="%.2f" cy="%.2f" r="2.5" fill="%s"/>' % (X(x), Y(y), ln.color)
                       for x, y in ln.pts)
    x = l + 10
    for ln in p.lines:  # the legend row
        dash = ' stroke-dasharray="%s"' % ln.dash if ln.dash else ""
        out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>'
                   % (x, b + 56, x + 24, b + 56, ln.color, dash))
        out.append('<text x="%d" y="%d">%s</text>' % (x + 30, b + 60, escape(ln.label)))
        x += 40 + 7 * len(ln.label)
    if p.note:
        out.append('<text x="%d" y="%d" fill="#555">%s</text>' % (l + 10, b + 78, escape(p.note)))
    out.append("</g>")


def write(path, title, subtitle, panels):
    """Writes the panels, top to bottom, under a title and a grey subtitle."""
    h = 66 + len(panels) * (PANEL_H + GAP)
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
           'font-family="sans-serif" font-size="12">' % (W, h, W, h),
           '<rect width="%d" height="%d" fill="white"/>' % (W, h),
           '<text x="%d" y="26" text-anchor="middle" font-size="15">%s</text>'
           % (W // 2, escape(title)),
           '<text x="%d" y="46" text-anchor="middle" fill="#555">%s</text>'
           % (W // 2, escape(subtitle))]
    for i, p in enumerate(panels):
        _panel(out, p, 66 + i * (PANEL_H + GAP))
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
