#!/usr/bin/python3
"""bench/side_by_side without llama.cpp: the GGUF converter and the script's
skip and plan paths, and its reading of bench_decode's output.

    test_side_by_side.py --source SRC --bin BUILD/bin --work DIR

- make_gguf.py writes a tiny llama-shaped model (D=64, 2 layers, 4 heads,
  I=128, V=320; and one untied with 2 kv heads) in F16, BF16, Q8_0 and Q4_0;
  an independent parse of each file (gguf_write.read_gguf: header, every
  key/value, tensor infos, alignment, data inside the file) finds the llama
  keys with the asked dims, the SentencePiece vocabulary of V pieces (the 256
  byte tokens llama.cpp looks up among them), every tensor with its llama.cpp
  name, shape and type, and each tensor's values equal to the generator's
  f32 values within its format's rounding (F16/BF16: half an ulp; Q8_0: half
  a step of its block's scale; Q4_0: one step). Q4_0 and Q8_0 are checked
  against values computed here by the formula, with the ties rounded by
  ggml's rule. Where a llama.cpp tree is named (LLAMA_CPP_DIR), its gguf-py
  reads the files too and its dequantization must give the same values.
- The reader refuses a truncated file and a bad magic (it can fail).
- run.py exits 0 saying it skipped when no llama.cpp tree is given, --dry-run
  prints one plan line per (isa, format), and an unknown point is a usage
  error (exit 2).
- bench_decode on the demo model: run.py's parser reads a rate for every
  prefill and decode point it asks for.
"""

import argparse
import os
import re
import subprocess
import sys

import numpy as np

TINY = ["--hidden", "64", "--layers", "2", "--heads", "4", "--intermediate", "128",
        "--vocab", "320"]
UNTIED = ["--hidden", "96", "--layers", "1", "--heads", "4", "--kv-heads", "2",
          "--intermediate", "160", "--vocab", "300", "--untied"]
FAILS = []


def check(cond, msg):
    if not cond:
        FAILS.append(msg)
        print("FAIL: " + msg)


def expected_names(layers, tie):
    names = {"token_embd.weight", "output_norm.weight"} | (set() if tie else {"output.weight"})
    for i in range(layers):
        names |= {"blk.%d.%s.weight" % (i, t) for t in (
            "attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate",
            "ffn_up", "ffn_down")}
    return names


def tolerance(x, gtype, g):
    """The largest error each element of x may carry in gtype."""
    if gtype == g.GGML_F16:
        return np.abs(x) * 2.0 ** -11 + 2.0 ** -25
    if gtype == g.GGML_BF16:
        return np.abs(x) * 2.0 ** -8
    amax = np.abs(x.reshape(-1, 32)).max(axis=1, keepdims=True)
    step = amax / (127.0 if gtype == g.GGML_Q8_0 else 8.0)
    # half a step of rounding (a whole one where Q4_0 clamps +8 to +7), plus
    # the f16 scale's own rounding times the largest code (127 or 8)
    err = 0.5 + 127 * 2.0 ** -11 if gtype == g.GGML_Q8_0 else 1.0 + 8 * 2.0 ** -11
    return np.broadcast_to(step * err + 1e-6, (x.size // 32, 32)).reshape(-1)


def check_values(path, mk, g, shape_args, type_name):
    a, s = mk.parse(["--out", path, "--type", type_name] + shape_args)
    _, specs = mk.build_writer(s, type_name, a.context)
    produce = mk.produce_fn(specs, a.seed)
    kv, tensors = g.read_gguf(path)
    with open(path, "rb") as f:
        buf = f.read()
    for name, (dims, gtype, off, nb) in tensors.items():
        n = int(np.prod(dims))
        got = g.decode(buf[off:off + nb], gtype, n)
        want = reference_values(specs, name, a.seed)
        err = np.abs(got - want)
        bad = err > tolerance(want, gtype, g)
        check(not bad.any(), "%s %s: %d values off, worst %.3g" % (type_name, name, bad.sum(),
                                                                   err.max()))
        check(buf[off:off + nb] == produce(name), "%s %s: bytes differ from encode()" %
              (type_name, name))
    return kv, tensors


def reference_values(specs, name, seed):
    import zlib
    dims, scale, _ = specs[name]
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
    n = int(np.prod(dims))
    if scale is None:
        return 1.0 + 0.1 * rng.standard_normal(n, dtype=np.float32)
    return rng.standard_normal(n, dtype=np.float32) * np.float32(scale)


def check_file(path, g, type_name, s):
    kv, tensors = g.read_gguf(path)
    ar = "llama."
    check(kv.get("general.architecture") == "llama", "architecture %r" %
          kv.get("general.architecture"))
    for key, want in (("embedding_length", s["hidden"]), ("block_count", s["layers"]),
                      ("attention.head_count", s["heads"]),
                      ("attention.head_count_kv", s["kv_heads"]),
                      ("feed_forward_length", s["intermediate"])):
        check(kv.get(ar + key) == want, "%s %s%s = %r, want %r" % (type_name, ar, key,
                                                                   kv.get(ar + key), want))
    toks = kv.get("tokenizer.ggml.tokens", [])
    check(len(toks) == s["vocab"] and len(set(toks)) == len(toks),
          "%s: %d tokens (%d distinct), want %d" % (type_name, len(toks), len(set(toks)),
                                                    s["vocab"]))
    check("<0x0A>" in toks and kv.get("tokenizer.ggml.model") == "llama",
          "%s: no SentencePiece byte tokens" % type_name)
    check(len(kv.get("tokenizer.ggml.scores", [])) == s["vocab"] and
          len(kv.get("tokenizer.ggml.token_type", [])) == s["vocab"],
          "%s: scores / token types not one per token" % type_name)
    check(set(tensors) == expected_names(s["layers"], s["tie"]),
          "%s: tensor names %s" % (type_name, sorted(set(tensors) ^
                                                     expected_names(s["layers"], s["tie"]))))
    D, I, V = s["hidden"], s["intermediate"], s["vocab"]
    dkv = D // s["heads"] * s["kv_heads"]
    for name, want in (("token_embd.weight", [D, V]), ("blk.0.attn_k.weight", [D, dkv]),
                       ("blk.0.ffn_down.weight", [I, D]), ("blk.0.ffn_up.weight", [D, I])):
        check(tensors[name][0] == want, "%s %s dims %s, want %s" % (type_name, name,
                                                                   tensors[name][0], want))
    gt = g.TYPE_BY_NAME[type_name]
    check(tensors["blk.0.attn_q.weight"][1] == gt and tensors["output_norm.weight"][1] == 0,
          "%s: matrix / norm types %d / %d" % (type_name, tensors["blk.0.attn_q.weight"][1],
                                               tensors["output_norm.weight"][1]))


def check_quant_formula(g):
    """Q8_0 / Q4_0 blocks by the formula of ggml's reference quantizers, on
    values that hit the rounding ties."""
    x = np.zeros(32, dtype=np.float32)
    x[0], x[1], x[2], x[3] = 127.0, 0.5, -0.5, 1.5  # d = 1: 0.5 -> 1, -0.5 -> -1, 1.5 -> 2
    q = g.q8_0(x)
    check(np.frombuffer(q[:2].tobytes(), "<f2")[0] == 1.0, "Q8_0 scale")
    check(list(q[2:6].view(np.int8)) == [127, 1, -1, 2], "Q8_0 values %s (ties away from 0)"
          % list(q[2:6].view(np.int8)))
    y = np.zeros(32, dtype=np.float32)
    y[0], y[16], y[1] = -8.0, 7.0, 3.5  # d = 1: 0 -> 0, 7+8 = 15, trunc(3.5+8.5) = 12
    q = g.q4_0(y)
    check(np.frombuffer(q[:2].tobytes(), "<f2")[0] == 1.0, "Q4_0 scale")
    check(q[2] == (0 | 15 << 4) and q[3] == (12 | 8 << 4), "Q4_0 nibbles %02x %02x" %
          (q[2], q[3]))


def check_reader_fails(path, g, work):
    with open(path, "rb") as f:
        buf = f.read()
    for what, data in (("truncated", buf[:len(buf) - 40]), ("bad magic", b"GGUX" + buf[4:])):
        bad = os.path.join(work, "bad.gguf")
        with open(bad, "wb") as f:
            f.write(data)
        try:
            g.read_gguf(bad)
            check(False, "the reader accepted a %s file" % what)
        except (ValueError, Exception) as e:  # struct.error on a cut header counts too
            print("refused %s: %s" % (what, e))


def check_gguf_py(paths, g):
    llama = os.environ.get("LLAMA_CPP_DIR")
    if not llama or not os.path.isdir(os.path.join(llama, "gguf-py")):
        print("note: no LLAMA_CPP_DIR with gguf-py: llama.cpp's reader not run")
        return
    sys.path.insert(0, os.path.join(llama, "gguf-py"))
    import gguf
    for path in paths:
        r = gguf.GGUFReader(path)
        _, mine = g.read_gguf(path)
        with open(path, "rb") as f:
            buf = f.read()
        for t in r.tensors:
            dims, gt, off, nb = mine[t.name]
            ref = gguf.quants.dequantize(t.data, t.tensor_type).reshape(-1)
            ok = off == t.data_offset and np.array_equal(ref, g.decode(buf[off:off + nb], gt,
                                                                        ref.size))
            check(ok, "gguf-py reads %s of %s differently" % (t.name, path))
    print("gguf-py: %d files read the same" % len(paths))


def run_script(src, args):
    p = subprocess.run([sys.executable, os.path.join(src, "bench/side_by_side/run.py")] + args,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       env={k: v for k, v in os.environ.items() if k != "LLAMA_CPP_DIR"})
    return p.returncode, p.stdout


def check_script(src, binp):
    rc, out = run_script(src, [])
    check(rc == 0 and "skipped" in out, "no llama.cpp: rc %d, %r" % (rc, out[-300:]))
    rc, out = run_script(src, ["--dry-run", "--formats", "bf16,q8", "--isas", "default,avx2",
                               "--points", "pp512,b16@100"])
    lines = [ln for ln in out.splitlines() if ln.startswith("rep ")]
    check(rc == 0 and len(lines) == 4, "dry run: rc %d, %d plan lines" % (rc, len(lines)))
    rc, out = run_script(src, ["--points", "pp999"])
    check(rc == 2, "an unknown point: rc %d" % rc)
    rc, out = run_script(src, ["--served-requests", "0"])
    check(rc == 2 and "--served-requests" in out, "--served-requests 0: rc %d" % rc)
    sys.path.insert(0, os.path.join(src, "bench/side_by_side"))
    import sbs_measure as ms
    import run as sbs_run
    span = ms.served_span(sbs_run.parse(["--served-requests", "40"]))
    check(span == ["--requests", "40", "--warmup-requests", "8"], "served by count: %s" % span)
    span = ms.served_span(sbs_run.parse(["--served-seconds", "30"]))
    check(span[:2] == ["--duration", "30"], "served by time: %s" % span)
    exe = os.path.join(binp, "bench_decode")
    if not os.access(exe, os.X_OK):
        check(False, "%s not built" % exe)
        return
    out = subprocess.run([exe, os.path.join(src, "models/brown-mhla"), "--batch", "1,16",
                          "--steps", "4", "--rounds", "1", "--threads", "2", "--prefill",
                          "64,200", "--weights", "q8"], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True).stdout
    got = ms.parse_bench_decode(out)
    want = ["pp64", "pp200", "b1@100", "b1@1900", "b16@100", "b16@1900"]
    check(all(got.get(p, 0) > 0 for p in want), "bench_decode read as %s" % got)
    # the timed prefills follow an untimed one, as llama-bench's follow its warm-up prompt
    warm = re.compile(r"^prefill warm-up: 1900 tokens untimed", re.M)
    first = re.search(r"^prefill: ", out, re.M)
    w = warm.search(out)
    check(w is not None and first is not None and w.start() < first.start(),
          "no untimed prefill before the timed ones with --warmup 1:\n%s" % out[:2000])
    out = subprocess.run([exe, os.path.join(src, "models/brown-mhla"), "--batch", "1",
                          "--steps", "4", "--rounds", "1", "--threads", "2", "--prefill", "64",
                          "--weights", "q8", "--warmup", "0"], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True).stdout
    check(warm.search(out) is None and ms.parse_bench_decode(out).get("pp64", 0) > 0,
          "--warmup 0 still ran the untimed prefill, or timed none:\n%s" % out[:2000])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    sys.path.insert(0, os.path.join(a.source, "bench/side_by_side"))
    import gguf_write as g
    import make_gguf as mk
    check_quant_formula(g)
    paths = []
    for shape in (TINY, UNTIED):
        for t in ("F16", "BF16", "Q8_0", "Q4_0"):
            path = os.path.join(a.work, "tiny-%d-%s.gguf" % (len(paths), t))
            rc = mk.main(["--out", path, "--type", t] + shape)
            check(rc == 0, "make_gguf %s exited %d" % (t, rc))
            check_file(path, g, t, mk.parse(["--out", path, "--type", t] + shape)[1])
            check_values(path, mk, g, shape, t)
            paths.append(path)
    check_reader_fails(paths[-1], g, a.work)
    check_gguf_py(paths, g)
    check_script(a.source, a.bin)
    print("%d checks failed" % len(FAILS) if FAILS else "all checks passed")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
