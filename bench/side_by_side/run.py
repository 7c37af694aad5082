#!/usr/bin/python3
"""Side by side with llama.cpp: our engine and llama.cpp on the same machine,
the same model shape and the same weight bytes, measured interleaved, and
the ratio table (ours / llama.cpp) printed in Markdown on stdout. Progress
goes to stderr.

Pairs (ours <-> llama.cpp's GGUF of the same byte size): bf16 <-> BF16 and
F16 (the ratio against the faster of the two), q8 <-> Q8_0, q4 <-> Q4_0 (our
q4 only where bench_decode accepts --weights q4, else the row says n/a).

Points: prefill of 512 and 2,000 tokens (ours: bench_decode --prefill;
theirs: llama-bench -p), decode at batch 1, 16 and 32 from positions ~100
and ~1,900 over 64 steps (ours: bench_decode --batch; theirs: llama-bench
-n 64 -d DEPTH at batch 1, llama-batched-bench -npp DEPTH -ntg 64 -npl B
-pps -kvu above: one shared prompt, as bench_decode clones one state), and
served: mhla-bench with 8 streams of 96-token prompts (token ids) and 64
tokens out against mhla-server and against llama-server (-np 8).

ISA paths: `default` (ours as the CPU allows, llama.cpp built with
-march=native) and `avx2` (ours --cpu-isa avx2, llama.cpp built with AVX2,
FMA and F16C and without AVX-512: build_llama.sh makes both builds).

Interleaving: for each repetition, ISA and format, our block of
measurements and llama.cpp's run back to back (which goes first alternates
between repetitions), so a change of load on the shared machine lands on
both sides; each side keeps its best repetition. The load average is read
around each block and printed with the table.

Without a llama.cpp tree (--llama or LLAMA_CPP_DIR, with build-native/bin
and build-avx2/bin) it says so and exits 0; --dry-run prints the plan only.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sbs_measure as ms  # noqa: E402
import sbs_table as tb  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
ALL_POINTS = ["pp512", "pp2000", "b1@100", "b1@1900", "b16@100", "b16@1900", "b32@100",
              "b32@1900", "served"]
PAIRS = {"bf16": ["BF16", "F16"], "bf16dot": ["BF16", "F16"], "q8": ["Q8_0"], "q4": ["Q4_0"]}


def log(msg):
    print("[%s] %s" % (time.strftime("%H:%M:%S"), msg), file=sys.stderr, flush=True)


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--llama", default=os.environ.get("LLAMA_CPP_DIR"),
                   help="llama.cpp tree with build-native/ and build-avx2/ (LLAMA_CPP_DIR)")
    p.add_argument("--build", default=os.path.join(ROOT, "build"), help="our build dir")
    p.add_argument("--model", default="/tmp/sbs/m340",
                   help="our checkpoint (made with gen_checkpoint.py --shape-340m --seed 7 "
                   "when absent)")
    p.add_argument("--gguf-dir", default="/tmp/sbs/gguf",
                   help="where the GGUFs of the same shape are (made when absent)")
    p.add_argument("--formats", default="bf16,q8,q4",
                   help="of bf16,q8,q4 and bf16dot (our bf16 weights with bf16 dot products, "
                   "against the same BF16/F16 files)")
    p.add_argument("--isas", default="default,avx2", help="of default,avx2")
    p.add_argument("--points", default=",".join(ALL_POINTS), help="of " + ",".join(ALL_POINTS))
    p.add_argument("--reps", type=int, default=1, help="repetitions (best kept per side)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--served-requests", type=int, default=48,
                   help="served: requests measured per side, after 8 left out (48: six rounds "
                   "of 8 streams, the same work on a fast machine as on a slow one)")
    p.add_argument("--served-seconds", type=int, default=0,
                   help="served: measure for this many seconds (after 3 left out) instead "
                   "of a count of requests")
    p.add_argument("--llama-formats", help="restrict llama.cpp's formats, e.g. BF16,Q8_0")
    p.add_argument("--llama-omp", default="default",
                   help="OMP_WAIT_POLICY for llama.cpp's tools ('default' leaves it unset, as "
                   "users run it: its best on a quiet machine, 3.5x passive's batch-1 decode "
                   "here; 'passive' where more threads run than cores: its default barriers "
                   "then ran batch-1 decode ~100x slower)")
    p.add_argument("--our-flags", default="",
                   help="more flags for bench_decode and mhla-server, e.g. '--thread-adapt off'")
    p.add_argument("--dry-run", action="store_true", help="print the plan, run nothing")
    p.add_argument("--log", help="append every tool's full output to this file")
    a = p.parse_args(argv)
    a.formats = [f for f in a.formats.split(",") if f]
    a.pairs = PAIRS
    a.isas = [i for i in a.isas.split(",") if i]
    a.points = [x for x in a.points.split(",") if x]
    bad = ([f for f in a.formats if f not in PAIRS] + [i for i in a.isas if i not in
           ("default", "avx2")] + [x for x in a.points if x not in ALL_POINTS])
    if bad:
        p.error("unknown: %s" % ", ".join(bad))
    if a.served_requests < 1 or a.served_seconds < 0:
        p.error("--served-requests must be at least 1 and --served-seconds at least 0")
    return a


def llama_bins(a):
    """{isa: bin dir} of the llama.cpp builds, or None with the reason."""
    if not a.llama:
        return None, "no llama.cpp tree given (--llama or LLAMA_CPP_DIR)"
    bins = {"default": os.path.join(a.llama, "build-native", "bin"),
            "avx2": os.path.join(a.llama, "build-avx2", "bin")}
    for isa in a.isas:
        for exe in ("llama-bench", "llama-batched-bench", "llama-server"):
            if not os.access(os.path.join(bins[isa], exe), os.X_OK):
                return None, "%s not built in %s (bench/side_by_side/build_llama.sh)" % (
                    exe, bins[isa])
    return bins, None


def their_formats(a, fmt):
    want = PAIRS[fmt]
    if a.llama_formats:
        want = [f for f in want if f in a.llama_formats.split(",")]
    return want


def plan(a):
    """(rep, isa, fmt) blocks in run order."""
    return [(r, isa, fmt) for r in range(a.reps) for isa in a.isas for fmt in a.formats]


def run_block(a, ctx, res, block):
    r, isa, fmt = block
    sides = [("ours", lambda: ms.ours_block(a, ctx, isa, fmt, res)),
             ("llama.cpp", lambda: ms.theirs_block(a, ctx, isa, fmt, their_formats(a, fmt),
                                                   res))]
    if r % 2:
        sides.reverse()
    for name, side in sides:
        log("rep %d/%d, %s, %s: %s" % (r + 1, a.reps, isa, fmt, name))
        try:
            side()
        except (RuntimeError, OSError, ValueError, KeyError) as e:
            log("error: %s" % e)
            res.error(isa, fmt, name, str(e))


def main(argv=None):
    a = parse(argv)
    bins, why = llama_bins(a)
    if a.dry_run:
        for blk in plan(a):
            print("rep %d isa %s: ours %s / llama.cpp %s: %s" % (
                blk[0] + 1, blk[1], blk[2], "/".join(their_formats(a, blk[2])),
                ", ".join(a.points)))
        print("llama.cpp: %s" % (why or "found in %s" % a.llama))
        return 0
    if bins is None:
        print("side_by_side: %s: skipped" % why, file=sys.stderr)
        return 0
    ctx = ms.Context(a, bins, log)
    if not os.access(ctx.bench_decode, os.X_OK):
        print("side_by_side: %s not built" % ctx.bench_decode, file=sys.stderr)
        return 2
    ctx.prepare_model()
    if "served" in a.points and not os.path.exists(os.path.join(a.model, "tokenizer.json")):
        # without one the server's stand-in codec gives ids above 255 no text, so every
        # chunk's text waits for the end: mhla-bench's TTFT would be the whole request's
        print("side_by_side: served needs a tokenizer.json in %s (e.g. the Llama-2 one, "
              "bench/side_by_side/README.md): without it no token has text until the end "
              "and TTFT means nothing" % a.model, file=sys.stderr)
        return 2
    res = tb.Results()
    for blk in plan(a):
        run_block(a, ctx, res, blk)
    print(tb.render(a, ctx, res, their_formats))
    return 0


if __name__ == "__main__":
    sys.exit(main())
