"""MHLA language model in PyTorch, in the checkpoint format of docs/model.md.

The module and parameter names are exactly the checkpoint's tensor names
(`model.embeddings.weight`, `model.layers.{l}.attn.q_proj.weight`, ..., `lm_head.weight`), so
`state_dict()` is the checkpoint and `load_checkpoint()` reads one written by anybody
(the authors' code, tests/tools/gen_checkpoint.py, train/train.py).

The token mixer is the chunkwise-parallel form (no per-token loop): with blocks of C tokens,
for query block i
    O_i = Q_i P_i + m[i][i] * tril(Q_i K_iᵀ) V_i,     P_i = Σ_{b<i} m[i][b] S_b,   S_b = K_bᵀ V_b
computed for all blocks at once with batched matmuls; m = clamp(mixing_matrix, 1e-5, 1) on
the lower triangle (the upper triangle is never read). A sequence whose length is not a
multiple of C is padded at the end (padding is causally invisible to real positions).
"""
import json
import math
import os
import struct

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

MIX_MIN, MIX_MAX = 1e-5, 1.0


def default_intermediate(D, hidden_ratio=4):
    return 256 * math.ceil(int(D * hidden_ratio * 2 / 3) / 256)


class Config:
    FIELDS = dict(vocab_size=32000, hidden_size=2048, num_hidden_layers=24, num_heads=4,
                  num_kv_heads=None, expand_k=0.5, expand_v=1.0, feature_map="relu",
                  use_output_gate=True, hidden_act="swish", hidden_ratio=4, intermediate_size=None,
                  norm_eps=1e-6, tie_word_embeddings=False, bos_token_id=1, eos_token_id=2,
                  use_short_conv=False, attn=None, mhla_chunk_size=64, mhla_normalize=False,
                  mhla_num_blocks=32)

    def __init__(self, **kw):
        for k, v in self.FIELDS.items():
            setattr(self, k, kw.get(k, v))
        if self.hidden_act != "swish":
            raise ValueError("hidden_act must be swish, not %r" % self.hidden_act)
        if self.use_short_conv or self.attn is not None:
            raise ValueError("use_short_conv / hybrid attn layers are not supported")
        if self.feature_map not in ("relu", "elu", "identity"):
            raise ValueError("feature_map %r is not relu, elu or identity" % self.feature_map)
        D, H = self.hidden_size, self.num_heads
        self.Hkv = self.num_kv_heads or H
        self.key_dim, self.value_dim = int(D * self.expand_k), int(D * self.expand_v)
        self.dk, self.dv = self.key_dim // H, self.value_dim // H
        self.I = self.intermediate_size or default_intermediate(D, self.hidden_ratio)

    @classmethod
    def from_dir(cls, d, num_blocks=None):
        with open(os.path.join(d, "config.json")) as f:
            cfg = json.load(f)
        if num_blocks is not None:
            cfg["mhla_num_blocks"] = num_blocks
        return cls(**cfg)

    def to_json(self):
        """config.json as the engine and the authors' GLA code read it."""
        return {
            "architectures": ["GLAForCausalLM"], "model_type": "gla", "attn_extends": "mhla",
            "vocab_size": self.vocab_size, "hidden_size": self.hidden_size,
            "num_hidden_layers": self.num_hidden_layers, "num_heads": self.num_heads,
            "num_kv_heads": self.num_kv_heads, "expand_k": self.expand_k, "expand_v": self.expand_v,
            "feature_map": self.feature_map, "use_output_gate": self.use_output_gate,
            "hidden_act": "swish", "hidden_ratio": self.hidden_ratio,
            "intermediate_size": self.intermediate_size, "norm_eps": self.norm_eps,
            "tie_word_embeddings": self.tie_word_embeddings, "bos_token_id": self.bos_token_id,
            "eos_token_id": self.eos_token_id, "use_short_conv": False, "conv_size": 4, "attn": None,
            "attn_mode": "chunk", "mhla_chunk_size": self.mhla_chunk_size,
            "mhla_normalize": self.mhla_normalize,
            "max_position_embeddings": self.mhla_num_blocks * self.mhla_chunk_size,
            "elementwise_affine": True, "fuse_norm": True, "fuse_cross_entropy": True,
            "initializer_range": 0.02, "use_cache": True,
        }


class RMSNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        dt = x.dtype
        x = x.float() if dt in (torch.float16, torch.bfloat16) else x
        y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return (y * self.weight).to(dt)


def init_mixing(Lm):
    """Lower-triangular, row i = 1/(i+1) (a running mean over the blocks so far)."""
    m = torch.zeros(Lm, Lm)
    for i in range(Lm):
        m[i, : i + 1] = 1.0 / (i + 1)
    return m.reshape(Lm, Lm, 1, 1, 1, 1)


def rope_tables(T, dk, device, dtype):
    """cos/sin [T, dk/2]; inverse frequencies and angles in float32 (docs/model.md)."""
    # computed exactly as the numpy reference does (numpy's float32 power): every tool of
    # the project then uses bit-identical inverse frequencies
    r2 = np.arange(0, dk, 2, dtype=np.float32)
    inv = np.float32(1.0) / (np.float32(10000.0) ** (r2 / np.float32(dk)))
    inv_freq = torch.from_numpy(inv.astype(np.float32)).to(device)
    ang = torch.arange(T, dtype=torch.float32, device=device)[:, None] * inv_freq[None, :]
    ang = ang.to(torch.float64) if dtype == torch.float64 else ang
    return ang.cos().to(dtype), ang.sin().to(dtype)


def apply_rope(x, cos, sin):
    # x [B, T, h, dk]; cos/sin [T, dk/2]
    h = x.shape[-1] // 2
    a, b = x[..., :h], x[..., h:]
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    return torch.cat([a * c - b * s, b * c + a * s], dim=-1)


class MHLAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        D, H, Hkv, dk, dv = cfg.hidden_size, cfg.num_heads, cfg.Hkv, cfg.dk, cfg.dv
        self.cfg = cfg
        self.q_proj = nn.Linear(D, H * dk, bias=False)
        self.k_proj = nn.Linear(D, Hkv * dk, bias=False)
        self.v_proj = nn.Linear(D, Hkv * dv, bias=False)
        if cfg.use_output_gate:
            self.g_proj = nn.Linear(D, H * dv, bias=False)
            self.g_norm_swish_gate = RMSNorm(dv, cfg.norm_eps)
        else:
            self.g_norm = RMSNorm(dv, cfg.norm_eps)
        self.o_proj = nn.Linear(H * dv, D, bias=False)
        self.mixing_matrix = nn.Parameter(init_mixing(cfg.mhla_num_blocks))

    def phi(self, x):
        fm = self.cfg.feature_map
        if fm == "relu":
            return F.relu(x)
        if fm == "elu":   # elu(x) + 1, without the cancellation of exp(x) - 1 + 1
            return torch.where(x > 0, x + 1.0, torch.exp(torch.clamp(x, max=0.0)))
        return x

    def mixing(self, n_blocks):
        Lm = self.mixing_matrix.shape[0]
        if n_blocks > Lm:
            raise ValueError("sequence of %d blocks exceeds the mixing matrix (%d blocks)" % (n_blocks, Lm))
        raw = self.mixing_matrix[:n_blocks, :n_blocks, 0, 0, 0, 0]
        low = torch.ones(n_blocks, n_blocks, dtype=torch.bool, device=raw.device).tril()
        zero = torch.zeros((), dtype=raw.dtype, device=raw.device)
        # only b <= i is ever read: garbage (even NaN) above the diagonal never enters
        return torch.where(low, torch.where(low, raw, zero).clamp(MIX_MIN, MIX_MAX), zero)

    def forward(self, h, cos, sin):
        cfg = self.cfg
        B, T, _ = h.shape
        H, Hkv, dk, dv, C = cfg.num_heads, cfg.Hkv, cfg.dk, cfg.dv, cfg.mhla_chunk_size
        q = self.q_proj(h).view(B, T, H, dk)
        k = self.k_proj(h).view(B, T, Hkv, dk)
        v = self.v_proj(h).view(B, T, Hkv, dv)
        q = apply_rope(self.phi(q), cos, sin) * (dk ** -0.5)
        k = apply_rope(self.phi(k), cos, sin)
        if Hkv != H:
            k = k.repeat_interleave(H // Hkv, dim=2)
            v = v.repeat_interleave(H // Hkv, dim=2)
        N = (T + C - 1) // C
        pad = N * C - T
        if pad:
            q, k, v = (F.pad(t, (0, 0, 0, 0, 0, pad)) for t in (q, k, v))
        # [B, H, N, C, d]
        q = q.view(B, N, C, H, dk).permute(0, 3, 1, 2, 4)
        k = k.view(B, N, C, H, dk).permute(0, 3, 1, 2, 4)
        v = v.view(B, N, C, H, dv).permute(0, 3, 1, 2, 4)
        m = self.mixing(N).to(q.dtype)                              # [N(i), N(b)]
        m_diag = torch.diagonal(m)                                  # m[i][i]
        m_off = m.tril(-1)                                          # b < i
        causal = torch.ones(C, C, dtype=torch.bool, device=h.device).tril()
        A = (q @ k.transpose(-1, -2)).masked_fill(~causal, 0.0)    # [B,H,N,C,C]
        A = A * m_diag.view(1, 1, N, 1, 1)
        S = k.transpose(-1, -2) @ v                                 # [B,H,N,dk,dv]
        P = torch.einsum("ib,zhbkv->zhikv", m_off, S)               # mixed prefix per block
        o = A @ v + q @ P
        if cfg.mhla_normalize:
            z = k.sum(dim=3)                                        # [B,H,N,dk]
            zp = torch.einsum("ib,zhbk->zhik", m_off, z)
            den = A.sum(-1) + (q @ zp.unsqueeze(-1)).squeeze(-1)
            o = o / den.unsqueeze(-1)
        o = o.permute(0, 2, 3, 1, 4).reshape(B, N * C, H, dv)[:, :T]
        if cfg.use_output_gate:
            g = self.g_proj(h).view(B, T, H, dv)
            o = self.g_norm_swish_gate(o) * F.silu(g)
        else:
            o = self.g_norm(o)
        return self.o_proj(o.reshape(B, T, H * dv))


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        D, I = cfg.hidden_size, cfg.I
        self.gate_proj = nn.Linear(D, I, bias=False)
        self.up_proj = nn.Linear(D, I, bias=False)
        self.down_proj = nn.Linear(I, D, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.attn_norm = RMSNorm(cfg.hidden_size, cfg.norm_eps)
        self.attn = MHLAttention(cfg)
        self.mlp_norm = RMSNorm(cfg.hidden_size, cfg.norm_eps)
        self.mlp = MLP(cfg)

    def forward(self, x, cos, sin):
        x = x + self.attn(self.attn_norm(x), cos, sin)
        return x + self.mlp(self.mlp_norm(x))


class Backbone(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embeddings = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(Layer(cfg) for _ in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.norm_eps)


class MHLAForCausalLM(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.model = Backbone(cfg)
        if not cfg.tie_word_embeddings:
            self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)

    def init_weights(self, std=0.02, seed=0):
        g = torch.Generator().manual_seed(seed)
        n_layers = self.cfg.num_hidden_layers
        for name, p in self.named_parameters():
            with torch.no_grad():
                if name.endswith("mixing_matrix"):
                    p.copy_(init_mixing(p.shape[0]))
                elif p.dim() == 1:
                    p.fill_(1.0)
                else:
                    s = std
                    if name.endswith("o_proj.weight") or name.endswith("down_proj.weight"):
                        s = std / math.sqrt(2 * n_layers)   # GPT-2 style residual scaling
                    p.copy_(torch.randn(p.shape, generator=g) * s)

    def head_weight(self):
        return self.model.embeddings.weight if self.cfg.tie_word_embeddings else self.lm_head.weight

    def hidden(self, ids):
        T = ids.shape[1]
        x = self.model.embeddings(ids)
        cos, sin = rope_tables(T, self.cfg.dk, ids.device, x.dtype)
        for layer in self.model.layers:
            x = layer(x, cos, sin)
        return self.model.norm(x)

    def forward(self, ids):
        return self.hidden(ids) @ self.head_weight().t()

    def loss(self, ids, targets):
        logits = self.forward(ids)
        return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1))

    @torch.no_grad()
    def clamp_mixing(self):
        """After every optimiser step: lower triangle into [1e-5, 1], upper triangle 0."""
        for layer in self.model.layers:
            mm = layer.attn.mixing_matrix
            Lm = mm.shape[0]
            low = torch.ones(Lm, Lm, dtype=torch.bool, device=mm.device).tril().view(Lm, Lm, 1, 1, 1, 1)
            mm.copy_(torch.where(low, mm.clamp(MIX_MIN, MIX_MAX), torch.zeros_like(mm)))


# ---------------------------------------------------------------- safetensors I/O (no package)

_DT = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "F64": torch.float64}
_DT_NAME = {v: k for k, v in _DT.items()}
_ESZ = {"F32": 4, "F16": 2, "BF16": 2, "F64": 8}


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in hdr.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        if info["dtype"] not in _DT:
            raise ValueError("%s: tensor %s has unsupported dtype %s" % (path, name, info["dtype"]))
        t = torch.frombuffer(bytearray(data[b:e]), dtype=_DT[info["dtype"]]) if e > b else \
            torch.empty(0, dtype=_DT[info["dtype"]])
        out[name] = t.reshape(info["shape"])
    return out


def write_safetensors(path, tensors, dtype=torch.float32, keep_f32=()):
    """tensors {name: tensor}; stored in `dtype` except names containing any of keep_f32."""
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().cpu()
        dt = torch.float32 if any(s in name for s in keep_f32) else dtype
        t = t.to(dt).contiguous()
        blob = t.view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": _DT_NAME[dt], "shape": list(t.shape), "data_offsets": [off, off + len(blob)]}
        blobs.append(blob)
        off += len(blob)
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * ((8 - len(hb) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def load_checkpoint_tensors(d):
    idx = os.path.join(d, "model.safetensors.index.json")
    if os.path.exists(idx):
        with open(idx) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
        out = {}
        for fn in files:
            out.update(read_safetensors(os.path.join(d, fn)))
        return out
    return read_safetensors(os.path.join(d, "model.safetensors"))


def load_checkpoint(d, dtype=torch.float32):
    """A model from a checkpoint directory (config.json + safetensors), weights in `dtype`."""
    tensors = load_checkpoint_tensors(d)
    Lm = tensors["model.layers.0.attn.mixing_matrix"].shape[0]
    cfg = Config.from_dir(d, num_blocks=Lm)
    model = MHLAForCausalLM(cfg)
    sd = model.state_dict()
    missing = [k for k in sd if k not in tensors]
    if missing:
        raise ValueError("%s: missing tensor %s" % (d, missing[0]))
    for k in sd:
        if tuple(tensors[k].shape) != tuple(sd[k].shape):
            raise ValueError("%s: tensor %s has shape %s, expected %s" % (d, k, list(tensors[k].shape),
                                                                         list(sd[k].shape)))
    model.load_state_dict({k: tensors[k].to(torch.float32) for k in sd})
    return model.to(dtype)


def save_checkpoint(model, d, dtype=torch.float32):
    """config.json + model.safetensors as docs/model.md lays out (mixing matrix always f32)."""
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        cfg = model.cfg.to_json()
        cfg["torch_dtype"] = {torch.float32: "float32", torch.float16: "float16",
                              torch.bfloat16: "bfloat16"}[dtype]
        json.dump(cfg, f, indent=2)
        f.write("\n")
    write_safetensors(os.path.join(d, "model.safetensors"), model.state_dict(), dtype,
                      keep_f32=("mixing_matrix",))
