#!/usr/bin/python3
"""Train the tool-call test fixture: a tiny MHLA model that has memorised, greedily, the reply of
every case of tests/server/data/toolcall/conversations.json.

    /usr/bin/python3 train/fixture_toolcalls.py --bin build/bin \
        --cases tests/server/data/toolcall/conversations.json --out tests/server/data/toolcall/model

Each case {"template", "messages", "tools"?, "reply"} is rendered exactly as the server renders a
chat request (build/bin/mhla-tokenize apply-template = the server's C renderer, with
add_generation_prompt, the bos_token / eos_token of OUT/tokenizer_config.json, tool-call
arguments parsed from their JSON string into objects as server/chat_messages.c does), encoded
without special tokens (as the chat path encodes), and the reply encoded on its own (greedy
decoding emits exactly those ids) followed by the end-of-sequence id 0. The loss is on the reply
and end-of-sequence positions only, full batch (every case every step). Training stops once,
with the weights rounded to f16 as exported, every reply position's target is the argmax with a
logit margin of at least --margin over the runner-up (teacher forcing: then greedy decoding
reproduces every reply and stops), or at --steps.

OUT gets config.json, model.safetensors (f16, mixing matrices f32), tokenizer.json (a copy of
--tokenizer), tokenizer_config.json (bos/eos "<|endoftext|>", no chat_template),
generation_config.json (eos 0, greedy by default) and training_info.json.
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mhla_torch as mt  # noqa: E402

EOS = 0
SPECIAL = "<|endoftext|>"


def template_messages(messages):
    """The messages as the server hands them to the template: tool-call arguments parsed."""
    out = json.loads(json.dumps(messages))
    for m in out:
        for tc in m.get("tool_calls") or []:
            fn = tc.get("function") or {}
            if isinstance(fn.get("arguments"), str):
                fn["arguments"] = json.loads(fn["arguments"])
    return out


def render(bin_dir, case, template, bos, eos):
    with tempfile.TemporaryDirectory() as t:
        with open(os.path.join(t, "m.json"), "w") as f:
            json.dump(template_messages(case["messages"]), f)
        cmd = [os.path.join(bin_dir, "mhla-tokenize"), "apply-template", "--template", template,
               "--messages", os.path.join(t, "m.json"), "--add-generation-prompt",
               "--bos-token", bos, "--eos-token", eos]
        if case.get("tools") is not None:
            with open(os.path.join(t, "t.json"), "w") as f:
                json.dump(case["tools"], f)
            cmd += ["--tools", os.path.join(t, "t.json")]
        return subprocess.run(cmd, check=True, capture_output=True).stdout.decode()


def encode(bin_dir, tokenizer, text):
    out = subprocess.run([os.path.join(bin_dir, "mhla-tokenize"), "encode", "--tokenizer", tokenizer,
                          "--no-special"], input=text.encode(), check=True, capture_output=True).stdout
    return [int(x) for x in out.split()]


def write_model_files(out, tokenizer):
    os.makedirs(out, exist_ok=True)
    if os.path.abspath(tokenizer) != os.path.abspath(os.path.join(out, "tokenizer.json")):
        shutil.copyfile(tokenizer, os.path.join(out, "tokenizer.json"))
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": SPECIAL, "eos_token": SPECIAL, "add_bos_token": False,
                   "add_eos_token": False, "model_max_length": 2048,
                   "tokenizer_class": "PreTrainedTokenizerFast"}, f, indent=2)
        f.write("\n")
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": EOS, "eos_token_id": EOS, "temperature": 0.0}, f, indent=2)
        f.write("\n")


def batch(seqs):
    """ids [B, T] (padded at the end with 0: causally invisible), and per sequence the input
    positions whose next token is scored with their targets."""
    T = max(len(s["ids"]) for s in seqs) - 1
    x = torch.zeros(len(seqs), T, dtype=torch.long)
    rows, cols, tgt = [], [], []
    for b, s in enumerate(seqs):
        ids = s["ids"]
        x[b, :len(ids) - 1] = torch.tensor(ids[:-1])
        for p in range(s["n_prompt"] - 1, len(ids) - 1):
            rows.append(b)
            cols.append(p)
            tgt.append(ids[p + 1])
    return x, torch.tensor(rows), torch.tensor(cols), torch.tensor(tgt)


def scored_logits(model, x, rows, cols):
    h = model.hidden(x)
    return h[rows, cols] @ model.head_weight().t()


@torch.no_grad()
def check(model, out_dir, x, rows, cols, tgt, seqs):
    """Export f16, reload, and per case: all targets argmax? the smallest margin."""
    mt.save_checkpoint(model, out_dir, torch.float16)
    m16 = mt.load_checkpoint(out_dir, torch.float32)
    m16.eval()
    lg = scored_logits(m16, x, rows, cols).double()
    t = lg.gather(1, tgt[:, None])[:, 0]
    other = lg.scatter(1, tgt[:, None], -math.inf).max(1).values
    margin = t - other
    per = []
    for b, s in enumerate(seqs):
        mb = margin[rows == b]
        per.append((s["name"], float(mb.min()), bool((mb > 0).all())))
    return per


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="build/bin", help="directory of mhla-tokenize")
    ap.add_argument("--cases", default="tests/server/data/toolcall/conversations.json")
    ap.add_argument("--out", default="tests/server/data/toolcall/model")
    ap.add_argument("--tokenizer", default="models/brown-mhla/tokenizer.json")
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--chunk", type=int, default=64)
    ap.add_argument("--blocks", type=int, default=32)
    ap.add_argument("--steps", type=int, default=3000, help="at most this many steps")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--margin", type=float, default=4.0,
                    help="stop when every reply position's logit margin (f16 weights) is at least this")
    ap.add_argument("--check-every", type=int, default=25)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--seed", type=int, default=1234)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)

    write_model_files(a.out, a.tokenizer)
    tok = os.path.join(a.out, "tokenizer.json")
    cases = json.load(open(a.cases))
    base = os.path.dirname(os.path.abspath(a.cases))
    seqs = []
    for c in cases:
        text = render(a.bin, c, os.path.join(base, c["template"]), SPECIAL, SPECIAL)
        p, r = encode(a.bin, tok, text), encode(a.bin, tok, c["reply"])
        seqs.append({"name": c.get("name", c["format"]), "ids": p + r + [EOS], "n_prompt": len(p)})
        print("%-20s prompt %4d tokens, reply %3d + eos" % (seqs[-1]["name"], len(p), len(r)), flush=True)
    ctx = a.chunk * a.blocks
    if max(len(s["ids"]) for s in seqs) > ctx:
        sys.exit("a case is longer than the context %d" % ctx)

    cfg = mt.Config(vocab_size=4096, hidden_size=a.hidden, num_hidden_layers=a.layers, num_heads=a.heads,
                    tie_word_embeddings=True, bos_token_id=EOS, eos_token_id=EOS,
                    mhla_chunk_size=a.chunk, mhla_num_blocks=a.blocks)
    model = mt.MHLAForCausalLM(cfg)
    model.init_weights(seed=a.seed)
    n_params = sum(p.numel() for p in model.parameters())
    print("model: %d params, D=%d L=%d H=%d I=%d C=%d Lm=%d" % (n_params, a.hidden, a.layers, a.heads, cfg.I,
                                                                a.chunk, a.blocks), flush=True)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "mixing_matrix" not in n]
    rest = [p for n, p in model.named_parameters() if not (p.dim() >= 2 and "mixing_matrix" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": rest, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    x, rows, cols, tgt = batch(seqs)
    t0 = time.time()
    step, per = 0, None
    while step < a.steps:
        lr = a.lr * min(1.0, (step + 1) / a.warmup)
        for g in opt.param_groups:
            g["lr"] = lr
        model.train()
        loss = torch.nn.functional.cross_entropy(scored_logits(model, x, rows, cols).float(), tgt)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        model.clamp_mixing()
        step += 1
        if step % a.check_every == 0 or step == a.steps:
            per = check(model, a.out, x, rows, cols, tgt, seqs)
            worst = min(per, key=lambda t: t[1])
            ok = sum(1 for t in per if t[2])
            print("step %d  loss %.5f  exact %d/%d  min margin %.2f (%s)  %.0f s"
                  % (step, loss.item(), ok, len(per), worst[1], worst[0], time.time() - t0), flush=True)
            if worst[1] >= a.margin:
                break
    secs = time.time() - t0
    with open(os.path.join(a.out, "training_info.json"), "w") as f:
        json.dump({"steps": step, "train_seconds": round(secs, 1), "params": n_params,
                   "hidden": a.hidden, "layers": a.layers, "heads": a.heads, "lr": a.lr, "seed": a.seed,
                   "export_dtype": "f16", "final_loss": loss.item(),
                   "min_margin_f16": {n: round(m, 3) for n, m, _ in per}}, f, indent=2)
        f.write("\n")
    if not all(t[2] for t in per) or min(t[1] for t in per) < a.margin:
        sys.exit("not converged: margins %s" % per)
    print("done: %d steps, %.0f s; every case exact, min margin %.2f" % (step, secs, min(t[1] for t in per)))


if __name__ == "__main__":
    main()
