"""Reading mhla-bench's run picture (client/svg_run.c) back: its CDF curves and its time
panel, mapped from pixels to milliseconds and tokens with the axes the SVG carries, and
the checks every such picture must pass (tests/client/test_svg.py, test_client.py)."""
import math
import xml.etree.ElementTree as ET

from checks import check

NS = "{http://www.w3.org/2000/svg}"
MAX_POINTS = 2000  # CL_CDF_MAX_POINTS in client.h


def points(el):
    return [tuple(float(v) for v in p.split(",")) for p in el.get("points").split()]


def percentile(values, q):
    """numpy.percentile's default (linear) method."""
    v = sorted(values)
    rank = q / 100.0 * (len(v) - 1)
    lo = int(math.floor(rank))
    if lo >= len(v) - 1:
        return v[-1]
    return v[lo] + (v[lo + 1] - v[lo]) * (rank - lo)


class RunPicture:
    """The parsed picture: .cdf (the panel's <g>), .curves {key: polyline},
    .marks {key: [circle, ...]}, .rate and .flight (the time panel's lines)."""

    def __init__(self, path):
        self.root = ET.parse(path).getroot()
        self.cdf = self.root.find(NS + "g[@id='cdf']")
        self.time = self.root.find(NS + "g[@id='time']")
        self.curves = {p.get("data-series"): p for p in self.root.iter(NS + "polyline")
                       if p.get("class") == "cdf"}
        self.marks = {}
        for c in self.root.iter(NS + "circle"):
            self.marks.setdefault(c.get("data-series"), []).append(c)
        lines = {p.get("data-series"): p for p in self.root.iter(NS + "polyline")
                 if p.get("class") == "time"}
        self.rate, self.flight = lines.get("tokens_per_s"), lines.get("in_flight")
        g = self.cdf
        self.l, self.r = float(g.get("data-left")), float(g.get("data-right"))
        self.t, self.b = float(g.get("data-top")), float(g.get("data-bottom"))
        self.lo, self.hi = float(g.get("data-x-lo")), float(g.get("data-x-hi"))

    def x_px(self, ms):
        d0, d1 = math.log10(self.lo), math.log10(self.hi)
        v = math.log10(ms) if ms > 0 else d0
        return self.l + (self.r - self.l) * (min(max(v, d0), d1) - d0) / (d1 - d0)

    def y_px(self, frac):
        return self.b - (self.b - self.t) * frac

    def frac(self, y):
        return (self.b - y) / (self.b - self.t)

    def counts(self):
        return [int(c) for c in self.rate.get("data-counts").split()]

    def bin_s(self):
        return float(self.rate.get("data-bin-s"))


def check_curve_shape(pic, key, n, what):
    """A curve of n samples: min(n, MAX_POINTS) points, x never decreasing, the fraction
    never decreasing and ending at 1.0 (its first point at 1/n when every sample is a
    point), the p50/p99 marks on their guides. Returns the points (or None)."""
    c = pic.curves.get(key)
    if not check(c is not None and int(c.get("data-n")) == n,
                 "%s: the %s curve says %d samples (%s)" % (what, key, n,
                                                           c is not None and c.get("data-n"))):
        return None
    pts = points(c)
    xs, fr = [p[0] for p in pts], [pic.frac(p[1]) for p in pts]
    check(len(pts) == min(n, MAX_POINTS), "%s: %s has %d points for %d samples"
          % (what, key, len(pts), n))
    check(all(a <= b for a, b in zip(xs, xs[1:]))
          and all(a <= b + 1e-9 for a, b in zip(fr, fr[1:])),
          "%s: %s is monotone (x and fraction never decrease)" % (what, key))
    check(abs(fr[-1] - 1.0) < 1e-3, "%s: %s ends at fraction 1.0 (%.5f)" % (what, key, fr[-1]))
    if n <= MAX_POINTS:
        check(abs(fr[0] - 1.0 / n) < 1e-3, "%s: %s starts at 1/n (%.5f)" % (what, key, fr[0]))
    marks = pic.marks.get(key, [])
    p50, p99 = float(c.get("data-p50")), float(c.get("data-p99"))
    ok = len(marks) == 2 and all(
        abs(float(m.get("cx")) - pic.x_px(v)) < 0.02
        and abs(float(m.get("cy")) - pic.y_px(q)) < 0.02
        for m, v, q in zip(marks, (p50, p99), (0.5, 0.99)))
    check(ok, "%s: %s marks p50 %.3f and p99 %.3f ms on their guides" % (what, key, p50, p99))
    return pts
