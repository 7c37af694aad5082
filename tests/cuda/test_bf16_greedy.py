#!/usr/bin/python3
"""The CUDA backend with bf16 weights against the CPU backend (f32).

For random checkpoints, the CPU engine writes a greedy continuation of 200 tokens after a random
prompt. Then both engines evaluate prompt + continuation in one call (teacher forcing: each
position sees the same history), and at each of the 200 positions that chose a continuation
token the two argmaxes are compared. The test passes when they agree at >= 95% of positions for
every checkpoint. The logit error is reported: the largest |gpu - cpu| / rms(cpu row) and its
mean over positions.

Without a usable GPU (real backend) it exits 77: skipped.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import testutil as tu  # noqa: E402

N_GEN = 200
MIN_AGREE = 0.95
CONFIGS = [
    ("gqa_relu", "--vocab 256 --hidden 64 --layers 2 --heads 4 --kv-heads 2 --feature-map relu "
                 "--chunk 16 --blocks 16 --intermediate 128"),
    ("elu_normalize", "--vocab 200 --hidden 64 --layers 2 --heads 2 --feature-map elu --normalize "
                      "--chunk 16 --blocks 16 --intermediate 128 --tie"),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--generate", default="mhla-generate", help="the build of mhla-generate to test")
    ap.add_argument("--work", required=True)
    ap.add_argument("--device-args", default="--device cuda --gpu-weights bf16")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    cpu_exe = os.path.join(a.bin, "mhla-generate")
    dev_exe = os.path.join(a.bin, a.generate)
    dev_args = a.device_args.split()
    failures = []
    for ci, (name, flags) in enumerate(CONFIGS):
        mdir = tu.gen(os.path.join(a.work, name), *flags.split(), seed=300 + ci)
        rng = np.random.default_rng(400 + ci)
        V = int(flags.split("--vocab ")[1].split()[0])
        prompt = rng.integers(0, V, size=20)
        p = tu.run(cpu_exe, ["--model", mdir, "--prompt-ids", tu.ids_arg(prompt), "--max-tokens",
                             str(N_GEN), "--ignore-eos", "--print-ids"])
        if p.returncode != 0:
            failures.append("%s: CPU generation failed: %s" % (name, tu.describe(p)))
            continue
        cont = [int(x) for x in p.stdout.split()]
        if len(cont) != N_GEN:
            failures.append("%s: CPU generated %d ids, expected %d" % (name, len(cont), N_GEN))
            continue
        ids = list(prompt) + cont
        T = len(ids)
        out = {}
        for who, exe, extra in (("cpu", cpu_exe, []), ("gpu", dev_exe, dev_args)):
            f = os.path.join(a.work, "%s_%s.f32" % (name, who))
            p = tu.run(exe, ["--model", mdir, "--prompt-ids", tu.ids_arg(ids), "--max-tokens", "0",
                             "--logits-out", f] + extra, 600)
            if p.returncode != 0:
                if "device cuda:" in p.stderr:
                    print("SKIP: %s" % p.stderr.strip().splitlines()[-1])
                    return 77
                failures.append("%s: %s run failed: %s" % (name, who, tu.describe(p)))
                break
            out[who] = np.fromfile(f, dtype="<f4").reshape(T, V)
        if len(out) != 2:
            continue
        # positions len(prompt)-1 .. T-2 chose the continuation
        lo, hi = len(prompt) - 1, T - 1
        cpu, gpu = out["cpu"][lo:hi], out["gpu"][lo:hi]
        agree = float(np.mean(np.argmax(cpu, 1) == np.argmax(gpu, 1)))
        cpu_choice_ok = bool(np.all(np.argmax(cpu, 1) == np.array(cont)))
        rms = np.sqrt(np.mean(cpu.astype(np.float64) ** 2, 1, keepdims=True))
        rel = np.abs(gpu.astype(np.float64) - cpu) / rms
        print("%-14s greedy agreement %.3f over %d positions; logit error |gpu-cpu|/rms(row): "
              "max %.4g, mean of row maxima %.4g" % (name, agree, hi - lo, rel.max(),
                                                     rel.max(1).mean()))
        if not cpu_choice_ok:
            failures.append("%s: the CPU's teacher-forced argmax does not reproduce its own greedy "
                            "continuation" % name)
        if agree < MIN_AGREE:
            failures.append("%s: greedy agreement %.3f < %.2f" % (name, agree, MIN_AGREE))
    if failures:
        print("FAILURES:\n  " + "\n  ".join(failures))
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
