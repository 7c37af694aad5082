#!/usr/bin/python3
"""--weights q8 end to end (mhla-generate, mhla-server):

  1. f32, bf16 and f16 checkpoints (tied and untied heads, a vocabulary that leaves a
     partial block of 16 rows) load as q8; their logits stay within the quantization error
     of the f32 logits (and are not the same bits: the int8 path ran);
  2. a checkpoint whose matrices' input width is not a multiple of 32 is refused with the
     tensor's name and the alternatives; --weights q4 is refused naming the choices;
  3. mhla-server --weights q8 gives the greedy tokens of mhla-generate --weights q8 and says
     "weights":"q8" in its listening line;
  4. where the build has the CUDA simulator (mhla-generate-cudasim): --device cuda with q8
     (and with bf16dot) weights is refused naming --gpu-weights; --device auto runs on the CPU with the same
     bits as the CPU engine.
"""
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import server_proc  # noqa: E402
import testutil as tu  # noqa: E402

CKPTS = [
    ("f32_tied", "--vocab 100 --hidden 64 --layers 2 --heads 2 --chunk 8 --blocks 8 --tie"),
    ("bf16", "--vocab 77 --hidden 96 --layers 2 --heads 3 --kv-heads 1 --chunk 8 --blocks 8 "
             "--intermediate 160 --dtype bf16"),
    ("f16_elu", "--vocab 64 --hidden 32 --layers 2 --heads 2 --feature-map elu --normalize "
                "--chunk 4 --blocks 12 --dtype f16 --tie"),
]


def logits(gen, model, w, ids, out, extra=()):
    r = tu.run(gen, ["--model", model, "--prompt-ids", ids, "--max-tokens", "0", "--weights", w,
                     "--logits-out", out] + list(extra))
    return r, (np.fromfile(out, dtype=np.float32) if r.returncode == 0 else None)


def main():
    a = tu.parse_args(__doc__)
    gen = os.path.join(a.bin, "mhla-generate")
    fails = []
    n_pass = 0
    ids = tu.ids_arg((i * 37 + 5) % 64 for i in range(45))

    for i, (name, flags) in enumerate(CKPTS):
        d = tu.gen(os.path.join(a.work, name), *flags.split(), seed=300 + i)
        r32, f = logits(gen, d, "f32", ids, os.path.join(a.work, name + ".f32"))
        r8, q = logits(gen, d, "q8", ids, os.path.join(a.work, name + ".q8"))
        if f is None or q is None:
            fails.append("%s: %s %s" % (name, tu.describe(r32), tu.describe(r8)))
            continue
        V = f.size // 45
        err = tu.rel_err(q.reshape(-1, V), f.reshape(-1, V))
        same = np.mean(np.argmax(q.reshape(-1, V), 1) == np.argmax(f.reshape(-1, V), 1))
        print("%s: q8 against f32: worst relative logit error %.3g, argmax equal at %.0f%% of "
              "positions" % (name, err, 100 * same))
        # int8 keeps ~7 bits per value of weights and activations: on these tiny random
        # models ~0.1 of a row's rms at worst, argmax nearly always kept; a mis-packed row
        # or a wrong scale moves logits by their whole size. 0 would mean q8 never ran.
        if not (0 < err < 0.3) or same < 0.9:
            fails.append("%s: q8 logits moved by %.3g relative to f32" % (name, err))
        else:
            n_pass += 1

    bad = tu.gen(os.path.join(a.work, "bad_k"), *"--vocab 50 --hidden 48 --layers 1 --heads 2 "
                 "--chunk 8 --blocks 4".split(), seed=9)
    r = tu.run(gen, ["--model", bad, "--prompt-ids", "1,2", "--max-tokens", "0", "--weights", "q8"])
    msg = r.stderr
    if r.returncode in (0, None) or "multiple of 32" not in msg or "model.layers.0." not in msg \
            or "--weights f32 or bf16" not in msg:
        fails.append("hidden 48 with q8 not refused clearly: " + tu.describe(r))
    else:
        n_pass += 1
    r = tu.run(gen, ["--model", bad, "--prompt-ids", "1,2", "--max-tokens", "0", "--weights", "q3"])
    if r.returncode in (0, None) or "f32, bf16, q8, bf16dot or q4" not in r.stderr:
        fails.append("--weights q3 not refused naming the choices: " + tu.describe(r))
    else:
        n_pass += 1

    # the server with q8 weights: the tokens mhla-generate gives
    model = os.path.join(a.work, "f32_tied")
    prompt = [5, 17, 99, 3, 50, 41, 7]
    want = tu.run(gen, ["--model", model, "--prompt-ids", tu.ids_arg(prompt), "--max-tokens", "20",
                        "--ignore-eos", "--print-ids", "--weights", "q8"])
    server = os.path.join(a.bin, "mhla-server")
    if want.returncode != 0:
        fails.append("mhla-generate q8: " + tu.describe(want))
    elif os.path.exists(server):
        want_ids = [int(x) for x in want.stdout.replace(",", " ").split()]
        log = os.path.join(a.work, "server.log")
        srv = server_proc.start_logged([server, "--device", "cpu", "--model", model, "--port", "0",
                                        "--weights", "q8"], log)
        try:
            port, why = server_proc.listening_port(srv, log, 60)
            if port is None:
                fails.append("server with --weights q8 did not start: " + why[-1500:])
            else:
                import http.client
                import json
                listening = [l for l in open(log) if '"event":"listening"' in l]
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                conn.request("POST", "/v1/completions",
                             json.dumps({"prompt": prompt, "max_tokens": 20, "temperature": 0,
                                         "ignore_eos": True, "return_token_ids": True}),
                             {"Content-Type": "application/json"})
                got = json.loads(conn.getresponse().read())["choices"][0].get("token_ids")
                if got != want_ids or '"weights":"q8"' not in listening[0]:
                    fails.append("server q8: tokens %r, mhla-generate q8 %r; %s" %
                                 (got, want_ids, listening[0][:300]))
                else:
                    n_pass += 1
        finally:
            server_proc.stop(srv, 30)

    sim = os.path.join(a.bin, "mhla-generate-cudasim")
    if os.path.exists(sim):
        r = tu.run(sim, ["--model", model, "--prompt-ids", ids, "--max-tokens", "0", "--weights",
                         "q8", "--device", "cuda"])
        if r.returncode in (0, None) or "q8" not in r.stderr or "--gpu-weights" not in r.stderr:
            fails.append("--device cuda with q8 weights not refused clearly: " + tu.describe(r))
        else:
            n_pass += 1
        r = tu.run(sim, ["--model", model, "--prompt-ids", ids, "--max-tokens", "0", "--weights",
                         "bf16dot", "--device", "cuda"])
        if r.returncode in (0, None) or "bf16dot" not in r.stderr or \
                "--gpu-weights" not in r.stderr:
            fails.append("--device cuda with bf16dot weights not refused clearly: " +
                         tu.describe(r))
        else:
            n_pass += 1
        ra, qa = logits(sim, model, "q8", ids, os.path.join(a.work, "auto.q8"),
                        ["--device", "auto"])
        qc = np.fromfile(os.path.join(a.work, "f32_tied.q8"), dtype=np.float32)
        if qa is None or qa.tobytes() != qc.tobytes() or "CPU only" not in ra.stderr:
            fails.append("--device auto with q8 weights: not the CPU's bits, or no note: " +
                         tu.describe(ra))
        else:
            n_pass += 1
    else:
        print("(no mhla-generate-cudasim in %s: the GPU cases are left out)" % a.bin)

    for f in fails:
        print("FAIL: " + f)
    print("q8 weights: %d passed, %d failed" % (n_pass, len(fails)))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
