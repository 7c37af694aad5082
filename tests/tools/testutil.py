"""Shared helpers for the Python-driven engine tests (tests/engine/test_*.py)."""
import argparse
import os
import shutil
import subprocess
import sys

import numpy as np

TOOLS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, TOOLS)
import gen_checkpoint  # noqa: E402

ERROR_PREFIX = "mhla-generate: error: "
SANITIZER_WORDS = ("AddressSanitizer", "LeakSanitizer", "UndefinedBehaviorSanitizer", "runtime error:")
# Sanitizer reports exit with this status, so they cannot pass for the engine's own exit 1.
SANITIZER_EXITCODE = 86


def parse_args(description, extra=None):
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--bin", required=True, help="dir holding mhla-generate (build/bin)")
    ap.add_argument("--work", required=True, help="scratch dir (wiped and recreated)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch dir afterwards")
    if extra:
        extra(ap)
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    return a


def gen(out, *args, seed=0):
    """Writes a random checkpoint (same flags as gen_checkpoint.py) into out."""
    argv = ["--out", out, "--seed", str(seed)] + [str(x) for x in args]
    gen_checkpoint.main(argv)
    return out


def sanitizer_env():
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = ("detect_leaks=1:exitcode=%d:abort_on_error=0:handle_abort=1:"
                           "allocator_may_return_null=0:symbolize=1" % SANITIZER_EXITCODE)
    env["LSAN_OPTIONS"] = "exitcode=%d" % SANITIZER_EXITCODE
    env["UBSAN_OPTIONS"] = "halt_on_error=1:exitcode=%d:print_stacktrace=1" % SANITIZER_EXITCODE
    return env


def run(exe, args, timeout=120, env=None):
    """Runs exe with args; returns CompletedProcess (text mode, stdout/stderr captured).
    A timeout is returned as returncode None with stderr 'TIMEOUT'."""
    try:
        return subprocess.run([exe] + [str(x) for x in args], capture_output=True, text=True,
                              errors="replace", timeout=timeout, env=env)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        return subprocess.CompletedProcess(e.cmd, None, out, err + "\nTIMEOUT after %ss" % timeout)


def ids_arg(ids):
    return ",".join(str(int(i)) for i in ids)


def rel_err(a, b):
    """Worst relative error of a against b (same shape [rows, V]):
    max over entries of |a - b| / max(|b|, rms(row of b)). +inf when a has NaN/inf."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if not np.all(np.isfinite(a)):
        return float("inf")
    rms = np.sqrt(np.mean(b * b, axis=1, keepdims=True))
    den = np.maximum(np.maximum(np.abs(b), rms), 1e-300)
    return float(np.max(np.abs(a - b) / den))


def error_lines(stderr):
    return [l for l in stderr.splitlines() if l.strip()]


def describe(proc):
    return "rc=%s stderr=%r" % (proc.returncode, proc.stderr[-2000:])
