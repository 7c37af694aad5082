#!/usr/bin/python3
"""Train an MHLA language model on CPU (or GPU) and export it in docs/model.md's checkpoint format.

    /usr/bin/python3 train/train.py --data train/data --run train/runs/brown --out models/brown-mhla
    (same command again resumes from train/runs/brown/state.pt)

Data: DATA/train.ids and DATA/val.ids (uint16 token ids, made by train/prepare_data.py) and
DATA/tokenizer.json. Training samples random windows of --seq-len + 1 tokens from the train
stream. AdamW (no weight decay on norms and the mixing matrices), linear warm-up then cosine
decay to --min-lr-ratio of the peak, gradient clipping at --clip, mixing matrices clamped
to [1e-5, 1] after every step. Every --log-every steps a progress line (loss, lr, tokens/s,
ETA); every --eval-every steps the validation perplexity, a resumable state (model,
optimiser, step, RNG) in RUN/state.pt and an export to --out.

Perplexity (here, in eval.py and in mhla-generate --perplexity): the token stream is cut into
consecutive windows of the model's context (Lm*C tokens); in each window every token but the
first is predicted from the tokens before it in that window; ppl = exp(mean NLL).
"""
import argparse
import json
import math
import os
import shutil
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grow  # noqa: E402
import mhla_torch as mt  # noqa: E402


def load_ids(path):
    return torch.from_numpy(np.fromfile(path, dtype="<u2").astype(np.int64))


@torch.no_grad()
def perplexity(model, ids, window, batch=4, max_tokens=None):
    """exp(mean NLL) over consecutive windows (see the module docstring). Returns (ppl, n, nll_sum)."""
    model.eval()
    if max_tokens:
        ids = ids[:max_tokens]
    wins = [ids[s:s + window] for s in range(0, len(ids), window)]
    wins = [w for w in wins if len(w) > 1]
    nll, n = 0.0, 0
    full = [w for w in wins if len(w) == window]
    rest = [w for w in wins if len(w) != window]
    groups = [torch.stack(full[i:i + batch]) for i in range(0, len(full), batch)] + [w[None] for w in rest]
    for x in groups:
        logits = model(x[:, :-1]).double()
        lp = torch.log_softmax(logits, dim=-1)
        nll -= lp.gather(-1, x[:, 1:, None]).sum().item()
        n += x[:, 1:].numel()
    model.train()
    return math.exp(nll / n), n, nll


def lr_at(step, a):
    if step < a.warmup:
        return a.lr * (step + 1) / a.warmup
    t = min(1.0, (step - a.warmup) / max(1, a.steps - a.warmup))
    return a.lr * (a.min_lr_ratio + (1 - a.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * t)))


def export(model, a, step, val_ppl, tokens_seen, train_seconds):
    out = a.out
    os.makedirs(out, exist_ok=True)
    dtype = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[a.export_dtype]
    mt.save_checkpoint(model, out, dtype)
    shutil.copyfile(os.path.join(a.data, "tokenizer.json"), os.path.join(out, "tokenizer.json"))
    eos = model.cfg.eos_token_id
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": model.cfg.bos_token_id, "eos_token_id": eos,
                   "temperature": 0.8, "top_p": 0.95}, f, indent=2)
        f.write("\n")
    with open(os.path.join(out, "training_info.json"), "w") as f:
        json.dump({"step": step, "steps": a.steps, "tokens_seen": tokens_seen,
                   "train_seconds": round(train_seconds, 1), "val_ppl_torch": val_ppl,
                   "params": sum(p.numel() for p in model.parameters()),
                   "seq_len": a.seq_len, "batch": a.batch, "lr": a.lr, "export_dtype": a.export_dtype},
                  f, indent=2)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--run", required=True, help="dir for the resumable state and the log")
    ap.add_argument("--out", required=True, help="checkpoint dir to export (config.json, model.safetensors, tokenizer.json)")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--chunk", type=int, default=64)
    ap.add_argument("--blocks", type=int, default=32)
    ap.add_argument("--feature-map", default="relu")
    ap.add_argument("--tie", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--seq-len", type=int, default=512)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--min-lr-ratio", type=float, default=0.1)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--eval-every", type=int, default=200)
    ap.add_argument("--eval-tokens", type=int, default=0, help="0: the whole validation split")
    ap.add_argument("--export-dtype", choices=["f32", "f16", "bf16"], default="f16")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--init-from", default="",
                    help="start from this smaller checkpoint, grown to the new shape (train/grow.py)")
    ap.add_argument("--stop-at", type=int, default=0,
                    help="save the state and stop after this step (the run can be resumed later)")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    os.makedirs(a.run, exist_ok=True)
    vocab = json.load(open(os.path.join(a.data, "stats.json")))["vocab_size"]
    cfg = mt.Config(vocab_size=vocab, hidden_size=a.hidden, num_hidden_layers=a.layers, num_heads=a.heads,
                    feature_map=a.feature_map, tie_word_embeddings=a.tie, bos_token_id=0, eos_token_id=0,
                    mhla_chunk_size=a.chunk, mhla_num_blocks=a.blocks)
    ctx = a.chunk * a.blocks
    if a.seq_len > ctx:
        sys.exit("--seq-len %d exceeds the context %d" % (a.seq_len, ctx))
    model = mt.MHLAForCausalLM(cfg)
    model.init_weights(seed=a.seed)
    if a.init_from:
        grow.grow(mt.load_checkpoint(a.init_from), model)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "mixing_matrix" not in n]
    no_decay = [p for n, p in model.named_parameters() if not (p.dim() >= 2 and "mixing_matrix" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    train_ids, val_ids = load_ids(os.path.join(a.data, "train.ids")), load_ids(os.path.join(a.data, "val.ids"))
    gen = torch.Generator().manual_seed(a.seed)
    step, tokens_seen, train_seconds = 0, 0, 0.0
    state_path = os.path.join(a.run, "state.pt")
    if os.path.exists(state_path):
        st = torch.load(state_path, weights_only=False)
        model.load_state_dict(st["model"])
        opt.load_state_dict(st["opt"])
        gen.set_state(st["gen"])
        step, tokens_seen, train_seconds = st["step"], st["tokens_seen"], st["train_seconds"]
        print("resumed from %s at step %d (%d tokens seen)" % (state_path, step, tokens_seen), flush=True)
    n_params = sum(p.numel() for p in model.parameters())
    print("model: %d params (%.2fM), D=%d L=%d H=%d dk=%d dv=%d I=%d V=%d C=%d Lm=%d; train %d tokens, val %d"
          % (n_params, n_params / 1e6, cfg.hidden_size, cfg.num_hidden_layers, cfg.num_heads, cfg.dk, cfg.dv,
             cfg.I, cfg.vocab_size, a.chunk, a.blocks, len(train_ids), len(val_ids)), flush=True)
    log = open(os.path.join(a.run, "log.jsonl"), "a")

    def save_state(val_ppl):
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "gen": gen.get_state(), "step": step,
                    "tokens_seen": tokens_seen, "train_seconds": train_seconds, "args": vars(a)},
                   state_path + ".tmp")
        os.replace(state_path + ".tmp", state_path)
        export(model, a, step, val_ppl, tokens_seen, train_seconds)

    model.train()
    t_win, tok_win, loss_acc, loss_n = time.time(), 0, 0.0, 0
    while step < a.steps:
        t0 = time.time()
        lr = lr_at(step, a)
        for g in opt.param_groups:
            g["lr"] = lr
        starts = torch.randint(0, len(train_ids) - a.seq_len - 1, (a.batch,), generator=gen)
        x = torch.stack([train_ids[s:s + a.seq_len + 1] for s in starts.tolist()])
        loss = model.loss(x[:, :-1], x[:, 1:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip)
        opt.step()
        model.clamp_mixing()
        step += 1
        ntok = a.batch * a.seq_len
        tokens_seen += ntok
        tok_win += ntok
        train_seconds += time.time() - t0
        loss_acc += loss.item()
        loss_n += 1
        if step % a.log_every == 0 or step == a.steps:
            dt = time.time() - t_win
            tps = tok_win / max(dt, 1e-9)
            eta = (a.steps - step) * a.batch * a.seq_len / max(tps, 1e-9)
            print("step %d/%d  loss %.4f  lr %.2e  gnorm %.2f  %.0f tokens/s  seen %.2fM  ETA %dm%02ds"
                  % (step, a.steps, loss_acc / loss_n, lr, gnorm, tps, tokens_seen / 1e6, eta // 60, eta % 60),
                  flush=True)
            log.write(json.dumps({"step": step, "loss": loss_acc / loss_n, "lr": lr, "tokens_per_s": tps,
                                  "tokens_seen": tokens_seen}) + "\n")
            log.flush()
            t_win, tok_win, loss_acc, loss_n = time.time(), 0, 0.0, 0
        if step % a.eval_every == 0 or step == a.steps:
            te = time.time()
            ppl, n, _ = perplexity(model, val_ids, ctx, max_tokens=a.eval_tokens or None)
            print("step %d  val ppl %.2f (%d tokens, %.0f s)" % (step, ppl, n, time.time() - te), flush=True)
            log.write(json.dumps({"step": step, "val_ppl": ppl, "val_tokens": n}) + "\n")
            log.flush()
            save_state(ppl)
            t_win, tok_win = time.time(), 0
        if a.stop_at and step >= a.stop_at and step < a.steps:
            if step % a.eval_every:
                ppl, _, _ = perplexity(model, val_ids, ctx, max_tokens=a.eval_tokens or None)
                save_state(ppl)
            print("stopped at step %d (--stop-at); run the same command to resume" % step, flush=True)
            return
    print("done: step %d, %d tokens seen, %.0f s of training" % (step, tokens_seen, train_seconds), flush=True)


if __name__ == "__main__":
    main()
