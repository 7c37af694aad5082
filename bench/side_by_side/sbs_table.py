"""Results of the side-by-side benchmark and their Markdown table."""

import platform
import subprocess
import time

LABEL = {"pp512": "prefill 512 tokens", "pp2000": "prefill 2,000 tokens",
         "b1@100": "decode batch 1 @~100", "b1@1900": "decode batch 1 @~1,900",
         "b16@100": "decode batch 16 @~100", "b16@1900": "decode batch 16 @~1,900",
         "b32@100": "decode batch 32 @~100", "b32@1900": "decode batch 32 @~1,900",
         "served": "served, 8 streams (96 in, 64 out)"}


class Results:
    def __init__(self):
        self.best = {}  # (isa, fmt, point, side) -> (rate, loads, ttft)
        self.na = set()
        self.errors = []

    def add(self, isa, fmt, point, side, rate, loads, ttft=None):
        key = (isa, fmt, point, side)
        if key not in self.best or rate > self.best[key][0]:
            self.best[key] = (rate, loads, ttft)

    def not_built(self, isa, fmt):
        self.na.add((isa, fmt))

    def error(self, isa, fmt, side, msg):
        self.errors.append("%s %s %s: %s" % (isa, fmt, side, msg))

    def get(self, isa, fmt, point, side):
        return self.best.get((isa, fmt, point, side))


def machine():
    try:
        out = subprocess.run(["lscpu"], stdout=subprocess.PIPE, text=True).stdout
        name = [ln.split(":", 1)[1].strip() for ln in out.splitlines()
                if ln.startswith("Model name")]
        return name[0] if name else platform.processor()
    except OSError:
        return platform.processor()


def cell(v):
    if v is None:
        return "–"
    rate, _, ttft = v
    return "%.1f" % rate + (" (TTFT p50 %.2f s)" % ttft if ttft is not None else "")


def loads_of(*vals):
    ls = [x for v in vals if v for x in v[1][:2]]
    sh = ["%.2f" % v[1][2] for v in vals if v and v[1][2] is not None]
    return ("%.1f–%.1f" % (min(ls), max(ls)) if ls else "") + (
        "; cpu %s" % " / ".join(sh) if sh else "")


def row(res, isa, fmt, point, llama_fmts):
    if (isa, fmt) in res.na:
        return "| %s | %s | n/a (not built) | | | |  |" % (LABEL[point], fmt)
    ours = res.get(isa, fmt, point, "ours")
    theirs = [(lf, res.get(isa, fmt, point, lf)) for lf in llama_fmts]
    have = [(lf, v) for lf, v in theirs if v]
    tcell = " / ".join("%s (%s)" % (cell(v), lf) for lf, v in have) or "–"
    ratio = per_cpu = ""
    if ours and have:
        lf, v = max(have, key=lambda t: t[1][0])
        ratio = "**%.2f**" % (ours[0] / v[0]) + (" vs %s" % lf if len(have) > 1 else "")
        if ours[1][2] and v[1][2]:
            per_cpu = "%.2f" % (ours[0] / ours[1][2] / (v[0] / v[1][2]))
    return "| %s | %s | %s | %s | %s | %s | %s |" % (LABEL[point], fmt, cell(ours), tcell, ratio,
                                                  per_cpu, loads_of(ours, *[v for _, v in have]))


def render(a, ctx, res, pairs_of):
    out = ["Side by side with llama.cpp, %s, %d threads, %s" % (
        machine(), a.threads, time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())),
        "llama.cpp commit %s (OMP_WAIT_POLICY %s); best of %d repetition(s) per side, "
        "interleaved%s" % (ctx.llama_commit or "?", a.llama_omp, a.reps,
                           "; ours with %s" % a.our_flags if a.our_flags else ""), ""]
    for isa in a.isas:
        out += ["### ISA path: %s (ours: %s; llama.cpp: %s)" % (
            isa, ctx.our_isa_note.get(isa, "?"), ctx.llama_cpu.get(isa, "?")), "",
            "| point | ours | ours, tok/s | llama.cpp, tok/s | ratio ours / llama.cpp | "
            "ratio per CPU second | load; cpu |", "|---|---|---|---|---|---|---|"]
        for point in a.points:
            for fmt in a.formats:
                out.append(row(res, isa, fmt, point, pairs_of(a, fmt)))
        out.append("")
    out.append("tok/s: prefill, the prompt's tokens over its time; decode, all sequences' "
               "tokens over the 64-step window; served, output tokens/s of mhla-bench. "
               "load: the 1-minute load average before and after the row's measurements (it "
               "counts the benchmark's own threads); cpu: CPU seconds per wall second of the "
               "tool run that measured the row, ours / llama.cpp's (%d would be every thread "
               "on a core all the time; a tool run also holds setup). Ratio per CPU second: "
               "each side's rate over its cpu share, a rough correction for a machine whose "
               "other work left the two sides unequal shares." % a.threads)
    out += [""] + ["errors: " + e for e in res.errors]
    return "\n".join(out)
