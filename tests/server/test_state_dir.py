#!/usr/bin/env python3
"""mhla-server --state-dir: the state tier on disk under the prefix cache.

- Bitwise: a prompt answered (greedy tokens and their logprobs, top 5) with the tier,
  after a restart from it, and by a second server sharing the directory is identical to
  a server without the tier; after the restart every whole block comes from disk
  (usage.prompt_tokens_details.cached_tokens, mhla_state_disk_hits_total).
- Bad files: a flipped byte and a truncated file are refused, counted
  (mhla_state_disk_corrupt_files_total), recomputed; the answer does not change.
- Another model on the same directory loads nothing of the first one's.
- kill -9 while pages are being written, then a restart: nothing invalid is loaded
  (no corrupt file, every answer identical).
- Written with --cpu-isa avx2, read with avx512 (where the CPU runs it) and portable: same
  answer, from disk.
- As root: a full 64 KiB tmpfs (writes fail, counted and logged; answers identical) and
  the same mount read-only (its files still serve; writes fail, counted).
- --state-dir without a state pool, and a bad --state-disk-max, are refused.
"""
import argparse
import glob
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from checks import check, finish  # noqa: E402
from pace import Pace  # noqa: E402
import server_metrics  # noqa: E402
import server_proc  # noqa: E402

ap = argparse.ArgumentParser(description=__doc__)
ap.add_argument("--bin", required=True)
ap.add_argument("--work", required=True)
a = ap.parse_args()
shutil.rmtree(a.work, ignore_errors=True)
os.makedirs(a.work)
tools = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools")
SERVER = os.path.join(a.bin, "mhla-server")
C = 16
pace = Pace()


def checkpoint(name, seed):
    out = os.path.join(a.work, name)
    subprocess.run([sys.executable, os.path.join(tools, "gen_checkpoint.py"), "--out", out,
                    "--vocab", "256", "--hidden", "64", "--layers", "2", "--heads", "4",
                    "--chunk", str(C), "--blocks", "16", "--seed", str(seed)],
                   check=True, capture_output=True)
    return out


MODEL, OTHER = checkpoint("model", 31), checkpoint("other", 32)
PROMPTS = [[(7 * i + 13 * k) % 250 + 1 for i in range(12 * C + 5)] for k in range(4)]
PROCS = []


class CannotRun(Exception):
    """The server refused a --cpu-isa path this CPU lacks (an x86-64 without AVX-512)."""


class Server:
    def __init__(self, name, state_dir=None, model=MODEL, extra=()):
        argv = [SERVER, "--model", model, "--port", "0", "--device", "cpu", "--threads", "2",
                "--state-memory", "64"] + list(extra)
        if state_dir:
            argv += ["--state-dir", state_dir]
        self.log = os.path.join(a.work, name + ".log")
        self.proc = server_proc.start_logged(argv, self.log)
        PROCS.append(self.proc)
        self.port, why = server_proc.listening_port(self.proc, self.log, pace.limit("start", 1, 60))
        if self.port is None:
            if server_proc.isa_refused(why):
                server_proc.stop(self.proc, 5)
                raise CannotRun(why)
            sys.exit("FAIL: %s did not start: %s" % (name, why))

    def post(self, body):
        c = http.client.HTTPConnection("127.0.0.1", self.port,
                                       timeout=pace.limit("answer", 1, 120))
        c.request("POST", "/v1/completions", json.dumps(body),
                  {"Content-Type": "application/json"})
        return json.loads(c.getresponse().read())

    def answer(self, prompt):
        """(tokens, logprobs with the top 5, cached_tokens)."""
        r = self.post({"prompt": prompt, "max_tokens": 8, "temperature": 0,
                       "ignore_eos": True, "return_token_ids": True, "logprobs": 5})
        ch = r["choices"][0]
        cached = r["usage"].get("prompt_tokens_details", {}).get("cached_tokens")
        return (ch["token_ids"], ch["logprobs"]["token_logprobs"],
                ch["logprobs"]["top_logprobs"]), cached

    def metrics(self):
        return server_metrics.fetch(self.port, 60)

    def wait_writes(self, n):
        """Until the tier has written n files (the writer runs behind the answers)."""
        deadline = time.time() + pace.limit("answer", 4, 120)
        while time.time() < deadline:
            if self.metrics().get("mhla_state_disk_writes_total", 0) >= n:
                return True
            time.sleep(0.05)
        return False

    def stop(self):
        server_proc.stop(self.proc, 60)

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()


def fresh(name):
    d = os.path.join(a.work, name)
    shutil.rmtree(d, ignore_errors=True)
    return d


def refs():
    """Every prompt's answer from a server without the tier (and from the other model)."""
    s = Server("plain")
    want = [pace.measure("answer", 1, lambda p=p: s.answer(p))[0] for p in PROMPTS]
    s.stop()
    o = Server("plain_other", model=OTHER)
    other = o.answer(PROMPTS[0])[0]
    o.stop()
    return want, other


def restart_case(want):
    d = fresh("restart")
    s = Server("restart_1", d)
    got, cached = s.answer(PROMPTS[0])
    check(got == want[0] and cached == 0, "with the tier, cold: identical, cached_tokens 0")
    check(s.wait_writes(12), "12 blocks written behind")
    s.stop()
    fp = [json.loads(x)["message"] for x in open(s.log) if "state dir's fingerprint" in x]
    size = sum(os.path.getsize(f) for f in glob.glob(os.path.join(MODEL, "*.safetensors")))
    mb = float(fp[0].split(": ")[1].split(" MB")[0]) if len(fp) == 1 else -1.0
    check(0.9 * size / 1e6 <= mb <= size / 1e6 + 0.05 and fp[0].endswith(" s"),
          "one loading line times the hash of the checkpoint's %.2f MB: %s" % (size / 1e6, fp))
    s = Server("restart_2", d)
    got, cached = s.answer(PROMPTS[0])
    m = s.metrics()
    check(got == want[0], "after a restart: tokens and logprobs identical")
    check(cached == 12 * C, "after a restart: cached_tokens %s == %d (every whole block)" %
          (cached, 12 * C))
    check(m.get("mhla_state_disk_hits_total") == 12 and m.get("mhla_state_disk_bytes", 0) > 0,
          "after a restart: mhla_state_disk_hits_total %s == 12, tier size %s" %
          (m.get("mhla_state_disk_hits_total"), m.get("mhla_state_disk_bytes")))
    s.stop()
    return d


def damage(path, how):
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        if how == "flip":
            f.seek(size // 2)
            b = f.read(1)
            f.seek(size // 2)
            f.write(bytes([b[0] ^ 0x40]))
        else:
            f.truncate(size - 100)


def bad_files_case(d, want):
    files = sorted(glob.glob(os.path.join(d, "*-%d.kvp" % (3 * C))) +
                   glob.glob(os.path.join(d, "*-%d.kvp" % (6 * C))))
    if not check(len(files) == 2, "the files of blocks 3 and 6 are there"):
        return
    damage(files[0], "flip")
    damage(files[1], "truncate")
    flipped = open(files[0], "rb").read()
    s = Server("bad_files", d)
    got, cached = s.answer(PROMPTS[0])
    m = s.metrics()
    check(got == want[0], "a flipped byte in block 3: the answer is identical")
    check(cached == 2 * C, "blocks 1-2 from disk, the rest recomputed (cached_tokens %s)" % cached)
    # the writer may have put the recomputed block back already: never the flipped bytes
    gone = not os.path.exists(files[0]) or open(files[0], "rb").read() != flipped
    check(m.get("mhla_state_disk_corrupt_files_total") == 1 and gone,
          "the bad file is counted and removed (or already written again, sound)")
    s.wait_writes(1)
    s.stop()
    s = Server("bad_files_2", d)
    got, cached = s.answer(PROMPTS[0])
    m = s.metrics()
    # a writer takes a file that is there as written: the truncated one is found when read
    check(got == want[0] and cached == 5 * C,
          "block 3 rewritten, the truncated block 6 refused (cached_tokens %s)" % cached)
    check(m.get("mhla_state_disk_corrupt_files_total") == 1,
          "the truncated file is counted (removed, then written again)")
    s.wait_writes(1)
    s.stop()
    s = Server("bad_files_3", d)
    got, cached = s.answer(PROMPTS[0])
    check(got == want[0] and cached == 12 * C,
          "both rewritten: every block from disk again (cached_tokens %s)" % cached)
    s.stop()


def other_model_case(d, want_other):
    s = Server("other_model", d, model=OTHER)
    got, cached = s.answer(PROMPTS[0])
    m = s.metrics()
    check(got == want_other and cached == 0 and m.get("mhla_state_disk_hits_total") == 0,
          "another model on the directory loads nothing of the first one's")
    s.stop()


def two_servers_case(want):
    d = fresh("shared")
    s1, s2 = Server("shared_1", d), Server("shared_2", d)
    got1, c1 = s1.answer(PROMPTS[1])
    check(s1.wait_writes(12), "server 1 wrote the prompt's blocks")
    got2, c2 = s2.answer(PROMPTS[1])
    check(got1 == want[1] and got2 == want[1], "two servers on one directory: both identical")
    check(c1 == 0 and c2 == 12 * C, "server 2 reused server 1's blocks (cached_tokens %s)" % c2)
    s1.stop()
    s2.stop()


def kill9_case(want):
    d = fresh("kill9")
    s = Server("kill9_1", d)
    for p in PROMPTS:
        s.answer(p)
    s.kill9()  # the writer is still behind the answers
    tmps = len(glob.glob(os.path.join(d, ".tmp-*")))
    files = len(glob.glob(os.path.join(d, "*.kvp")))
    s = Server("kill9_2", d)
    same = all(s.answer(p)[0] == w for p, w in zip(PROMPTS, want))
    m = s.metrics()
    check(same, "kill -9 during writes, restart: every answer identical "
          "(%d page files, %d temporaries left)" % (files, tmps))
    check(m.get("mhla_state_disk_corrupt_files_total", 0) == 0,
          "nothing invalid was there to load (%s disk hits)" % m.get("mhla_state_disk_hits_total"))
    s.stop()


def isa_case(want):
    runnable = subprocess.run([SERVER, "--help"], capture_output=True, text=True).stdout
    paths = [p for p in ("avx2", "avx512") if p in runnable]
    if not check(len(paths) == 2 or "aarch64" in os.uname().machine,
                 "this x86-64 build offers avx2 and avx512 (--help)"):
        return
    if "aarch64" in os.uname().machine:
        return
    d = fresh("isa")
    s = Server("isa_avx2", d, extra=["--cpu-isa", "avx2"])
    got, _ = s.answer(PROMPTS[2])
    check(got == want[2] and s.wait_writes(12), "written on the avx2 path: identical")
    s.stop()
    for isa in ("avx512", "portable"):
        try:
            s = Server("isa_" + isa, d, extra=["--cpu-isa", isa])
        except CannotRun:
            print("skip reading with %s: this CPU cannot run that path" % isa)
            continue
        got, cached = s.answer(PROMPTS[2])
        log = open(s.log).read()
        check('"cpu_isa":"%s"' % isa in log, "the server says it runs the %s path" % isa)
        check(got == want[2] and cached == 12 * C,
              "written by avx2, read by %s: identical, cached_tokens %s" % (isa, cached))
        s.stop()


def wait_metric(s, name, at_least):
    return server_metrics.wait_until(s.metrics, lambda m: m.get(name, 0) >= at_least,
                                     pace.limit("answer", 4, 120))


def tmpfs_case(want):
    """A real full disk and a real read-only directory: a 64 KiB tmpfs (root only)."""
    d = fresh("tmpfs")
    os.makedirs(d)
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", d],
                                           capture_output=True).returncode != 0:
        print("skip a full tmpfs and a read-only mount: not root, or mount refused "
              "(kvstate.disk_tier and kvstate.disk_exact cover both with the fault hook)")
        return
    try:
        s = Server("tmpfs_full", d, extra=["--state-disk-max", "10M"])
        got = [s.answer(p)[0] for p in PROMPTS[:2]]
        full = wait_metric(s, "mhla_state_disk_write_errors_total", 1)
        s.answer(PROMPTS[2])  # a step after the errors: the scheduler logs the warning
        check(got == want[:2] and full, "disk full (64 KiB tmpfs): answers identical, "
              "write errors counted (%s)" % s.metrics().get("mhla_state_disk_write_errors_total"))
        check('"event":"state_disk"' in open(s.log).read() and "No space" in open(s.log).read(),
              "disk full: a state_disk warning naming ENOSPC in the log")
        s.stop()
        subprocess.run(["mount", "-o", "remount,ro", d], check=True)
        s = Server("tmpfs_ro", d, extra=["--state-disk-max", "10M"])
        got, cached = s.answer(PROMPTS[0])
        m = s.metrics()
        check(got == want[0] and cached > 0 and m.get("mhla_state_disk_write_errors_total", 0) >= 1,
              "read-only mount: the files there still serve (cached_tokens %s), the "
              "unwritable directory is counted, answers identical" % cached)
        s.answer(PROMPTS[3])
        # the writer fails the new blocks' files behind the answer: wait for its count
        check(wait_metric(s, "mhla_state_disk_write_errors_total", 2),
              "read-only mount: new blocks' writes fail, counted; serving goes on")
        s.stop()
    finally:
        subprocess.run(["umount", d], capture_output=True)


def refusals():
    r = subprocess.run([SERVER, "--model", MODEL, "--port", "0", "--state-memory", "0",
                        "--state-dir", os.path.join(a.work, "x")], capture_output=True, text=True,
                       timeout=pace.limit("start", 1, 60))
    why = [ln for ln in r.stderr.splitlines() if "state dir" in ln]
    check(r.returncode != 0 and why, "--state-dir with --state-memory 0 is refused: %s" %
          (why[0][-160:] if why else r.stderr[-160:]))
    r = subprocess.run([SERVER, "--state-disk-max", "12Q"], capture_output=True, text=True,
                       timeout=60)
    check(r.returncode != 0 and "--state-disk-max" in r.stderr, "--state-disk-max 12Q is refused")


try:
    want, want_other = refs()
    d = restart_case(want)
    bad_files_case(d, want)
    other_model_case(d, want_other)
    two_servers_case(want)
    kill9_case(want)
    isa_case(want)
    tmpfs_case(want)
    refusals()
finally:
    for p in PROCS:
        if p.poll() is None:
            p.kill()
            p.wait()
sys.exit(finish())
