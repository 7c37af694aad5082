#!/usr/bin/python3
"""Independent numpy reference for the MHLA forward pass: docs/model.md evaluated DIRECTLY.

For every position p, eq. 5 is a sum over ALL earlier positions s <= p with coefficient
m[i][b(s)], i = floor(p / C), b(s) = floor(s / C), m = clamp(mixing_matrix[:, :, 0,0,0,0],
1e-5, 1). There are no block summaries and no recurrence: for each layer and head the
full [T, T] matrix of q~_p . k~_s is formed, multiplied by m[b(p)][b(s)] where s <= p
(entries with s > p are never read, so NaN garbage in the upper triangle is harmless),
and applied to V. O(T^2) per layer, vectorised.

Everything is computed in float64 except the rotary angle, which (as docs/model.md says) is
formed in float32: inv_freq_r = 1 / 10000 ** (2r / dk) in float32, angle = float32(p) *
inv_freq (float32 product); cos / sin of that float32 angle are taken in float64.
phi first, then rope, then the dk^-0.5 scale on q only. elu means elu(x) + 1.

CLI:
    mhla_reference.py --model DIR --prompt-ids 1,2,3 --logits-out FILE
writes float32 little-endian logits [n_prompt, vocab], row-major.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_np as st  # noqa: E402


class Model:
    def __init__(self, model_dir):
        cfg = st.load_config(model_dir)
        self.cfg = cfg
        self.w = st.load_checkpoint(model_dir, as_float64=True)
        self.V = cfg["vocab_size"]
        self.D = cfg["hidden_size"]
        self.L = cfg["num_hidden_layers"]
        self.H = cfg["num_heads"]
        self.Hkv = cfg.get("num_kv_heads") or self.H
        key_dim = int(self.D * cfg.get("expand_k", 0.5))
        value_dim = int(self.D * cfg.get("expand_v", 1.0))
        self.dk = key_dim // self.H
        self.dv = value_dim // self.H
        self.C = cfg.get("mhla_chunk_size", 64)
        self.normalize = bool(cfg.get("mhla_normalize", False))
        self.fmap = cfg["feature_map"]
        self.gate = cfg.get("use_output_gate", True)
        self.eps = cfg.get("norm_eps", 1e-6)
        self.tie = cfg.get("tie_word_embeddings", False)
        if cfg.get("hidden_act", "swish") != "swish":
            raise ValueError("hidden_act must be swish")
        if cfg.get("use_short_conv") or cfg.get("attn") is not None:
            raise ValueError("use_short_conv / attn not supported")
        mm = self.w["model.layers.0.attn.mixing_matrix"]
        self.Lm = mm.shape[0]
        self.max_pos = self.Lm * self.C

    def t(self, name):
        return self.w[name]

    def rmsnorm(self, x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * w

    def phi(self, x):
        if self.fmap == "relu":
            return np.maximum(x, 0.0)
        if self.fmap == "elu":
            return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))
        if self.fmap == "identity":
            return x
        raise ValueError("feature_map %r" % self.fmap)

    def rope_cos_sin(self, T):
        dk = self.dk
        r2 = np.arange(0, dk, 2, dtype=np.float32)
        inv_freq = np.float32(1.0) / (np.float32(10000.0) ** (r2 / np.float32(dk)))
        assert inv_freq.dtype == np.float32
        pos = np.arange(T, dtype=np.float32)
        ang = np.outer(pos, inv_freq)  # float32 products
        assert ang.dtype == np.float32
        ang = ang.astype(np.float64)
        return np.cos(ang), np.sin(ang)  # [T, dk/2]

    def rope(self, x, cos, sin):
        # x: [T, heads, dk]; rotate halves
        h = self.dk // 2
        a, b = x[..., :h], x[..., h:]
        c, s = cos[:, None, :], sin[:, None, :]
        return np.concatenate([a * c - b * s, b * c + a * s], axis=-1)

    def coeffs(self, layer, T):
        """[T, T] matrix M[p, s] = m[b(p)][b(s)] for s <= p, 0 above the diagonal."""
        mm = self.t("model.layers.%d.attn.mixing_matrix" % layer).reshape(self.Lm, self.Lm)
        blk = np.arange(T) // self.C
        raw = mm[blk[:, None], blk[None, :]]
        causal = np.arange(T)[None, :] <= np.arange(T)[:, None]
        # only entries with s <= p are read; upper garbage (even NaN) never enters
        return np.where(causal, np.clip(np.where(causal, raw, 0.0), 1e-5, 1.0), 0.0)

    def attn(self, layer, h, cos, sin, diag=None):
        p = "model.layers.%d.attn." % layer
        T = h.shape[0]
        H, Hkv, dk, dv = self.H, self.Hkv, self.dk, self.dv
        q = (h @ self.t(p + "q_proj.weight").T).reshape(T, H, dk)
        k = (h @ self.t(p + "k_proj.weight").T).reshape(T, Hkv, dk)
        v = (h @ self.t(p + "v_proj.weight").T).reshape(T, Hkv, dv)
        q = self.rope(self.phi(q), cos, sin) * (dk ** -0.5)
        k = self.rope(self.phi(k), cos, sin)
        M = self.coeffs(layer, T)
        grp = H // Hkv
        outs = []
        for j in range(H):
            kv = j // grp
            A = (q[:, j, :] @ k[:, kv, :].T) * M  # [T(p), T(s)]
            o = A @ v[:, kv, :]                    # eq. 5
            if self.normalize:
                den = A.sum(axis=1, keepdims=True)
                if diag is not None:
                    cond = np.abs(A).sum(axis=1) / np.maximum(np.abs(den[:, 0]), 1e-300)
                    diag["max_normalizer_condition"] = max(diag.get("max_normalizer_condition", 0.0),
                                                           float(cond.max()))
                    diag["min_abs_normalizer"] = min(diag.get("min_abs_normalizer", np.inf),
                                                     float(np.abs(den).min()))
                o = o / den
            outs.append(o)
        o = np.stack(outs, axis=1)  # [T, H, dv]
        if self.gate:
            g = (h @ self.t(p + "g_proj.weight").T).reshape(T, H, dv)
            o = self.rmsnorm(o, self.t(p + "g_norm_swish_gate.weight")) * (g / (1.0 + np.exp(-g)))
        else:
            o = self.rmsnorm(o, self.t(p + "g_norm.weight"))
        return o.reshape(T, H * dv) @ self.t(p + "o_proj.weight").T

    def mlp(self, layer, h):
        p = "model.layers.%d.mlp." % layer
        gt = h @ self.t(p + "gate_proj.weight").T
        up = h @ self.t(p + "up_proj.weight").T
        return (gt / (1.0 + np.exp(-gt)) * up) @ self.t(p + "down_proj.weight").T

    def logits(self, ids, diag=None):
        ids = np.asarray(ids, dtype=np.int64)
        T = len(ids)
        if T > self.max_pos:
            raise ValueError("prompt of %d tokens exceeds the context of %d" % (T, self.max_pos))
        if ids.min() < 0 or ids.max() >= self.V:
            raise ValueError("token id out of range")
        cos, sin = self.rope_cos_sin(T)
        x = self.t("model.embeddings.weight")[ids]
        for l in range(self.L):
            pre = "model.layers.%d." % l
            x = x + self.attn(l, self.rmsnorm(x, self.t(pre + "attn_norm.weight")), cos, sin, diag)
            x = x + self.mlp(l, self.rmsnorm(x, self.t(pre + "mlp_norm.weight")))
        x = self.rmsnorm(x, self.t("model.norm.weight"))
        head = self.t("model.embeddings.weight") if self.tie or "lm_head.weight" not in self.w \
            else self.t("lm_head.weight")
        if not self.tie and "lm_head.weight" not in self.w:
            raise ValueError("lm_head.weight missing and embeddings not tied")
        return x @ head.T  # float64 [T, V]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--prompt-ids")
    g.add_argument("--prompt-ids-file")
    ap.add_argument("--logits-out", required=True)
    a = ap.parse_args(argv)
    text = a.prompt_ids if a.prompt_ids is not None else open(a.prompt_ids_file).read()
    ids = [int(t) for t in text.replace(",", " ").split()]
    m = Model(a.model)
    m.logits(ids).astype("<f4").tofile(a.logits_out)


if __name__ == "__main__":
    main()
