#!/usr/bin/python3
"""The CPU kernels' instruction-set paths give the same bits.

For one path (--isa avx512 | avx2 | neon | portable), when this CPU runs it:
  1. the exactness test (test_exactness.py) with every engine run on that path;
  2. the batch-independence test (test_batch_independence) on that path, f32, bf16, bf16dot,
     q8 and q4 weights;
  3. logits of random checkpoints (f32, bf16 and f16 files; f32, bf16, bf16dot, q8 and q4
     weights in memory, q8 and q4 also with MHLA_CPU_Q8_NO_DOT=1, the kernels without
     vpdpbusd / sdot, and with MHLA_CPU_Q8_NO_AMX=1, vpdpbusd where the default runs
     AMX-INT8 tiles for products of 6 rows or more (q4: 12), and
     bf16dot also with MHLA_CPU_BF16_NO_DOT=1 (fmas alone) and MHLA_CPU_BF16_NO_AMX=1
     MHLA_CPU_BF16_DOT=1 (vdpbf16ps without the tiles);
     GQA, MQA, elu + normalize, NaN in the unread upper triangle, tails of every length
     below 16) for every feed mode, compared byte for byte with the same runs on the
     portable path (--ref-isa), or with the logits another build wrote (--ref-dir: an
     aarch64 build under qemu against the x86-64 build, say).
A path this CPU (or this binary) cannot run is skipped (exit 77) with the reason.

--emulator runs every engine binary under a command (e.g. "qemu-aarch64 -L /usr/aarch64-linux-gnu").
"""
import os
import shlex
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import testutil as tu  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

# name -> gen_checkpoint flags; hidden and intermediate sizes leave tails of many lengths
# (q8 and q4 need input widths that are multiples of 32: the q8_ configs; their vocabularies leave
# a partial block of 16 rows)
CONFIGS = [
    ("gqa_relu", "--vocab 96 --hidden 64 --heads 4 --kv-heads 2 --feature-map relu --chunk 8 "
                 "--blocks 8 --intermediate 136"),
    ("mqa_elu_norm_bf16", "--vocab 100 --hidden 80 --heads 4 --kv-heads 1 --feature-map elu "
                          "--normalize --dtype bf16 --chunk 8 --blocks 12 --intermediate 120"),
    ("nan_upper_tied", "--vocab 83 --hidden 40 --heads 2 --feature-map relu --chunk 4 --blocks 30 "
                       "--intermediate 77 --upper-garbage nan --tie"),
    ("f16_identity_nogate", "--vocab 64 --hidden 32 --heads 4 --feature-map identity "
                            "--no-output-gate --dtype f16 --chunk 16 --blocks 6 --intermediate 50"),
    ("q8_gqa_tied", "--vocab 100 --hidden 64 --heads 4 --kv-heads 2 --feature-map relu --chunk 8 "
                    "--blocks 8 --intermediate 160 --tie"),
    ("q8_mqa_elu_norm_bf16", "--vocab 77 --hidden 96 --heads 3 --kv-heads 1 --feature-map elu "
                             "--normalize --dtype bf16 --chunk 8 --blocks 8 --intermediate 224"),
]
FEEDS = [["--feed", "prefill"], ["--feed", "decode"], ["--feed", "splits", "--split-seed", "3"],
         ["--feed", "prefill", "--threads", "1"]]
WEIGHTS = ["f32", "bf16", "bf16dot", "bf16dot-nodot", "bf16dot-noamx"]
# weight modes per config: "q8-nodot" is q8 with MHLA_CPU_Q8_NO_DOT=1; its reference logits
# are the q8 ones (every q8 kernel gives the same bits); "bf16dot-nodot" and "q4-nodot" the
# same for bf16dot and q4; "q8-noamx" and "q4-noamx" with MHLA_CPU_Q8_NO_AMX=1
Q8_WEIGHTS = ["f32", "q8", "q8-nodot", "q8-noamx", "q4", "q4-nodot", "q4-noamx"]


def weights_of(name):
    return Q8_WEIGHTS if name.startswith("q8_") else WEIGHTS


def weight_run(w, env):
    """(--weights value, environment) of a weight mode"""
    if w in ("q8-nodot", "q4-nodot"):
        return w[:2], dict(env, MHLA_CPU_Q8_NO_DOT="1")
    if w in ("q8-noamx", "q4-noamx"):
        return w[:2], dict(env, MHLA_CPU_Q8_NO_AMX="1")
    if w == "bf16dot-nodot":
        return "bf16dot", dict(env, MHLA_CPU_BF16_NO_DOT="1")
    if w == "bf16dot-noamx":
        return "bf16dot", dict(env, MHLA_CPU_BF16_NO_AMX="1", MHLA_CPU_BF16_DOT="1")
    return w, env


def extra_args(ap):
    ap.add_argument("--isa", required=True, help="the path under test")
    ap.add_argument("--ref-isa", default="portable", help="the path its logits are compared with")
    ap.add_argument("--ref-dir", default="", help="compare with the logits files in this dir instead")
    ap.add_argument("--save-dir", default="", help="also keep this path's logits files here")
    ap.add_argument("--ckpt-dir", default="", help="checkpoints (default: generated under --work)")
    ap.add_argument("--emulator", default="", help="command prefix for the engine binaries")
    ap.add_argument("--skip-exactness", action="store_true")
    ap.add_argument("--exactness-modes", default="", help="feed modes of the exactness test to run")
    ap.add_argument("--skip-batch", action="store_true")


def main():
    a = tu.parse_args(__doc__, extra_args)
    emu = shlex.split(a.emulator)
    gen = os.path.join(a.bin, "mhla-generate")
    listed = subprocess.run(emu + [gen, "--list-cpu-isas"], capture_output=True, text=True)
    if listed.returncode != 0:
        print("FAIL: %s --list-cpu-isas: %s" % (gen, listed.stderr.strip()))
        return 1
    runnable = listed.stdout.split()
    print("paths this CPU runs: %s" % " ".join(runnable))
    if a.isa not in runnable:
        print("SKIP: this CPU or binary does not run the '%s' path" % a.isa)
        return 77
    compare_ref = not a.ref_dir and a.ref_isa != a.isa
    if compare_ref and a.ref_isa not in runnable:
        print("FAIL: the reference path '%s' does not run here" % a.ref_isa)
        return 1
    failures = []

    env = dict(os.environ, MHLA_CPU_ISA=a.isa)
    if not a.skip_exactness:
        cmd = [sys.executable, os.path.join(HERE, "test_exactness.py"), "--bin", a.bin,
               "--work", os.path.join(a.work, "exactness"), "--device-args", "--cpu-isa " + a.isa]
        if a.exactness_modes:
            cmd += ["--modes", a.exactness_modes]
        r = subprocess.run(cmd, capture_output=True, text=True, env=env)
        print("exactness on %s: exit %d, %s" % (a.isa, r.returncode,
                                                 (r.stdout.strip().splitlines() or ["-"])[-1]))
        if r.returncode != 0:
            failures.append("exactness on %s:\n%s%s" % (a.isa, r.stdout[-3000:], r.stderr[-2000:]))

    ckpt = a.ckpt_dir or os.path.join(a.work, "ckpt")
    for i, (name, flags) in enumerate(CONFIGS):
        d = os.path.join(ckpt, name)
        if not os.path.exists(os.path.join(d, "config.json")):
            tu.gen(d, *flags.split(), seed=100 + i)

    if not a.skip_batch:
        bi = os.path.join(a.bin, "test_batch_independence")
        for name, _ in CONFIGS[:3] + CONFIGS[4:5]:
            for w in weights_of(name):
                warg, wenv = weight_run(w, env)
                r = subprocess.run(emu + [bi, os.path.join(ckpt, name), warg], capture_output=True,
                                   text=True, env=wenv)
                print("batch independence on %s, %s, %s weights: exit %d" % (a.isa, name, w,
                                                                             r.returncode))
                if r.returncode != 0:
                    failures.append("batch independence %s %s:\n%s%s" % (name, w, r.stdout[-2000:],
                                                                         r.stderr[-2000:]))

    n_same = 0
    for ci, (name, _) in enumerate(CONFIGS):
        d = os.path.join(ckpt, name)
        vocab = int(__import__("json").load(open(os.path.join(d, "config.json")))["vocab_size"])
        import random
        rng = random.Random(7 + ci)
        ids = tu.ids_arg(rng.randrange(vocab) for _ in range(53))
        for fi, feed in enumerate(FEEDS):
            for w in weights_of(name):
                warg, wenv = weight_run(w, os.environ)
                tag = "%s.feed%d.%s" % (name, fi, warg)
                outs = {}
                for isa in [a.isa] + ([a.ref_isa] if compare_ref else []):
                    out = os.path.join(a.work, "%s.%s.%s.logits" % (tag, w, isa))
                    r = subprocess.run(emu + [gen, "--model", d, "--prompt-ids", ids, "--max-tokens",
                                              "0", "--weights", warg, "--logits-out", out,
                                              "--cpu-isa", isa] + feed, capture_output=True,
                                       text=True, env=wenv)
                    if r.returncode != 0:
                        failures.append("%s on %s: %s" % (tag, isa, r.stderr.strip()[-1500:]))
                        break
                    outs[isa] = open(out, "rb").read()
                if len(outs) != (2 if compare_ref else 1):
                    continue
                if a.save_dir:
                    os.makedirs(a.save_dir, exist_ok=True)
                    with open(os.path.join(a.save_dir, tag + ".logits"), "wb") as f:
                        f.write(outs[a.isa])
                if compare_ref:
                    ref, ref_name = outs[a.ref_isa], a.ref_isa
                elif a.ref_dir:
                    p = os.path.join(a.ref_dir, tag + ".logits")
                    if not os.path.exists(p):
                        failures.append("%s: no reference logits %s" % (tag, p))
                        continue
                    ref, ref_name = open(p, "rb").read(), p
                else:
                    continue
                if len(outs[a.isa]) == 0 or outs[a.isa] != ref:
                    diff = next((k for k in range(min(len(ref), len(outs[a.isa])))
                                 if ref[k] != outs[a.isa][k]), -1)
                    failures.append("%s (%s): %s logits differ from %s (%d vs %d bytes, first at "
                                    "byte %d)" % (tag, w, a.isa, ref_name, len(outs[a.isa]),
                                                  len(ref), diff))
                else:
                    n_same += 1
    if compare_ref or a.ref_dir:
        print("logits byte-identical to %s: %d runs" % (a.ref_isa if compare_ref else a.ref_dir,
                                                        n_same))
    for f in failures:
        print("FAIL: " + f)
    if failures:
        return 1
    print("PASS: the %s path: exactness, batch independence and bitwise logits" % a.isa)
    return 0


if __name__ == "__main__":
    sys.exit(main())
