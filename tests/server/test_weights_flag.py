#!/usr/bin/env python3
"""mhla-server --weights bf16: on a checkpoint stored in bf16 the server's
greedy tokens equal mhla-generate's with f32 weights (bf16 storage keeps the
arithmetic in f32, so the bits are the same); a bad value is refused."""
import argparse
import http.client
import json
import os
import re
import subprocess
import sys
import time

ap = argparse.ArgumentParser(description=__doc__)
ap.add_argument("--bin", required=True)
ap.add_argument("--work", required=True)
a = ap.parse_args()
os.makedirs(a.work, exist_ok=True)
tools = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools")
model = os.path.join(a.work, "bf16")
subprocess.run([sys.executable, os.path.join(tools, "gen_checkpoint.py"), "--out", model,
                "--vocab", "256", "--hidden", "64", "--layers", "2", "--heads", "4",
                "--chunk", "16", "--blocks", "8", "--dtype", "bf16", "--seed", "21"],
               check=True, capture_output=True)

bad = subprocess.run([os.path.join(a.bin, "mhla-server"), "--weights", "f64"],
                     capture_output=True, text=True, timeout=30)
if bad.returncode == 0 or "--weights" not in bad.stderr:
    sys.exit("FAIL: --weights f64 was not refused: %r" % bad.stderr)

prompt = [5, 17, 99, 3, 250, 41, 7]
want = subprocess.run([os.path.join(a.bin, "mhla-generate"), "--model", model, "--prompt-ids",
                       ",".join(map(str, prompt)), "--max-tokens", "24", "--ignore-eos",
                       "--print-ids"], capture_output=True, text=True, timeout=60, check=True)
want_ids = [int(x) for x in want.stdout.split()]

# --device cpu: compared with mhla-generate on the CPU, also on a machine with a GPU
srv = subprocess.Popen([os.path.join(a.bin, "mhla-server"), "--device", "cpu", "--model", model,
                        "--port", "0",
                        "--weights", "bf16"], stderr=subprocess.PIPE, text=True)
try:
    port = None
    deadline = time.time() + 30
    while port is None and time.time() < deadline:
        line = srv.stderr.readline()
        if not line:
            break
        m = re.search(r'"event":"listening".*"port":(\d+)', line)
        if m:
            if '"weights":"bf16"' not in line:
                sys.exit("FAIL: the listening line does not say weights bf16: " + line)
            port = int(m.group(1))
    if port is None:
        sys.exit("FAIL: the server did not start")
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    body = {"prompt": prompt, "max_tokens": 24, "temperature": 0, "ignore_eos": True,
            "return_token_ids": True}
    conn.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    resp = json.loads(conn.getresponse().read())
    got = resp["choices"][0].get("token_ids")
    if got != want_ids:
        sys.exit("FAIL: server with bf16 weights gave %r, mhla-generate (f32) %r" % (got, want_ids))
finally:
    srv.terminate()
    srv.wait(timeout=30)
print("weights flag: 2 passed, 0 failed")
