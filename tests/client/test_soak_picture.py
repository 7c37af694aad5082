#!/usr/bin/python3
"""The soak's picture (bench/soak_svg.py, drawn by bench/soak.py at the end of a soak).

1. From known results and request samples: the SVG parses (xml.etree), every RSS point
   maps back through its panel's axes to a sample's (t, rss_mib), the latency lines hold
   one point per interval with completed requests, their counts are the completed
   requests that ended in each interval (failed ones left out), and each point is that
   interval's p50 or p99 (numpy's definition).
2. A short real soak (bench/soak.sh 0.4 --interval 4 on the random demo model): it
   passes, writes RESULTS.svg beside RESULTS.jsonl, the RSS line has one point per
   sample line of the results file, and the latency lines count every request
   mhla-bench completed (its JSON: completed and ttft_ms.n).
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "tools"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from checks import check, finish  # noqa: E402
import soak_svg  # noqa: E402

NS = "{http://www.w3.org/2000/svg}"


def read(path):
    """{panel key: (mapping x px -> value, y px -> value, {series: (points, counts)})}"""
    root = ET.parse(path).getroot()
    out = {}
    for g in root.iter(NS + "g"):
        f = {k: float(g.get("data-" + k)) for k in ("x-lo", "x-hi", "y-lo", "y-hi", "left",
                                                     "right", "top", "bottom")}
        fx = lambda px, f=f: f["x-lo"] + (px - f["left"]) / (f["right"] - f["left"]) * (  # noqa
            f["x-hi"] - f["x-lo"])
        fy = lambda py, f=f: f["y-lo"] + (f["bottom"] - py) / (f["bottom"] - f["top"]) * (  # noqa
            f["y-hi"] - f["y-lo"])
        lines = {}
        for p in g.iter(NS + "polyline"):
            pts = [tuple(float(v) for v in q.split(",")) for q in p.get("points").split()]
            counts = [int(c) for c in p.get("data-counts", "").split()]
            lines[p.get("data-series")] = ([(fx(x), fy(y)) for x, y in pts], counts)
        out[g.get("id")] = lines
    return out


def close(a, b):
    return abs(a - b) <= 1e-3 * max(1.0, abs(b))


def known(work):
    res, smp, svg = (os.path.join(work, n) for n in ("known.jsonl", "known.samples.jsonl",
                                                     "known.svg"))
    rss = [(10.0 * i, 100 + 3.5 * i + (i % 3)) for i in range(1, 8)]
    with open(res, "w") as f:
        f.write(json.dumps({"event": "start", "minutes": 1, "interval_s": 10,
                            "rss_slope_limit_mib_per_min": 2}) + "\n")
        f.write(json.dumps({"event": "bench_started", "t": 0.5}) + "\n")
        for t, r in rss:
            f.write(json.dumps({"event": "sample", "t": t, "rss_mib": r, "pages_mib": 20}) + "\n")
        f.write(json.dumps({"event": "verdict", "pass": True, "rss_slope_mib_per_min": 0.1,
                            "bench": {"completed": 200, "failed": 0}}) + "\n")
    rows = [{"ok": i % 17 != 5, "end_s": 0.29 * i, "ttft_ms": 5 + (i * 7) % 40,
             "e2e_ms": 50 + (i * 13) % 400} for i in range(1, 201)]
    with open(smp, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    n = soak_svg.picture(res, smp, svg)
    ok_rows = [r for r in rows if r["ok"]]
    check(n == len(ok_rows), "known: %d completed requests drawn (%d)" % (len(ok_rows), n))
    try:
        pic = read(svg)
    except (OSError, ET.ParseError, ValueError, TypeError) as e:
        check(False, "known: the picture parses (%s)" % e)
        return
    got = pic["rss"]["rss"][0]
    check(len(got) == len(rss) and all(close(a, c) and close(b, d)
                                       for (a, b), (c, d) in zip(got, rss)),
          "known: every RSS point is a sample's (t, MiB)")
    less = pic["rss"]["rss_less_pages"][0]
    check(len(less) == len(rss) and all(close(y, r - 20) for (_, y), (_, r) in zip(less, rss)),
          "known: RSS less the state pages, per sample")
    groups = {}
    for r in ok_rows:
        groups.setdefault(math.floor((0.5 + r["end_s"]) / 10), []).append(r)
    for key in ("ttft", "e2e"):
        for q in (50, 99):
            pts, counts = pic[key]["%s_p%d" % (key, q)]
            want = [(k * 10 + 5, soak_svg.percentile([r[key + "_ms"] for r in g], q),
                     len(g)) for k, g in sorted(groups.items())]
            check(counts == [w[2] for w in want] and sum(counts) == len(ok_rows),
                  "known: %s p%d counts the completed requests per interval %s"
                  % (key, q, counts))
            check(len(pts) == len(want) and all(close(x, w[0]) and close(y, w[1])
                                                for (x, y), w in zip(pts, want)),
                  "known: %s p%d: one point per interval at its percentile" % (key, q))


def real_soak(work, build, model):
    out = os.path.join(work, "short.jsonl")
    env = dict(os.environ, BUILD=build, SOAK_OUT=out)
    p = subprocess.run([os.path.join(ROOT, "bench", "soak.sh"), "0.4", "--interval", "4",
                        "--model", model, "--concurrency", "4", "--cancellers", "1",
                        "--slow-readers", "1"], env=env, capture_output=True, text=True,
                       timeout=600)
    print(p.stdout[-2000:] + p.stderr[-2000:])
    check(p.returncode == 0, "a 24-second soak passes (exit %d)" % p.returncode)
    svg = os.path.join(work, "short.svg")
    try:
        pic = read(svg)
        lines = [json.loads(l) for l in open(out)]
        bench = json.load(open(out + ".bench.json"))["levels"][0]
    except (OSError, ET.ParseError, ValueError, KeyError) as e:
        check(False, "the soak wrote its picture, results and bench JSON (%s)" % e)
        return
    n_samples = sum(1 for e in lines if e.get("event") == "sample")
    got = pic["rss"]["rss"][0]
    check(len(got) == n_samples and n_samples >= 4,
          "soak: one RSS point per sample line (%d, %d)" % (len(got), n_samples))
    e2e = sum(pic["e2e"]["e2e_p99"][1])
    ttft = sum(pic["ttft"]["ttft_p50"][1])
    check(e2e == bench["completed"] and ttft == bench["ttft_ms"]["n"] and e2e > 0,
          "soak: the latency lines count mhla-bench's %d completed requests (%d E2E, %d TTFT)"
          % (bench["completed"], e2e, ttft))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--work", required=True)
    ap.add_argument("--build", required=True, help="build folder with bin/mhla-server")
    ap.add_argument("--model", required=True)
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    known(a.work)
    real_soak(a.work, a.build, a.model)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
