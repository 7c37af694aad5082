#!/usr/bin/python3
"""The run picture (client/svg_run.c) from known samples: test_client_svg writes it and
the samples; this test parses it (xml.etree: it must be well-formed) and maps every
point back through the axes the SVG carries. Each CDF point must be the sample it
stands for (sorted value, rank / n) to a hundredth of a pixel; a curve with more samples
than CL_CDF_MAX_POINTS keeps evenly spaced ranks ending at the largest; the log axis
covers the smallest and the largest sample; p50/p99 equal numpy's percentiles; the time
panel's bins hold exactly the tokens whose arrival falls in them, its steps sit at each
bin's tokens/s and mean requests in flight. Also a picture with no samples, and the
refusals (in the C program)."""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tools"))
from checks import check, finish  # noqa: E402
from svg_checks import MAX_POINTS, NS, RunPicture, check_curve_shape, percentile  # noqa: E402


def nice_ceil(x):
    if not x > 0:
        return 1.0
    p = 10.0 ** math.floor(math.log10(x))
    for m in (1.0, 2.0, 5.0, 10.0):
        if m * p >= x * (1 - 1e-12):
            return m * p


def check_curve(pic, key, samples):
    pts = check_curve_shape(pic, key, len(samples), "known")
    if pts is None:
        return
    s, n = sorted(samples), len(samples)
    k = len(pts)
    ranks = [i + 1 for i in range(n)] if n <= MAX_POINTS else \
        [math.ceil(j * n / k) for j in range(1, k + 1)]
    worst = max(max(abs(px - pic.x_px(s[i - 1])), abs(py - pic.y_px(i / n)))
                for (px, py), i in zip(pts, ranks))
    check(worst < 0.01, "%s: every point is (sorted sample, rank/n) (worst %.4f px)" % (key, worst))
    check(pic.lo <= s[0] and pic.hi >= s[-1], "%s: the axis %g..%g ms covers the samples "
          "%.4f..%.4f" % (key, pic.lo, pic.hi, s[0], s[-1]))
    c = pic.curves[key]
    for q in (50, 99):
        want, got = percentile(samples, q), float(c.get("data-p%d" % q))
        check(abs(got - want) <= 1e-7 * abs(want),
              "%s: p%d %.6f (numpy's %.6f)" % (key, q, got, want))


def expected_bins(k, span, bin_s):
    nb = max(1, int(math.floor(span / bin_s + 0.5)))
    counts, flight = [0] * nb, [0.0] * nb
    edge = lambda i: span if i == nb else i * bin_s  # noqa: E731 (the last bin reaches the end)
    for t in k["tokens"]:
        counts[min(max(int(math.floor(t / bin_s)), 0), nb - 1)] += 1
    for s, e in zip(k["start"], k["end"]):
        for i in range(nb):
            flight[i] += max(0.0, min(e, edge(i + 1)) - max(s, edge(i))) / (edge(i + 1) - edge(i))
    widths = [edge(i + 1) - edge(i) for i in range(nb)]
    return counts, flight, widths


def check_time(pic, k):
    span, bin_s = k["span_s"], pic.bin_s()
    want = nice_ceil(span / 600) if span > 600 else nice_ceil(span / 20) if span < 10 else 1.0
    check(bin_s == want, "bins of %g s for a %g s run (%g)" % (bin_s, span, want))
    counts, flight, widths = expected_bins(k, span, bin_s)
    got = pic.counts()
    check(got == counts and sum(got) == len(k["tokens"]),
          "the %d bins hold the tokens that arrived in them (%d tokens)" % (len(counts), sum(got)))
    g = pic.time
    l, r, t, b = (float(g.get("data-" + e)) for e in ("left", "right", "top", "bottom"))
    for name, line, vals in (("tokens/s", pic.rate, [c / w for c, w in zip(counts, widths)]),
                             ("in flight", pic.flight, flight)):
        top = nice_ceil(max(vals))
        pts = [tuple(float(v) for v in p.split(",")) for p in line.get("points").split()]
        ok = len(pts) == 2 * len(vals)
        worst = max(abs(y - (b - (b - t) * v / top)) for (x, y), v in
                    zip(pts, [v for v in vals for _ in (0, 1)])) if ok else 1e9
        xs = [x for x, _ in pts]
        ok = ok and abs(xs[0] - l) < 0.01 and abs(xs[-1] - r) < 0.01
        check(ok and worst < 0.01, "%s: one step per bin across the run at its value "
              "(worst %.4f px)" % (name, worst))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--prog", required=True, help="the test_client_svg program")
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    p = subprocess.run([a.prog, a.work], capture_output=True, text=True, timeout=120)
    print(p.stdout, end="")
    check(p.returncode == 0, "test_client_svg: its own checks pass (%s)" % p.stderr.strip())
    try:
        pic = RunPicture(os.path.join(a.work, "known.svg"))
        k = json.load(open(os.path.join(a.work, "known.json")))
    except (OSError, ET.ParseError, ValueError, AttributeError, TypeError) as e:
        check(False, "known.svg parses as SVG with both panels (%s)" % e)
        return finish()
    check(pic.root.tag == NS + "svg" and pic.cdf is not None and pic.time is not None,
          "known.svg is an <svg> with the CDF and the time panel")
    texts = "".join(pic.root.itertext())
    check("known <samples> & co" in texts, "the title's <, > and & are escaped, not lost")
    for key in ("ttft", "itl", "e2e"):
        check_curve(pic, key, k[key])
    check_time(pic, k)
    try:
        empty = RunPicture(os.path.join(a.work, "empty.svg"))
        ok = not empty.curves and not any(empty.counts()) and empty.flight is None
    except (OSError, ET.ParseError, AttributeError) as e:
        ok = False
        print(e)
    check(ok, "a run without samples: a well-formed picture with no curves and empty bins")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
