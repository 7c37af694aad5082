#!/usr/bin/env python3
"""mhla-generate --prompt TEXT: the prompt is encoded with the model's
tokenizer.json exactly as mhla-tokenize encodes it, and the text streamed to
stdout is the decode of the ids the same seeded run generates."""
import os
import subprocess
import sys

import argparse

ap = argparse.ArgumentParser(description=__doc__)
ap.add_argument("--bin", required=True)
ap.add_argument("--model", required=True)
a = ap.parse_args()
gen = os.path.join(a.bin, "mhla-generate")
tokcli = os.path.join(a.bin, "mhla-tokenize")
tokjson = os.path.join(a.model, "tokenizer.json")


def run(cmd, inp=None):
    r = subprocess.run(cmd, input=inp, capture_output=True, timeout=120)
    if r.returncode != 0:
        sys.exit("FAIL: %s exited %d: %s" % (cmd[0], r.returncode, r.stderr.decode(errors="replace")))
    return r.stdout


failures = 0
cases = [("The jury said", 0.8, 1), ("Über naïve café — «quoted» text, 42.", 1.0, 7), ("\n", 0.0, 3)]
for text, temp, seed in cases:
    ids = run([tokcli, "encode", "--tokenizer", tokjson], text.encode()).decode().split()
    common = ["--model", a.model, "--max-tokens", "24", "--temperature", str(temp), "--seed", str(seed),
              "--ignore-eos"]
    out_ids = run([gen, "--prompt-ids", ",".join(ids), "--print-ids"] + common).decode().split()
    out_text = run([gen, "--prompt", text] + common)
    want = run([tokcli, "decode", "--tokenizer", tokjson], " ".join(out_ids).encode())
    if len(out_ids) != 24:
        print("FAIL %r: %d ids generated, expected 24" % (text, len(out_ids)))
        failures += 1
    elif out_text != want + b"\n":
        print("FAIL %r: streamed %r, decode of the ids %r" % (text, out_text[:80], want[:80]))
        failures += 1
print("generate text: %d passed, %d failed" % (len(cases) - failures, failures))
sys.exit(1 if failures else 0)
