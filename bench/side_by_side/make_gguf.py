#!/usr/bin/python3
"""Writes a llama-architecture GGUF of the same shape as one of our
checkpoints, with random weights, for the side-by-side benchmark against
llama.cpp.

Same shape: hidden size, layers, heads (and kv heads), MLP width, vocabulary
and tied embeddings. Our MHLA layer's q and k are half as wide as llama's and
it has an output gate of D x D; llama's four D x D attention matrices hold
exactly as many weights as our q, k, v, o and g together, so a step reads the
same weight bytes in the same format on both sides.

The matrices are all in the one type asked for (F16, BF16, Q8_0 or Q4_0; the
norms stay F32, as llama.cpp's own quantizer leaves them). The vocabulary is
a minimal SentencePiece ('llama') one of the same size: <unk>, <s>, </s>, the
256 byte tokens llama.cpp's loader looks up, then filler pieces; it exists
only so llama.cpp loads the file and llama-server can start. The benchmark
sends prompts as token ids.

usage: make_gguf.py --out FILE --type Q8_0 (--checkpoint DIR | --shape-340m |
                    --hidden D --layers L --heads H --intermediate I --vocab V)
"""

import argparse
import json
import math
import os
import sys
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_write as g  # noqa: E402

SHAPE_340M = dict(hidden=1024, layers=24, heads=4, kv_heads=4, intermediate=2816,
                  vocab=32000, norm_eps=1e-6, tie=True)


def shape_from_config(path):
    """The dims of one of our checkpoints (its config.json)."""
    with open(os.path.join(path, "config.json")) as f:
        c = json.load(f)
    D = c["hidden_size"]
    inter = c.get("intermediate_size")
    if inter is None:  # config.json's formula, hidden_ratio 4
        ratio = c.get("hidden_ratio") or 4
        inter = 256 * math.ceil(int(D * ratio * 2 / 3) / 256)
    return dict(hidden=D, layers=c["num_hidden_layers"], heads=c["num_heads"],
                kv_heads=c.get("num_kv_heads") or c["num_heads"], intermediate=inter,
                vocab=c["vocab_size"], norm_eps=c.get("norm_eps") or 1e-6,
                tie=bool(c.get("tie_word_embeddings")))


def tensor_specs(s):
    """(name, dims innermost first, init) in llama.cpp's naming; a linear
    layer y = W x stores W as [in, out]."""
    D, I, V = s["hidden"], s["intermediate"], s["vocab"]
    dkv = D // s["heads"] * s["kv_heads"]
    out = [("token_embd.weight", [D, V], 1.0), ("output_norm.weight", [D], None)]
    if not s["tie"]:
        out.append(("output.weight", [D, V], 1.0 / math.sqrt(D)))
    for i in range(s["layers"]):
        p = "blk.%d." % i
        out += [(p + "attn_norm.weight", [D], None),
                (p + "attn_q.weight", [D, D], 1.0 / math.sqrt(D)),
                (p + "attn_k.weight", [D, dkv], 1.0 / math.sqrt(D)),
                (p + "attn_v.weight", [D, dkv], 1.0 / math.sqrt(D)),
                (p + "attn_output.weight", [D, D], 1.0 / math.sqrt(D)),
                (p + "ffn_norm.weight", [D], None),
                (p + "ffn_gate.weight", [D, I], 1.0 / math.sqrt(D)),
                (p + "ffn_up.weight", [D, I], 1.0 / math.sqrt(D)),
                (p + "ffn_down.weight", [I, D], 1.0 / math.sqrt(I))]
    return out


def vocab(n):
    """A SentencePiece vocabulary of n pieces llama.cpp accepts."""
    if n < 3 + 256 + 1:
        raise ValueError("vocabulary of %d: at least 260 pieces needed (specials, bytes)" % n)
    toks = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
    types = [2, 3, 3] + [6] * 256  # unknown, control, byte
    letters = "abcdefghijklmnopqrstuvwxyz"
    k = 0
    while len(toks) < n:
        w, j = "", k
        while True:
            w, j = letters[j % 26] + w, j // 26
            if j == 0:
                break
        toks.append("\u2581" + w)
        types.append(1)
        k += 1
    scores = [0.0] * 259 + [-float(i) for i in range(n - 259)]
    return toks, scores, types


def build_writer(s, type_name, context):
    w = g.GGUFWriter()
    a = "llama."
    w.add("general.architecture", g.T_STRING, "llama")
    w.add("general.name", g.T_STRING, "mhla-shape-random-%s" % type_name)
    w.add("general.file_type", g.T_UINT32, g.FILE_TYPE[type_name])
    w.add("general.alignment", g.T_UINT32, g.ALIGNMENT)
    w.add(a + "context_length", g.T_UINT32, context)
    w.add(a + "embedding_length", g.T_UINT32, s["hidden"])
    w.add(a + "block_count", g.T_UINT32, s["layers"])
    w.add(a + "feed_forward_length", g.T_UINT32, s["intermediate"])
    w.add(a + "attention.head_count", g.T_UINT32, s["heads"])
    w.add(a + "attention.head_count_kv", g.T_UINT32, s["kv_heads"])
    w.add(a + "attention.layer_norm_rms_epsilon", g.T_FLOAT32, float(s["norm_eps"]))
    w.add(a + "rope.dimension_count", g.T_UINT32, s["hidden"] // s["heads"])
    w.add(a + "rope.freq_base", g.T_FLOAT32, 10000.0)
    w.add(a + "vocab_size", g.T_UINT32, s["vocab"])
    toks, scores, types = vocab(s["vocab"])
    w.add("tokenizer.ggml.model", g.T_STRING, "llama")
    w.add("tokenizer.ggml.tokens", g.T_ARRAY, toks, g.T_STRING)
    w.add("tokenizer.ggml.scores", g.T_ARRAY, scores, g.T_FLOAT32)
    w.add("tokenizer.ggml.token_type", g.T_ARRAY, types, g.T_INT32)
    w.add("tokenizer.ggml.unknown_token_id", g.T_UINT32, 0)
    w.add("tokenizer.ggml.bos_token_id", g.T_UINT32, 1)
    w.add("tokenizer.ggml.eos_token_id", g.T_UINT32, 2)
    w.add("tokenizer.ggml.add_bos_token", g.T_BOOL, False)
    gtype = g.TYPE_BY_NAME[type_name]
    specs = tensor_specs(s)
    for name, dims, scale in specs:
        w.add_tensor_info(name, dims, g.GGML_F32 if scale is None else gtype)
    return w, {name: (dims, scale, g.GGML_F32 if scale is None else gtype)
               for name, dims, scale in specs}


def produce_fn(specs, seed):
    def produce(name):
        dims, scale, gtype = specs[name]
        rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
        n = int(np.prod(dims))
        if scale is None:
            x = 1.0 + 0.1 * rng.standard_normal(n, dtype=np.float32)
        else:
            x = rng.standard_normal(n, dtype=np.float32) * np.float32(scale)
        return g.encode(x, gtype)
    return produce


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="GGUF file to write")
    p.add_argument("--type", required=True, choices=["F16", "BF16", "Q8_0", "Q4_0", "F32"])
    p.add_argument("--checkpoint", help="one of our checkpoint dirs: its config.json's shape")
    p.add_argument("--shape-340m", action="store_true", help="the 340M shape (D=1024, 24 layers, "
                   "4 heads, I=2816, V=32000, tied)")
    for k in ("hidden", "layers", "heads", "kv-heads", "intermediate", "vocab"):
        p.add_argument("--" + k, type=int)
    p.add_argument("--untied", action="store_true", help="with explicit dims: an output.weight")
    p.add_argument("--context", type=int, default=65536, help="llama.context_length (65536)")
    p.add_argument("--seed", type=int, default=7)
    a = p.parse_args(argv)
    if a.checkpoint:
        s = shape_from_config(a.checkpoint)
    elif a.shape_340m:
        s = dict(SHAPE_340M)
    else:
        need = ("hidden", "layers", "heads", "intermediate", "vocab")
        if any(getattr(a, k) is None for k in need):
            p.error("give --checkpoint, --shape-340m, or all of --hidden --layers --heads "
                    "--intermediate --vocab")
        s = {k: getattr(a, k) for k in need}
        s.update(kv_heads=a.kv_heads or a.heads, norm_eps=1e-6, tie=not a.untied)
    if s["hidden"] % s["heads"] or s["heads"] % s["kv_heads"]:
        p.error("hidden %d / heads %d / kv heads %d do not divide" %
                (s["hidden"], s["heads"], s["kv_heads"]))
    if a.type in ("Q8_0", "Q4_0") and (s["hidden"] % 32 or s["intermediate"] % 32):
        p.error("%s needs hidden and intermediate sizes that are multiples of 32" % a.type)
    return a, s


def main(argv=None):
    a, s = parse(argv)
    try:
        w, specs = build_writer(s, a.type, a.context)
        w.write(a.out, produce_fn(specs, a.seed))
    except (ValueError, OSError) as e:
        print("make_gguf: error: %s" % e, file=sys.stderr)
        return 1
    print("make_gguf: wrote %s (%s, %d bytes; D=%d L=%d H=%d I=%d V=%d)" %
          (a.out, a.type, os.path.getsize(a.out), s["hidden"], s["layers"], s["heads"],
           s["intermediate"], s["vocab"]), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
