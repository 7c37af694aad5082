"""Grow a trained MHLA checkpoint into a wider and deeper one that computes the same function.

Used by `train.py --init-from DIR`: the bigger model starts where the smaller one ended and
training goes on from there, which gives a larger model that is better than the small one in
far fewer steps than training it from scratch (and that agrees with the small one closely
enough to serve as its speculative-decoding target).

Function preservation (exact up to the RMSNorm epsilon):
  - new hidden dimensions start at 0 in the residual stream: the embedding's new columns and
    every new output row of o_proj / down_proj are 0;
  - every RMSNorm over the hidden size sees the same values plus zeros, so its root mean square
    shrinks by sqrt(D_old / D_new); its weight is scaled by that factor to compensate;
  - new heads (same dk, dv) and new MLP units write nothing: their o_proj columns and
    down_proj columns are 0; new layers have o_proj = down_proj = 0 (identity);
  - everything that only reads the new (zero) dimensions or feeds the new units is random
    (init_weights' scale), so the new parts receive gradients and break symmetry.
"""
import math

import torch

import mhla_torch as mt


def _check(small, big):
    s, b = small.cfg, big.cfg
    if (s.dk, s.dv) != (b.dk, b.dv):
        raise ValueError("grow: head sizes differ (dk %d/%d, dv %d/%d): change the head count "
                         "with the width" % (s.dk, b.dk, s.dv, b.dv))
    for f in ("vocab_size", "feature_map", "use_output_gate", "mhla_chunk_size", "mhla_normalize",
              "tie_word_embeddings", "num_kv_heads"):
        if getattr(s, f) != getattr(b, f):
            raise ValueError("grow: %s differs (%r vs %r)" % (f, getattr(s, f), getattr(b, f)))
    if b.hidden_size < s.hidden_size or b.num_hidden_layers < s.num_hidden_layers or b.I < s.I:
        raise ValueError("grow: the new model must not be smaller in any dimension")
    if b.mhla_num_blocks < s.mhla_num_blocks:
        raise ValueError("grow: the new context must not be shorter")


def _grow_layer(sl, bl, scale):
    Ds = sl.attn_norm.weight.shape[0]
    for norm_s, norm_b in ((sl.attn_norm, bl.attn_norm), (sl.mlp_norm, bl.mlp_norm)):
        norm_b.weight.fill_(scale)
        norm_b.weight[:Ds] = norm_s.weight * scale
    a_s, a_b = sl.attn, bl.attn
    for name in ("q_proj", "k_proj", "v_proj", "g_proj"):
        if hasattr(a_s, name):
            ws = getattr(a_s, name).weight
            getattr(a_b, name).weight[: ws.shape[0], : ws.shape[1]] = ws
    for name in ("g_norm_swish_gate", "g_norm"):
        if hasattr(a_s, name):
            getattr(a_b, name).weight.copy_(getattr(a_s, name).weight)
    wo = a_s.o_proj.weight
    a_b.o_proj.weight.zero_()
    a_b.o_proj.weight[: wo.shape[0], : wo.shape[1]] = wo
    Ls, Lb = a_s.mixing_matrix.shape[0], a_b.mixing_matrix.shape[0]
    a_b.mixing_matrix.copy_(mt.init_mixing(Lb))
    a_b.mixing_matrix[:Ls, :Ls] = a_s.mixing_matrix
    m_s, m_b = sl.mlp, bl.mlp
    for name in ("gate_proj", "up_proj"):
        ws = getattr(m_s, name).weight
        getattr(m_b, name).weight[: ws.shape[0], : ws.shape[1]] = ws
    wd = m_s.down_proj.weight
    m_b.down_proj.weight.zero_()
    m_b.down_proj.weight[: wd.shape[0], : wd.shape[1]] = wd


@torch.no_grad()
def grow(small, big):
    """Overwrite `big` (freshly initialised) so that it computes what `small` computes."""
    _check(small, big)
    Ds, Db = small.cfg.hidden_size, big.cfg.hidden_size
    scale = math.sqrt(Ds / Db)
    big.model.embeddings.weight.zero_()
    big.model.embeddings.weight[:, :Ds] = small.model.embeddings.weight
    if not small.cfg.tie_word_embeddings:
        big.lm_head.weight[:, :Ds] = small.lm_head.weight
    big.model.norm.weight.fill_(scale)
    big.model.norm.weight[:Ds] = small.model.norm.weight * scale
    for i, bl in enumerate(big.model.layers):
        if i < len(small.model.layers):
            _grow_layer(small.model.layers[i], bl, scale)
        else:
            bl.attn.o_proj.weight.zero_()
            bl.mlp.down_proj.weight.zero_()
            for norm in (bl.attn_norm, bl.mlp_norm):
                norm.weight.fill_(1.0)
    return big
