#!/usr/bin/python3
"""The picture of a soak run (bench/soak.py writes it at the end, as RESULTS.svg beside
RESULTS.jsonl): the server's RSS over time (and RSS less the state pool's pages, the
figure the leak criterion fits), and the time to first token and end-to-end latency of
mhla-bench's requests, p50 and p99 per interval (the soak's sampling interval), each
request counted in the interval in which it ended.

usage: bench/soak_svg.py RESULTS.jsonl [--samples BENCH_SAMPLES.jsonl] [--out FILE.svg]

The samples default to RESULTS.jsonl.bench.samples.jsonl (mhla-bench --samples, which
soak.py asks for); without them (soaks run before the picture existed) only RSS is
drawn. Their times count from mhla-bench's start of measurement, which follows its
launch (the "bench_started" line) by the prompts' synthesis, well under a second: the
latency intervals are placed from the launch.
"""
import argparse
import json
import math
import os
import sys

import svg_chart


def percentile(values, q):
    """numpy.percentile's default (linear) method, as mhla-bench's report."""
    v = sorted(values)
    rank = q / 100.0 * (len(v) - 1)
    lo = int(math.floor(rank))
    if lo >= len(v) - 1:
        return v[-1]
    return v[lo] + (v[lo + 1] - v[lo]) * (rank - lo)


def read_results(path):
    """(start event, samples, bench launch time in soak seconds or None, verdict or None)."""
    start, samples, bench_t, verdict = {}, [], None, None
    for line in open(path):
        try:
            e = json.loads(line)
        except ValueError:
            continue  # a line cut by an interrupted soak
        kind = e.get("event")
        if kind == "start":
            start = e
        elif kind == "sample":
            samples.append(e)
        elif kind == "bench_started":
            bench_t = e["t"]
        elif kind == "verdict":
            verdict = e
    return start, samples, bench_t, verdict


def latency_bins(rows, offset, bin_s):
    """Completed requests grouped by the interval their end falls in: a list of
    (interval middle, [ttft_ms], [e2e_ms]), in time order, empty intervals left out."""
    bins = {}
    for r in rows:
        if not r.get("ok"):
            continue
        k = int(math.floor((offset + r["end_s"]) / bin_s))
        ttft, e2e = bins.setdefault(k, ([], []))
        if r["ttft_ms"] >= 0:
            ttft.append(r["ttft_ms"])
        e2e.append(r["e2e_ms"])
    return [((k + 0.5) * bin_s, t, e) for k, (t, e) in sorted(bins.items())]


def latency_lines(bins, key, pick, color, unit):
    """p50 (dashed) and p99 lines of one latency, with each interval's request count."""
    pts = [(t, pick(ttft, e2e)) for t, ttft, e2e in bins if pick(ttft, e2e)]
    counts = " ".join(str(len(v)) for _, v in pts)
    return [svg_chart.Line(key + "_p99", key.upper() + " p99", [(t / unit, percentile(v, 99))
                                                                for t, v in pts],
                           color, dots=True, attrs={"counts": counts}),
            svg_chart.Line(key + "_p50", key.upper() + " p50", [(t / unit, percentile(v, 50))
                                                                for t, v in pts],
                           color, dash="6,3", dots=True, attrs={"counts": counts})]


def panels(start, samples, bins, bin_s, verdict):
    end = max([s["t"] for s in samples] + [t + bin_s / 2 for t, _, _ in bins] + [1.0])
    unit, uname = (60.0, "minutes") if end > 600 else (1.0, "seconds")
    x_range = (0.0, end / unit)
    secs = start.get("minutes", 0) * 60
    marks = [(max(60.0, secs / 3.0) / unit, "warm-up ends (leak fit after)"),
             (secs / unit, "load ends")] if secs else []
    rss = [svg_chart.Line("rss", "RSS", [(s["t"] / unit, s["rss_mib"]) for s in samples],
                          "#1f77b4", dots=True)]
    if any(s.get("pages_mib") for s in samples):
        rss.append(svg_chart.Line("rss_less_pages", "RSS less state pages",
                                  [(s["t"] / unit, s["rss_mib"] - s.get("pages_mib", 0))
                                   for s in samples], "#9467bd", dash="6,3", dots=True))
    slope = verdict and verdict.get("rss_slope_mib_per_min")
    note = None if slope is None else "RSS slope after the warm-up: %.2f MiB/min (limit %g)" % (
        slope, start.get("rss_slope_limit_mib_per_min", float("nan")))
    xt = "%s since the soak started" % uname
    out = [svg_chart.Panel("rss", xt, "MiB", rss, x_range, note=note, vlines=marks)]
    if bins:
        ivl = "p50 and p99 per %g s interval, by end time" % bin_s
        out.append(svg_chart.Panel("ttft", xt, "time to first token (ms)", latency_lines(
            bins, "ttft", lambda t, e: t, "#ff7f0e", unit), x_range, vlines=marks, note=ivl))
        out.append(svg_chart.Panel("e2e", xt, "end-to-end latency (ms)", latency_lines(
            bins, "e2e", lambda t, e: e, "#d62728", unit), x_range, vlines=marks, note=ivl))
    return out


def picture(results, samples_path, out):
    """Writes the picture; returns the number of bench requests drawn."""
    start, samples, bench_t, verdict = read_results(results)
    bin_s = float(start.get("interval_s", 30))
    rows = []
    if samples_path and os.path.exists(samples_path) and bench_t is not None:
        rows = [json.loads(l) for l in open(samples_path) if l.strip()]
    bins = latency_bins(rows, bench_t or 0.0, bin_s)
    b = (verdict or {}).get("bench") or {}
    title = "soak of mhla-server: %g min%s" % (start.get("minutes", 0), "" if not verdict else
                                               ", %s" % ("pass" if verdict["pass"] else "FAIL"))
    sub = "%s; %d samples every %g s" % (os.path.basename(results), len(samples), bin_s)
    if b:
        sub += "; mhla-bench %s completed, %s failed" % (b.get("completed"), b.get("failed"))
    svg_chart.write(out, title, sub, panels(start, samples, bins, bin_s, verdict))
    return sum(len(e) for _, _, e in bins)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", help="the soak's results file (JSON lines)")
    ap.add_argument("--samples", help="mhla-bench --samples of the soak "
                    "(default RESULTS.bench.samples.jsonl)")
    ap.add_argument("--out", help="the picture (default RESULTS with .svg for .jsonl)")
    a = ap.parse_args()
    samples = a.samples or a.results + ".bench.samples.jsonl"
    out = a.out or (a.results[:-6] if a.results.endswith(".jsonl") else a.results) + ".svg"
    n = picture(a.results, samples, out)
    print("soak picture: %s (%d requests)" % (out, n))
    return 0


if __name__ == "__main__":
    sys.exit(main())
