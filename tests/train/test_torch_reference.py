#!/usr/bin/python3
"""The training forward (train/mhla_torch.py, chunkwise-parallel) equals the engine tests'
numpy reference (tests/tools/mhla_reference.py, eq. 5 summed directly) on random checkpoints,
and checkpoints written by the training code load in the C engine with the same logits.

Checks:
  * for each config (GQA; elu + mhla_normalize; no output gate + tied + identity + C=4 over
    40 blocks; bf16 weights) and prompt lengths (1, C-1, C+1, 3C+5, full context): torch
    float64 logits vs the float64 reference, max |diff| / max |ref| <= 1e-9; the float32
    torch model (what training runs) within 1e-4;
  * the torch model's mixing-matrix init is lower-triangular with row i = 1/(i+1);
    clamp_mixing() puts the lower triangle in [1e-5, 1] and zeroes the upper triangle;
  * save_checkpoint() of a torch model (f32 and f16), read by mhla-generate --logits-out,
    gives the torch logits of those weights within 1e-4 (relative to the max |logit|).
Exit 77 (ctest: skipped) with a message when PyTorch is not installed.
"""
import argparse
import os
import shutil
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "tools"))
sys.path.insert(0, os.path.join(ROOT, "train"))

from torch_or_skip import torch  # noqa: E402

import gen_checkpoint  # noqa: E402
import mhla_reference  # noqa: E402
import mhla_torch as mt  # noqa: E402

CONFIGS = [
    ("gqa", ["--vocab", 96, "--hidden", 64, "--layers", 2, "--heads", 4, "--kv-heads", 2,
             "--chunk", 8, "--blocks", 8]),
    ("elu_norm", ["--vocab", 80, "--hidden", 48, "--layers", 2, "--heads", 2, "--feature-map", "elu",
                  "--normalize", "--chunk", 8, "--blocks", 6]),
    ("nogate_tie_identity_c4", ["--vocab", 64, "--hidden", 32, "--layers", 2, "--heads", 4, "--kv-heads", 1,
                                "--chunk", 4, "--blocks", 40, "--tie", "--no-output-gate",
                                "--feature-map", "identity"]),
    ("bf16_nan_upper", ["--vocab", 72, "--hidden", 64, "--layers", 1, "--heads", 2, "--chunk", 16,
                        "--blocks", 4, "--dtype", "bf16", "--upper-garbage", "nan"]),
]


def rel(a, b):
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    torch.set_num_threads(1)
    failures = []

    def check(ok, msg):
        print(("ok    " if ok else "FAIL  ") + msg, flush=True)
        if not ok:
            failures.append(msg)

    for name, args in CONFIGS:
        d = os.path.join(a.work, name)
        gen_checkpoint.main(["--out", d, "--seed", "5"] + [str(x) for x in args])
        ref = mhla_reference.Model(d)
        m64 = mt.load_checkpoint(d, torch.float64)
        m32 = mt.load_checkpoint(d, torch.float32)
        C, ctx = ref.C, ref.max_pos
        rng = np.random.default_rng(len(name))
        for T in sorted({1, C - 1, C + 1, 3 * C + 5, ctx}):
            if T < 1 or T > ctx:
                continue
            ids = rng.integers(0, ref.V, size=T)
            want = ref.logits(ids)
            with torch.no_grad():
                got64 = m64(torch.tensor(ids)[None])[0].numpy()
                got32 = m32(torch.tensor(ids)[None])[0].double().numpy()
            e64, e32 = rel(got64, want), rel(got32, want)
            check(e64 <= 1e-9 and e32 <= 1e-4,
                  "%-24s T=%-4d torch f64 vs reference %.2e (<= 1e-9), torch f32 %.2e (<= 1e-4)"
                  % (name, T, e64, e32))

    # mixing-matrix init and the clamp applied after every optimiser step
    cfg = mt.Config(vocab_size=50, hidden_size=32, num_hidden_layers=1, num_heads=2, mhla_chunk_size=4,
                    mhla_num_blocks=6, tie_word_embeddings=True)
    model = mt.MHLAForCausalLM(cfg)
    model.init_weights(seed=3)
    mm = model.model.layers[0].attn.mixing_matrix.detach().reshape(6, 6).numpy()
    want = np.tril(np.ones((6, 6))) / np.arange(1, 7)[:, None]
    check(np.allclose(mm, want, rtol=0, atol=1e-7), "mixing matrix init: lower-triangular, row i = 1/(i+1)")
    with torch.no_grad():
        model.model.layers[0].attn.mixing_matrix.copy_(torch.linspace(-2, 3, 36).reshape(6, 6, 1, 1, 1, 1))
    model.clamp_mixing()
    mm = model.model.layers[0].attn.mixing_matrix.detach().reshape(6, 6).numpy()
    low = np.tril(np.ones((6, 6), bool))
    check(mm[low].min() >= np.float32(1e-5) and mm[low].max() <= 1.0 and (mm[~low] == 0).all()
          and np.isclose(mm[low], np.clip(np.linspace(-2, 3, 36).reshape(6, 6)[low], 1e-5, 1)).all(),
          "clamp_mixing: lower triangle clamped to [1e-5, 1], upper triangle zero")

    # checkpoints written by the training code, read by the C engine
    exe = os.path.join(a.bin, "mhla-generate")
    cfg = mt.Config(vocab_size=120, hidden_size=64, num_hidden_layers=2, num_heads=4, mhla_chunk_size=8,
                    mhla_num_blocks=5, tie_word_embeddings=True, bos_token_id=0, eos_token_id=0)
    model = mt.MHLAForCausalLM(cfg)
    model.init_weights(std=0.2, seed=4)
    with torch.no_grad():   # a trained-looking mixing matrix and norms, not the init
        for layer in model.model.layers:
            layer.attn.mixing_matrix.uniform_(0.0, 1.0)
            layer.attn.g_norm_swish_gate.weight.uniform_(0.5, 1.5)
    model.clamp_mixing()
    ids = np.random.default_rng(9).integers(0, 120, size=37)
    for dt_name, dt in (("f32", torch.float32), ("f16", torch.float16)):
        d = os.path.join(a.work, "saved_" + dt_name)
        mt.save_checkpoint(model, d, dt)
        back = mt.load_checkpoint(d, torch.float64)   # the weights as stored (f16-rounded)
        with torch.no_grad():
            want = back(torch.tensor(ids)[None])[0].numpy()
        out = os.path.join(a.work, "logits_%s.f32" % dt_name)
        p = subprocess.run([exe, "--model", d, "--prompt-ids", ",".join(map(str, ids)), "--max-tokens", "0",
                            "--threads", "1", "--logits-out", out], capture_output=True, text=True)
        if p.returncode != 0:
            check(False, "mhla-generate on a %s checkpoint written by train/: %s" % (dt_name, p.stderr.strip()))
            continue
        got = np.fromfile(out, dtype="<f4").reshape(len(ids), 120)
        e = rel(got, want)
        check(e <= 1e-4, "save_checkpoint(%s) -> mhla-generate logits vs torch: %.2e (<= 1e-4)" % (dt_name, e))

    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
