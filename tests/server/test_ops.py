#!/usr/bin/env python3
"""Operator basics of every program and the server: --version and GET /version,
mhla_build_info and the version in the listening line; flags from MHLA_<FLAG>
variables, the command line winning; --log-format text, json and auto; X-Request-Id on every response and in the
access log."""
import argparse
import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
import gen_checkpoint  # noqa: E402
import server_proc  # noqa: E402
from checks import check, finish  # noqa: E402

PROGRAMS = ["mhla-server", "mhla-generate", "mhla-tokenize", "mhla-grammar", "mhla-bench",
            "mhla-cli"]

ap = argparse.ArgumentParser(description=__doc__)
ap.add_argument("--bin", required=True)
ap.add_argument("--work", required=True)
ap.add_argument("--version", required=True, help="the version CMakeLists.txt's project() names")
a = ap.parse_args()
shutil.rmtree(a.work, ignore_errors=True)
os.makedirs(a.work)
MODEL = os.path.join(a.work, "model")
gen_checkpoint.main(["--out", MODEL, "--vocab", "256", "--hidden", "32", "--layers", "1",
                     "--heads", "2", "--chunk", "16", "--blocks", "8", "--seed", "5"])


def exe(name):
    return os.path.join(a.bin, name)


def start(extra, name, env=None):
    """A server on the model with extra flags; returns (proc, port, log path)."""
    log = os.path.join(a.work, name + ".log")
    with open(log, "wb") as f:
        proc = subprocess.Popen([exe("mhla-server"), "--model", MODEL] + extra,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=f,
                                env=env)
    port, why = server_proc.listening_port(proc, log, 60)
    if port is None:
        server_proc.stop(proc, 10)
        print("server %s did not listen: %s" % (name, why))
    return proc, port, log


def get(port, path, headers=None, method="GET", body=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request(method, path, body=body, headers=headers or {})
    r = conn.getresponse()
    body = r.read().decode("utf-8", "replace")
    conn.close()
    return r, body


def listening_line(log):
    for line in open(log, errors="replace"):
        if '"event":"listening"' in line:
            return json.loads(line)
    return {}


def test_version_flags():
    """Every program: "<program> <version> (<commit>)" and exit 0. Returns the commit."""
    commits = set()
    for p in PROGRAMS:
        r = subprocess.run([exe(p), "--version"], capture_output=True, text=True, timeout=30)
        m = re.fullmatch(r"(\S+) (\S+) \((\S+)\)\n", r.stdout)
        check(r.returncode == 0 and m is not None and m.group(1) == p and
              m.group(2) == a.version, "%s --version: %r (exit %d)" % (p, r.stdout, r.returncode))
        if m:
            commits.add(m.group(3))
    check(len(commits) == 1, "one commit in every program: %s" % sorted(commits))
    return commits.pop() if commits else ""


def test_version_route(commit):
    proc, port, log = start(["--port", "0"], "version")
    if not check(port is not None, "server starts"):
        return
    try:
        r, body = get(port, "/version")
        v = json.loads(body) if r.status == 200 else {}
        check(v.get("version") == a.version and v.get("commit") == commit and
              v.get("build_type"), "GET /version: %d %s" % (r.status, body))
        r, body = get(port, "/metrics")
        want = 'mhla_build_info{version="%s",commit="%s"} 1' % (a.version, commit)
        check(want in body.splitlines(), "/metrics has " + want)
        ll = listening_line(log)
        check(ll.get("version") == a.version and ll.get("commit") == commit,
              "the listening line names version and commit: %s" % ll)
    finally:
        server_proc.stop(proc, 10)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def env_with(**kv):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MHLA_")}
    env.update(kv)
    return env


def test_env_flags():
    p1, p2 = free_port(), free_port()
    proc, port, _ = start([], "env_port", env_with(MHLA_PORT=str(p1)))
    check(port == p1, "MHLA_PORT=%d: listens on %s" % (p1, port))
    server_proc.stop(proc, 10)
    proc, port, _ = start(["--port", str(p2), "--threads", "1"], "env_line",
                          env_with(MHLA_PORT=str(p1), MHLA_THREADS="abc"))
    check(port == p2, "--port %d beats MHLA_PORT=%d, --threads beats a bad MHLA_THREADS: %s" %
          (p2, p1, port))
    server_proc.stop(proc, 10)
    r = subprocess.run([exe("mhla-server"), "--model", MODEL, "--port", "0"], capture_output=True,
                       text=True, timeout=30, env=env_with(MHLA_THREADS="abc"))
    check(r.returncode == 2 and "MHLA_THREADS" in r.stderr and "abc" in r.stderr,
          "MHLA_THREADS=abc is a usage error naming it: %d %r" % (r.returncode, r.stderr))
    r = subprocess.run([exe("mhla-cli"), "--help"], capture_output=True, text=True, timeout=30)
    check("MHLA_<FLAG>" in r.stdout, "--help names the MHLA_<FLAG> variables")


def log_lines(argv, name, want):
    """Runs the server with stderr on a file until a line holds want (or 30 s)."""
    log = os.path.join(a.work, name + ".log")
    with open(log, "wb") as f:
        proc = subprocess.Popen([exe("mhla-server"), "--model", MODEL] + argv,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=f)
    t0 = time.time()
    while time.time() - t0 < 30 and proc.poll() is None:
        if want in open(log, errors="replace").read():
            break
        time.sleep(0.05)
    server_proc.stop(proc, 10)
    return open(log, errors="replace").read().splitlines()


def is_json(line):
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


def test_log_format():
    port = str(free_port())
    text = log_lines(["--port", port, "--log-format", "text"], "text", " listening: ")
    stamp = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (info|warn) "
    check(text and not any(is_json(x) for x in text), "--log-format text: no JSON line")
    check(any(re.match(stamp + r" ?listening: .*port=%s " % port, x) for x in text),
          "--log-format text: 'TIME LEVEL listening: ... port=%s': %s" % (port, text[-3:]))
    check(any(re.match(stamp + r" ?stopped: \S", x) for x in text),
          "--log-format text: the event's message follows its name")
    for flags, name in ((["--log-format", "json"], "json"), ([], "auto")):
        lines = log_lines(["--port", str(free_port())] + flags, name, '"event":"listening"')
        check(lines and all(is_json(x) for x in lines) and
              any(json.loads(x).get("event") == "listening" for x in lines),
              "%s on a file: JSON lines (%d)" % (name, len(lines)))


def test_loading_lines():
    """A loading line (path, size) before the weights load and a loaded line
    after; progress lines (a tenth of the layers at a time, ending at 100 %)
    only past the size threshold: 100 MB, or MHLA_LOAD_PROGRESS_BYTES."""
    for env_bytes, name in ((None, "load_default"), ("1", "load_progress")):
        env = env_with(MHLA_LOAD_PROGRESS_BYTES=env_bytes) if env_bytes else env_with()
        proc, port, log = start(["--port", "0"], name, env)
        server_proc.stop(proc, 10)
        events = [json.loads(x) for x in open(log, errors="replace") if is_json(x)]
        msgs = [e["message"] for e in events if e.get("event") == "loading"]
        first = msgs[0] if msgs else ""
        steps = [m for m in msgs if re.match(r"\d+% \(\d+ of \d+ layers\)", m)]
        check(port is not None and MODEL in first and "MB of weights" in first and
              any(e.get("event") == "loaded" for e in events),
              "%s: the loading line names the checkpoint and its size: %r" % (name, first))
        if env_bytes:
            done = [int(re.search(r"\((\d+) of", m).group(1)) for m in steps]
            check(steps and steps[-1].startswith("100% ") and done == sorted(set(done)),
                  "past the threshold: progress lines up to 100 %%: %s" % steps)
        else:
            check(not steps, "under 100 MB: no progress lines (%s)" % steps)


def access_ids(log):
    """The request_id of every access-log line."""
    ids = []
    for line in open(log, errors="replace"):
        if '"event":"request"' in line:
            ids.append(json.loads(line).get("request_id"))
    return ids


def test_request_id():
    proc, port, log = start(["--port", "0"], "request_id")
    if not check(port is not None, "server starts"):
        return
    try:
        r, _ = get(port, "/health", {"X-Request-Id": "trace-42/a.b"})
        check(r.getheader("X-Request-Id") == "trace-42/a.b", "the client's id comes back")
        r1, _ = get(port, "/health")
        r2, _ = get(port, "/nope")
        g1, g2 = r1.getheader("X-Request-Id"), r2.getheader("X-Request-Id")
        check(g1 and g2 and g1 != g2, "ids made for requests without one: %s %s" % (g1, g2))
        check(r2.status == 404, "an error answer carries one too (%d)" % r2.status)
        long_id = "x" * 129
        r, _ = get(port, "/health", {"X-Request-Id": long_id})
        got = r.getheader("X-Request-Id")
        check(got and got != long_id and len(got) <= 128, "129 characters are replaced: %s" % got)
        r, _ = get(port, "/health", {"X-Request-Id": "y" * 128})
        check(r.getheader("X-Request-Id") == "y" * 128, "128 characters are kept")
        body = json.dumps({"prompt": [5, 6, 7], "max_tokens": 2, "stream": True})
        r, text = get(port, "/v1/completions", {"X-Request-Id": "sse-1",
                                                 "Content-Type": "application/json"}, "POST", body)
        check(r.getheader("X-Request-Id") == "sse-1" and "data:" in text,
              "a stream's response carries it (%d)" % r.status)
        time.sleep(0.3)  # the access line is written when the connection's request completes
        ids = access_ids(log)
        want = ["trace-42/a.b", g1, g2, "y" * 128, "sse-1"]
        check(all(i in ids for i in want), "the access log names each id: %s" % ids)
    finally:
        server_proc.stop(proc, 10)


test_version_route(test_version_flags())
test_request_id()
test_log_format()
test_loading_lines()
test_env_flags()
sys.exit(finish())
