#!/usr/bin/python3
"""Random MHLA checkpoint generator (docs/model.md: checkpoint directory, config.json,
tensors), numpy + standard library only.

Writes a Hugging Face checkpoint dir:
    config.json                     model_type "gla", attn_extends "mhla", all config.json fields
    model.safetensors               or, with --shards N > 1,
    model-0000K-of-0000N.safetensors + model.safetensors.index.json

Tensors are generated one at a time and streamed to the file (header first, computed from
the shapes alone, then the data), so the 340M shape (--shape-340m, ~1.4 GB in f32) needs
only about one tensor's worth of memory. Every tensor's values depend only on (--seed,
tensor name), so the same seed gives the same weights whatever --shards says.

Weights: linear weights N(0, 1/fan_in); embeddings N(0, 1); norm weights 1 + 0.1 N(0, 1);
untied lm_head N(0, 1/D). Mixing matrix [Lm, Lm, 1, 1, 1, 1] per layer: lower triangle
(b <= i) mostly uniform in (0.05, 1), with ~15% of entries (at least a few, diagonal and
off-diagonal) replaced by values outside [1e-5, 1] -- negative, > 1, or below 1e-5 -- to
exercise the clamp; the upper triangle (never read) holds large garbage (or NaN/inf with
--upper-garbage).

Example:
    /usr/bin/python3 tests/tools/gen_checkpoint.py --out /tmp/m --vocab 64 --hidden 32 \
        --layers 2 --heads 4 --kv-heads 2 --chunk 8 --blocks 8
"""
import argparse
import json
import math
import os
import struct
import sys
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_np as st  # noqa: E402

ESIZE = {"F32": 4, "F16": 2, "BF16": 2}
TORCH_DTYPE = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}


def default_intermediate(D, hidden_ratio=4):
    return 256 * math.ceil(int(D * hidden_ratio * 2 / 3) / 256)


def tensor_rng(seed, name):
    return np.random.default_rng([seed, zlib.crc32(name.encode())])


def mixing_matrix(rng, Lm, upper_garbage):
    m = rng.uniform(0.05, 1.0, size=(Lm, Lm))
    lower = [(i, b) for i in range(Lm) for b in range(i + 1)]
    n_bad = max(3, int(0.15 * len(lower)))
    pick = rng.choice(len(lower), size=min(n_bad, len(lower)), replace=False)
    # force at least one diagonal and one off-diagonal (when there is one) entry
    pick = list(pick)
    diag = [k for k, (i, b) in enumerate(lower) if i == b]
    offd = [k for k, (i, b) in enumerate(lower) if i != b]
    pick.append(int(rng.choice(diag)))
    if offd:
        pick.append(int(rng.choice(offd)))
    for n, k in enumerate(pick):
        i, b = lower[k]
        kind = n % 3
        if kind == 0:
            m[i, b] = -rng.uniform(0.01, 2.0)          # negative -> clamps to 1e-5
        elif kind == 1:
            m[i, b] = 1.0 + rng.uniform(0.01, 3.0)     # > 1 -> clamps to 1
        else:
            m[i, b] = 10.0 ** rng.uniform(-9, -5.2)    # tiny positive -> clamps to 1e-5
    up = np.triu_indices(Lm, k=1)
    if upper_garbage == "large":
        m[up] = rng.standard_normal(len(up[0])) * 100.0
    elif upper_garbage == "nan":
        g = rng.standard_normal(len(up[0])) * 100.0
        g[::2] = np.nan
        g[1::4] = np.inf
        m[up] = g
    elif upper_garbage == "zero":
        m[up] = 0.0
    return m.reshape(Lm, Lm, 1, 1, 1, 1)


def build_specs(a):
    """Returns list of (name, shape, init) in the order the reference writer stores them
    (sorted by name; one dtype)."""
    D, V, H, Hkv, L = a.hidden, a.vocab, a.heads, a.kv_heads, a.layers
    key_dim, value_dim = int(D * a.expand_k), int(D * a.expand_v)
    dk, dv = key_dim // H, value_dim // H
    I = a.intermediate
    specs = [("model.embeddings.weight", [V, D], ("normal", 1.0)),
             ("model.norm.weight", [D], ("norm",))]
    if not a.tie:
        specs.append(("lm_head.weight", [V, D], ("normal", 1.0 / math.sqrt(D))))
    for l in range(L):
        p = "model.layers.%d." % l
        lin = lambda o, i: ([o, i], ("normal", 1.0 / math.sqrt(i)))  # noqa: E731
        specs += [
            (p + "attn_norm.weight", [D], ("norm",)),
            (p + "attn.q_proj.weight",) + lin(H * dk, D),
            (p + "attn.k_proj.weight",) + lin(Hkv * dk, D),
            (p + "attn.v_proj.weight",) + lin(Hkv * dv, D),
            (p + "attn.o_proj.weight",) + lin(D, H * dv),
            (p + "attn.mixing_matrix", [a.blocks, a.blocks, 1, 1, 1, 1], ("mixing",)),
            (p + "mlp_norm.weight", [D], ("norm",)),
            (p + "mlp.gate_proj.weight",) + lin(I, D),
            (p + "mlp.up_proj.weight",) + lin(I, D),
            (p + "mlp.down_proj.weight",) + lin(D, I),
        ]
        if a.output_gate:
            specs += [(p + "attn.g_proj.weight",) + lin(H * dv, D),
                      (p + "attn.g_norm_swish_gate.weight", [dv], ("norm",))]
        else:
            specs += [(p + "attn.g_norm.weight", [dv], ("norm",))]
    specs.sort(key=lambda s: s[0])
    return specs


def make_tensor(a, name, shape, init):
    rng = tensor_rng(a.seed, name)
    if init[0] == "normal":
        n = int(np.prod(shape))
        return (rng.standard_normal(n, dtype=np.float32) * np.float32(init[1])).reshape(shape)
    if init[0] == "norm":
        return (1.0 + 0.1 * rng.standard_normal(shape)).astype(np.float32)
    if init[0] == "mixing":
        return mixing_matrix(rng, shape[0], a.upper_garbage).astype(np.float32)
    raise ValueError(init)


def write_safetensors(path, a, specs):
    """Two passes: header from the shapes, then each tensor generated and streamed."""
    esz = ESIZE[a.dtype]
    header = {"__metadata__": {"format": "pt"}}
    off = 0
    for name, shape, _ in specs:
        n = int(np.prod(shape)) * esz
        header[name] = {"dtype": a.dtype, "shape": shape, "data_offsets": [off, off + n]}
        off += n
    hb = st.header_bytes(header)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for name, shape, init in specs:
            t = make_tensor(a, name, shape, init)
            blob = st.encode(t, a.dtype)
            assert len(blob) == header[name]["data_offsets"][1] - header[name]["data_offsets"][0]
            f.write(blob)
            del t, blob
    return off


def make_config(a):
    cfg = {
        "architectures": ["GLAForCausalLM"],
        "model_type": "gla",
        "attn_extends": "mhla",
        "vocab_size": a.vocab,
        "hidden_size": a.hidden,
        "num_hidden_layers": a.layers,
        "num_heads": a.heads,
        "num_kv_heads": a.kv_heads if a.kv_heads_given else None,
        "expand_k": a.expand_k,
        "expand_v": a.expand_v,
        "feature_map": a.feature_map,
        "use_output_gate": a.output_gate,
        "hidden_act": "swish",
        "hidden_ratio": 4,
        "intermediate_size": a.intermediate if a.intermediate_given else None,
        "norm_eps": a.norm_eps,
        "tie_word_embeddings": a.tie,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "use_short_conv": False,
        "conv_size": 4,
        "attn": None,
        "attn_mode": "chunk",
        "mhla_chunk_size": a.chunk,
        "mhla_normalize": a.normalize,
        "max_position_embeddings": a.blocks * a.chunk,
        "elementwise_affine": True,
        "fuse_norm": True,
        "fuse_cross_entropy": True,
        "initializer_range": 0.02,
        "use_cache": True,
        "torch_dtype": TORCH_DTYPE[a.dtype],
        "transformers_version": "4.45.2",
    }
    return cfg


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="checkpoint dir to write (created)")
    p.add_argument("--vocab", type=int)
    p.add_argument("--hidden", type=int)
    p.add_argument("--layers", type=int)
    p.add_argument("--heads", type=int)
    p.add_argument("--kv-heads", type=int, help="default: = heads (written as null)")
    p.add_argument("--expand-k", type=float)
    p.add_argument("--expand-v", type=float)
    p.add_argument("--feature-map", choices=["relu", "elu", "identity"])
    p.add_argument("--chunk", type=int, help="mhla_chunk_size C")
    p.add_argument("--blocks", type=int, help="Lm, blocks covered by the mixing matrix")
    p.add_argument("--intermediate", type=int,
                   help="MLP width I; default: config.json's formula with hidden_ratio 4 (null)")
    p.add_argument("--normalize", action="store_true", default=None, help="mhla_normalize true")
    p.add_argument("--no-output-gate", dest="output_gate", action="store_false", default=None)
    p.add_argument("--tie", action="store_true", default=None, help="tie_word_embeddings (no lm_head.weight)")
    p.add_argument("--dtype", choices=["f32", "f16", "bf16"], default="f32")
    p.add_argument("--shards", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--norm-eps", type=float)
    p.add_argument("--upper-garbage", choices=["large", "nan", "zero"], default="large",
                   help="what the never-read upper triangle of the mixing matrix holds")
    p.add_argument("--shape-340m", action="store_true",
                   help="the paper's 340M shape (D=1024, 24 layers, H=4, I=2816, V=32000, tied, C=64, Lm=32)")
    a = p.parse_args(argv)
    if a.shape_340m:
        preset = dict(vocab=32000, hidden=1024, layers=24, heads=4, expand_k=0.5, expand_v=1.0,
                      feature_map="relu", intermediate=2816, tie=True, chunk=64, blocks=32)
    else:
        preset = dict(vocab=64, hidden=32, layers=2, heads=4, expand_k=0.5, expand_v=1.0,
                      feature_map="relu", intermediate=None, tie=False, chunk=8, blocks=8)
    preset.update(normalize=False, output_gate=True, norm_eps=1e-6)
    for k, v in preset.items():
        if getattr(a, k) is None:
            setattr(a, k, v)
    a.kv_heads_given = a.kv_heads is not None
    if a.kv_heads is None:
        a.kv_heads = a.heads
    a.intermediate_given = a.intermediate is not None and not a.shape_340m
    if a.intermediate is None:
        a.intermediate = default_intermediate(a.hidden)
    if a.shape_340m:
        a.intermediate_given = True
    a.dtype = a.dtype.upper()
    key_dim, value_dim = int(a.hidden * a.expand_k), int(a.hidden * a.expand_v)
    if key_dim % a.heads or value_dim % a.heads:
        p.error("key_dim %d / value_dim %d not divisible by heads %d" % (key_dim, value_dim, a.heads))
    if (key_dim // a.heads) % 2:
        p.error("head_k_dim must be even (rotary)")
    if a.heads % a.kv_heads:
        p.error("heads must be a multiple of kv-heads")
    if a.shards < 1:
        p.error("--shards must be >= 1")
    return a


def generate(a):
    os.makedirs(a.out, exist_ok=True)
    for fn in os.listdir(a.out):
        if fn.endswith(".safetensors") or fn == "model.safetensors.index.json":
            os.remove(os.path.join(a.out, fn))
    specs = build_specs(a)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(make_config(a), f, indent=2)
        f.write("\n")
    if a.shards == 1:
        write_safetensors(os.path.join(a.out, "model.safetensors"), a, specs)
        return
    esz = ESIZE[a.dtype]
    sizes = [int(np.prod(s[1])) * esz for s in specs]
    total = sum(sizes)
    n = min(a.shards, len(specs))
    groups, cur, acc = [], [], 0
    for spec, sz in zip(specs, sizes):
        cur.append(spec)
        acc += sz
        # close the shard when it reached its share, leaving at least one tensor per shard left
        remaining_specs = len(specs) - sum(len(g) for g in groups) - len(cur)
        if len(groups) < n - 1 and acc >= total * (len(groups) + 1) / n and remaining_specs >= n - 1 - len(groups):
            groups.append(cur)
            cur = []
    if cur:
        groups.append(cur)
    n = len(groups)
    weight_map = {}
    for k, g in enumerate(groups):
        fn = "model-%05d-of-%05d.safetensors" % (k + 1, n)
        write_safetensors(os.path.join(a.out, fn), a, g)
        for name, _, _ in g:
            weight_map[name] = fn
    with open(os.path.join(a.out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}, f, indent=2)
        f.write("\n")


def main(argv=None):
    a = parse_args(argv)
    generate(a)


if __name__ == "__main__":
    main()
