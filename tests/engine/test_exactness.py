#!/usr/bin/python3
"""Exactness of the engine's logits (docs/model.md, Exactness).

For several random checkpoints (GQA, elu + mhla_normalize, many small blocks with NaN in the
never-read upper triangle of the mixing matrix, identity feature map without output gate
and tied embeddings, bf16 and f16 weights, sharded checkpoints) and prompt lengths 1, C-1,
C, C+1, 5C+3 and the full context Lm*C (random ids), `mhla-generate --max-tokens 0
--logits-out` is run with --feed prefill, decode, splits (two split seeds) and prefill on two
threads, and every logit of every prompt position is compared with the independent numpy
reference (tests/tools/mhla_reference.py, a direct float64 evaluation of eq. 5).

Error measure (per logit): the relative error of a against reference b is
    |a - b| / max(|b|, rms(row of b))
where the row is the vocabulary row of b at the same position; so small logits are measured
against the typical logit size of their row rather than against themselves. A case passes
when the worst such value over all positions and vocabulary entries is <= 1e-4. The feed
modes are also compared against each other (prefill as b) with the same measure and bound.
The worst error per case is printed; the script exits non-zero on any failure.

The same script checks the CUDA backend: --generate names another build of mhla-generate (the
one linked with the CPU simulator of CUDA, or the real one) and --device-args adds e.g.
"--device cuda --gpu-weights f32" to every run; without a usable GPU it exits 77 (skipped).
"""
import os
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import mhla_reference  # noqa: E402
import testutil as tu  # noqa: E402

TOL = 1e-4

# name -> gen_checkpoint flags (all 2 layers)
CONFIGS = [
    ("A_gqa_relu", "--vocab 96 --hidden 64 --heads 4 --kv-heads 2 --feature-map relu --chunk 8 --blocks 8 "
                   "--intermediate 128"),
    ("B_elu_normalize", "--vocab 64 --hidden 32 --heads 2 --feature-map elu --normalize --chunk 8 --blocks 10 "
                        "--intermediate 64"),
    ("C_chunk4_40blocks", "--vocab 80 --hidden 48 --heads 2 --feature-map relu --chunk 4 --blocks 40 "
                          "--intermediate 96 --upper-garbage nan"),
    ("D_identity_nogate_tied", "--vocab 64 --hidden 32 --heads 4 --feature-map identity --no-output-gate --tie "
                               "--chunk 16 --blocks 6 --intermediate 64"),
    ("E_bf16_mqa_elu", "--vocab 100 --hidden 64 --heads 4 --kv-heads 1 --feature-map elu --dtype bf16 --chunk 8 "
                       "--blocks 12 --intermediate 128 --norm-eps 1e-5"),
    ("F_sharded_f32", "--vocab 64 --hidden 32 --heads 2 --expand-v 2 --feature-map relu --shards 3 --chunk 8 "
                      "--blocks 8"),
    ("G_f16_sharded_long", "--vocab 72 --hidden 64 --heads 4 --expand-k 1.0 --feature-map relu --dtype f16 "
                           "--shards 2 --chunk 16 --blocks 20 --intermediate 128"),
]

MODES = [("prefill", ["--feed", "prefill"]),
         ("decode", ["--feed", "decode"]),
         ("splits1", ["--feed", "splits", "--split-seed", "1"]),
         ("splits2", ["--feed", "splits", "--split-seed", "2"]),
         ("prefill_t2", ["--feed", "prefill", "--threads", "2"])]


def extra_args(ap):
    ap.add_argument("--only", default="", help="comma-separated config name prefixes to run")
    ap.add_argument("--jobs", type=int, default=2, help="engine processes run in parallel")
    ap.add_argument("--generate", default="mhla-generate", help="which mhla-generate binary in --bin")
    ap.add_argument("--device-args", default="", help="extra arguments for every engine run")
    ap.add_argument("--modes", default="", help="comma-separated feed modes to run (default: all)")
    ap.add_argument("--max-length", type=int, default=0, help="skip prompt lengths above this")


def main():
    a = tu.parse_args(__doc__, extra_args)
    exe = os.path.join(a.bin, a.generate)
    if not os.access(exe, os.X_OK):
        print("FAIL: %s not found / not executable" % exe)
        return 1
    dev_args = a.device_args.split()
    modes_run = [(m, ma) for m, ma in MODES if not a.modes or m in a.modes.split(",")]
    failures = []
    rows = []  # (config, T, {mode: err vs ref}, worst mode-vs-prefill, bitwise-equal modes, diag)
    only = [s for s in a.only.split(",") if s]
    probed = False
    pool = ThreadPoolExecutor(max_workers=a.jobs)
    for ci, (name, flags) in enumerate(CONFIGS):
        if only and not any(name.startswith(o) for o in only):
            continue
        mdir = tu.gen(os.path.join(a.work, name), *flags.split(), seed=100 + ci)
        ref = mhla_reference.Model(mdir)
        C, T_max, V = ref.C, ref.max_pos, ref.V
        lengths = sorted({n for n in (1, C - 1, C, C + 1, 5 * C + 3, T_max)
                          if 1 <= n <= T_max and (not a.max_length or n <= a.max_length)})
        if dev_args and not probed:
            probed = True
            p = tu.run(exe, ["--model", mdir, "--prompt-ids", "1", "--max-tokens", "0"] + dev_args)
            if p.returncode != 0 and "device cuda:" in p.stderr:
                print("SKIP: %s" % p.stderr.strip().splitlines()[-1])
                return 77
        rng = np.random.default_rng(1000 + ci)
        cases = []
        for T in lengths:
            ids = rng.integers(0, V, size=T)
            diag = {}
            with np.errstate(invalid="ignore", divide="ignore"):
                want = ref.logits(ids, diag)
            if not np.all(np.isfinite(want)):
                # e.g. mhla_normalize with a denominator of exactly 0 (0/0): undefined in eq. 4
                failures.append("%s T=%d: the reference itself is not finite (normaliser 0?); "
                                "pick another seed/config" % (name, T))
            jobs = {}
            for mode, margs in modes_run:
                out = os.path.join(a.work, "%s_T%d_%s.f32" % (name, T, mode))
                args = ["--model", mdir, "--prompt-ids", tu.ids_arg(ids), "--max-tokens", "0",
                        "--logits-out", out] + margs + dev_args
                if "--threads" not in margs:
                    args += ["--threads", "1"]
                jobs[mode] = (out, args, pool.submit(tu.run, exe, args, 300))
            cases.append((T, ids, want, diag, jobs))
        if name.startswith("A"):
            # the reference's CLI writes what the in-process evaluation gives
            T, ids, want = cases[-1][0], cases[-1][1], cases[-1][2]
            out = os.path.join(a.work, "ref_cli.f32")
            p = tu.run(sys.executable, [os.path.join(tu.TOOLS, "mhla_reference.py"), "--model", mdir,
                                        "--prompt-ids", tu.ids_arg(ids), "--logits-out", out])
            got = np.fromfile(out, dtype="<f4") if p.returncode == 0 else None
            if got is None or got.size != T * V or tu.rel_err(got.reshape(T, V), want) > 1e-6:
                failures.append("%s: mhla_reference.py CLI disagrees with the in-process reference (%s)"
                                % (name, tu.describe(p)))
        for T, ids, want, diag, jobs in cases:
            got, errs = {}, {}
            for mode, (out, args, fut) in jobs.items():
                p = fut.result()
                tag = "%s T=%d %s" % (name, T, mode)
                if p.returncode != 0:
                    failures.append("%s: exit %s: %s\n    command: %s %s" % (
                        tag, p.returncode, p.stderr.strip()[-600:], exe, " ".join(args)))
                    continue
                if not os.path.exists(out) or os.path.getsize(out) != T * V * 4:
                    failures.append("%s: --logits-out wrote %s bytes, expected %d" % (
                        tag, os.path.getsize(out) if os.path.exists(out) else "no file", T * V * 4))
                    continue
                g = np.fromfile(out, dtype="<f4").reshape(T, V)
                got[mode] = g
                errs[mode] = err = tu.rel_err(g, want)
                if err > TOL:
                    bad = np.abs(g - want) / np.maximum(np.abs(want),
                                                        np.sqrt(np.mean(want ** 2, 1, keepdims=True)))
                    pos = int(np.argmax(bad.max(axis=1)))
                    failures.append("%s: relative error %.3g > %g vs reference (worst at position %d, "
                                    "block %d)%s\n    command: %s %s" % (
                                        tag, err, TOL, pos, pos // C,
                                        " ref diag %s" % diag if diag else "", exe, " ".join(args)))
            base = got.get("prefill")
            cross = 0.0
            same = []
            if base is not None:
                for mode, g in got.items():
                    if mode == "prefill":
                        continue
                    e = tu.rel_err(g, base)
                    cross = max(cross, e)
                    if e > TOL:
                        failures.append("%s T=%d: %s vs prefill relative error %.3g > %g" % (name, T, mode, e, TOL))
                    if np.array_equal(g, base):
                        same.append(mode)
            rows.append((name, T, errs, cross if base is not None else None, same, diag))
    pool.shutdown()

    modes = [m for m, _ in modes_run]
    print("relative error vs the reference, |a-b| / max(|b|, rms(row of b)); tolerance %g" % TOL)
    print("%-24s %4s " % ("config", "T") + " ".join("%10s" % m for m in modes) + " %10s  %s" % (
        "x-mode", "bitwise = prefill"))
    worst = {}
    for name, T, errs, cross, same, diag in rows:
        cells = " ".join("%10.3g" % errs[m] if m in errs else "%10s" % "FAIL" for m in modes)
        line = "%-24s %4d %s %10s  %s" % (name, T, cells, "%.3g" % cross if cross is not None else "-",
                                          ",".join(same) or "none")
        if diag:
            line += "  [normaliser: max cond %.3g, min |den| %.3g]" % (
                diag["max_normalizer_condition"], diag["min_abs_normalizer"])
        print(line)
        for e in errs.values():
            worst[name] = max(worst.get(name, 0.0), e)
    print()
    print("worst relative error vs reference per config:")
    for k, v in worst.items():
        print("  %-24s %.3g" % (k, v))
    if failures:
        print("\n%d FAILURES:" % len(failures))
        for f in failures:
            print("  " + f)
        return 1
    print("\nPASS: all %d engine runs within %g of the reference and of each other"
          % (sum(len(r[2]) for r in rows), TOL))
    if not a.keep:
        import shutil
        shutil.rmtree(a.work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
