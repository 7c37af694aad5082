#!/usr/bin/python3
"""--weights q4 end to end (mhla-generate, mhla-server):

  1. f32, bf16 and f16 checkpoints (tied and untied heads, a vocabulary that leaves a
     partial block of 16 rows) load as q4; their logits move from f32's by the 4-bit step:
     between 2 and 32 times as far as q8's (the weights' step is 16 times q8's), and not
     the same bits as q8 (the 4-bit path ran);
  2. refusals, each naming the tensor and the way out: an input width that is not a
     multiple of 32 (hidden 48); MHLA_Q4_GROUP=64 on a width of 96; MHLA_Q4_GROUP=48;
  3. mhla-server --weights q4 gives the greedy tokens of mhla-generate --weights q4 and says
     "weights":"q4" in its listening line;
  4. where the build has the CUDA simulator (mhla-generate-cudasim): --device cuda with q4
     weights is refused naming q4 and --gpu-weights; --device auto runs on the CPU with the
     same bits as the CPU engine.
"""
import http.client
import json
import os
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


def logits(gen, model, w, ids, out, extra=(), env=None):
    r = tu.run(gen, ["--model", model, "--prompt-ids", ids, "--max-tokens", "0", "--weights", w,
                     "--logits-out", out] + list(extra), env=env)
    return r, (np.fromfile(out, dtype=np.float32) if r.returncode == 0 else None)


def accuracy(a, gen, ids):
    fails, n_pass = [], 0
    for i, (name, flags) in enumerate(CKPTS):
        d = tu.gen(os.path.join(a.work, name), *flags.split(), seed=300 + i)
        runs = {w: logits(gen, d, w, ids, os.path.join(a.work, "%s.%s" % (name, w)))
                for w in ("f32", "q8", "q4")}
        if any(v[1] is None for v in runs.values()):
            fails.append("%s: %s" % (name, "; ".join(tu.describe(v[0]) for v in runs.values())))
            continue
        f, q8, q4 = (runs[w][1] for w in ("f32", "q8", "q4"))
        V = f.size // 45
        e8 = tu.rel_err(q8.reshape(-1, V), f.reshape(-1, V))
        e4 = tu.rel_err(q4.reshape(-1, V), f.reshape(-1, V))
        same = np.mean(np.argmax(q4.reshape(-1, V), 1) == np.argmax(f.reshape(-1, V), 1))
        print("%s: worst relative logit error against f32: q8 %.3g, q4 %.3g (%.1fx); q4 argmax "
              "equal at %.0f%% of positions" % (name, e8, e4, e4 / e8 if e8 else 0, 100 * same))
        # a mis-packed nibble or a wrong scale moves logits by their whole size (far past
        # 32x); an int8 path, or none, stays at q8's error or below
        if not (2 * e8 < e4 < 32 * e8) or same < 0.5 or q4.tobytes() == q8.tobytes():
            fails.append("%s: q4 logits moved by %.3g relative to f32 (q8 %.3g)" % (name, e4, e8))
        else:
            n_pass += 1
    return fails, n_pass


def refusals(a, gen):
    fails, n_pass = [], 0
    bad = tu.gen(os.path.join(a.work, "bad_k"), *"--vocab 50 --hidden 48 --layers 1 --heads 2 "
                 "--chunk 8 --blocks 4".split(), seed=9)
    cases = [(bad, {}, ["multiple of 32", "model.layers.0.", "--weights f32 or bf16"]),
             (os.path.join(a.work, "bf16"), {"MHLA_Q4_GROUP": "64"},
              ["multiple of 64", "model.layers.0.", "MHLA_Q4_GROUP=32"]),
             (os.path.join(a.work, "bf16"), {"MHLA_Q4_GROUP": "48"}, ["not 32, 64 or 128"])]
    for model, env, words in cases:
        r = tu.run(gen, ["--model", model, "--prompt-ids", "1,2", "--max-tokens", "0",
                         "--weights", "q4"], env=dict(os.environ, **env))
        if r.returncode in (0, None) or any(w not in r.stderr for w in words):
            fails.append("%s %s with q4 not refused clearly (want %s): %s" %
                         (model, env, words, tu.describe(r)))
        else:
            n_pass += 1
    return fails, n_pass


def served(a, gen):
    """the server with q4 weights: the tokens mhla-generate gives"""
    model = os.path.join(a.work, "f32_tied")
    prompt = [5, 17, 99, 3, 50, 41, 7]
    want = tu.run(gen, ["--model", model, "--prompt-ids", tu.ids_arg(prompt), "--max-tokens", "20",
                        "--ignore-eos", "--print-ids", "--weights", "q4"])
    server = os.path.join(a.bin, "mhla-server")
    if want.returncode != 0:
        return ["mhla-generate q4: " + tu.describe(want)], 0
    if not os.path.exists(server):
        print("(no mhla-server in %s: the server case is left out)" % a.bin)
        return [], 0
    want_ids = [int(x) for x in want.stdout.replace(",", " ").split()]
    log = os.path.join(a.work, "server.log")
    srv = server_proc.start_logged([server, "--device", "cpu", "--model", model, "--port", "0",
                                    "--weights", "q4"], log)
    try:
        port, why = server_proc.listening_port(srv, log, 60)
        if port is None:
            return ["server with --weights q4 did not start: " + why[-1500:]], 0
        listening = [line for line in open(log) if '"event":"listening"' in line]
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        conn.request("POST", "/v1/completions",
                     json.dumps({"prompt": prompt, "max_tokens": 20, "temperature": 0,
                                 "ignore_eos": True, "return_token_ids": True}),
                     {"Content-Type": "application/json"})
        got = json.loads(conn.getresponse().read())["choices"][0].get("token_ids")
        if got != want_ids or '"weights":"q4"' not in listening[0]:
            return ["server q4: tokens %r, mhla-generate q4 %r; %s" %
                    (got, want_ids, listening[0][:300])], 0
        return [], 1
    finally:
        server_proc.stop(srv, 30)


def gpu(a, ids):
    sim = os.path.join(a.bin, "mhla-generate-cudasim")
    if not os.path.exists(sim):
        print("(no mhla-generate-cudasim in %s: the GPU cases are left out)" % a.bin)
        return [], 0
    fails, n_pass = [], 0
    model = os.path.join(a.work, "f32_tied")
    r = tu.run(sim, ["--model", model, "--prompt-ids", ids, "--max-tokens", "0", "--weights",
                     "q4", "--device", "cuda"])
    if r.returncode in (0, None) or "q4 weights" not in r.stderr or \
            "--gpu-weights" not in r.stderr:
        fails.append("--device cuda with q4 weights not refused clearly: " + tu.describe(r))
    else:
        n_pass += 1
    ra, qa = logits(sim, model, "q4", ids, os.path.join(a.work, "auto.q4"), ["--device", "auto"])
    qc = np.fromfile(os.path.join(a.work, "f32_tied.q4"), dtype=np.float32)
    if qa is None or qa.tobytes() != qc.tobytes() or "CPU only" not in ra.stderr:
        fails.append("--device auto with q4 weights: not the CPU's bits, or no note: " +
                     tu.describe(ra))
    else:
        n_pass += 1
    return fails, n_pass


def main():
    a = tu.parse_args(__doc__)
    gen = os.path.join(a.bin, "mhla-generate")
    ids = tu.ids_arg((i * 37 + 5) % 64 for i in range(45))
    fails, n_pass = [], 0
    for f, n in (accuracy(a, gen, ids), refusals(a, gen), served(a, gen), gpu(a, ids)):
        fails += f
        n_pass += n
    for f in fails:
        print("FAIL: " + f)
    print("q4 weights: %d passed, %d failed" % (n_pass, len(fails)))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
