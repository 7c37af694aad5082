#!/usr/bin/env python3
"""deploy/systemd and deploy/container against the server they start.

systemd: `systemd-analyze verify` accepts the unit and the GPU drop-in (where the tool is
installed; with the unit's binary path pointed at the build); ExecStart expanded from the
environment file as systemd expands it names only flags of `mhla-server --help`; a server
started with exactly those arguments (on loopback, a free port, the bundled model) answers
/health and a completion, and on SIGTERM drains and exits 0 well within TimeoutStopSec,
which is above the --shutdown-timeout it passes.

container: the Containerfiles' ENTRYPOINT and CMD flags exist in --help, the stop signal is
SIGTERM, the user is not root, and the HEALTHCHECK command, run against a live server,
succeeds, and fails against a draining one.
"""
import argparse
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "tools"))
from checks import check, finish  # noqa: E402
from server_proc import listening_port, start_logged, stop  # noqa: E402
SYSTEMD = os.path.join(ROOT, "deploy", "systemd")
CONTAINER = os.path.join(ROOT, "deploy", "container")
HTTP_TIMEOUT = 300


def help_flags(binary):
    out = subprocess.run([binary, "--help"], capture_output=True, text=True, check=True).stdout
    return set(re.findall(r"^\s+(--[a-z][a-z0-9-]*)", out, re.M))


def logical_lines(path, comment_marks):
    """The stripped lines of a file with continuation lines (ending in a backslash) joined,
    leaving out blank lines and those that start with one of comment_marks."""
    pending = ""
    for raw in open(path):
        line = pending + raw.rstrip("\n")
        pending = ""
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        s = line.strip()
        if s and s[0] not in comment_marks:
            yield s


def unit_sections(path):
    """{section: [(key, value)]} of a unit file (continuation lines joined)."""
    out, sec = {}, None
    for s in logical_lines(path, "#;"):
        if s.startswith("[") and s.endswith("]"):
            sec = s[1:-1]
            out.setdefault(sec, [])
            continue
        k, _, v = s.partition("=")
        out[sec].append((k.strip(), v.strip()))
    return out


def env_file(path):
    env = {}
    for line in open(path):
        s = line.strip()
        if s and not s.startswith("#"):
            k, _, v = s.partition("=")
            env[k.strip()] = v.strip()
    return env


def systemd_expand(cmdline, env):
    """ExecStart as systemd expands it: ${VAR} is one argument, $VAR splits on spaces."""
    out = []
    for word in shlex.split(cmdline):
        m = re.fullmatch(r"\$([A-Za-z_][A-Za-z0-9_]*)", word)
        if m:
            out.extend(env.get(m.group(1), "").split())
            continue
        out.append(re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", lambda x: env.get(x.group(1), ""), word))
    return out


def seconds(v):
    m = re.fullmatch(r"(\d+)\s*(s|min)?", v)
    return int(m.group(1)) * (60 if m.group(2) == "min" else 1)


def with_flag(args, flag, value):
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a == flag:
            skip = True
            continue
        out.append(a)
    return out + [flag, value]


def flag_value(args, flag):
    v = None
    for i, a in enumerate(args[:-1]):
        if a == flag:
            v = args[i + 1]
    return v


def start(binary, args, work, name):
    log_path = os.path.join(work, name + ".log")
    proc = start_logged([binary] + args, log_path)
    port, err = listening_port(proc, log_path, HTTP_TIMEOUT)
    return proc, port, err


def complete(port):
    body = json.dumps({"prompt": "The jury said", "max_tokens": 8, "temperature": 0}).encode()
    req = urllib.request.Request("http://127.0.0.1:%d/v1/completions" % port, body,
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=HTTP_TIMEOUT) as r:
        return r.status, json.loads(r.read())


def part_systemd(a, flags):
    unit = os.path.join(SYSTEMD, "mhla-server.service")
    secs = unit_sections(unit)
    svc = dict(secs["Service"])
    env = env_file(os.path.join(SYSTEMD, "mhla-server.env"))
    binary = os.path.join(a.bin, "mhla-server")

    for key, want in (("DynamicUser", "yes"), ("ProtectSystem", "strict"),
                      ("NoNewPrivileges", "yes"), ("PrivateTmp", "yes")):
        check(svc.get(key) == want, "unit: %s=%s" % (key, want))
    check("MemoryMax" in svc and "CPUQuota" in svc, "unit: MemoryMax and CPUQuota examples")
    check(svc.get("KillSignal") == "SIGTERM", "unit: stops with SIGTERM (the server's drain)")

    analyze = shutil.which("systemd-analyze")
    if analyze:
        d = os.path.join(a.work, "units")
        os.makedirs(os.path.join(d, "mhla-server.service.d"), exist_ok=True)
        text = open(unit).read().replace("/usr/local/bin/mhla-server", binary)
        # the environment file lives in /etc on a real machine: optional here
        text = text.replace("EnvironmentFile=/", "EnvironmentFile=-/")
        open(os.path.join(d, "mhla-server.service"), "w").write(text)
        shutil.copy(os.path.join(SYSTEMD, "gpu.conf"), os.path.join(d, "mhla-server.service.d"))
        p = subprocess.run([analyze, "verify", os.path.join(d, "mhla-server.service")],
                           capture_output=True, text=True, timeout=HTTP_TIMEOUT)
        msgs = [l for l in (p.stdout + p.stderr).splitlines() if l.strip()]
        check(p.returncode == 0 and not msgs,
              "systemd-analyze verify: no errors or warnings (%s)" % ("; ".join(msgs[:4]) or "clean"))
        # and it notices a broken unit
        bad = os.path.join(d, "broken.service")
        open(bad, "w").write(text.replace("PrivateTmp=yes", "PrivateTmp=yes\nPrivateTmpp=yes"))
        p = subprocess.run([analyze, "verify", bad], capture_output=True, text=True,
                           timeout=HTTP_TIMEOUT)
        check(p.returncode != 0 or (p.stdout + p.stderr).strip(),
              "systemd-analyze verify reports a misspelt key")
    else:
        print("note systemd-analyze is not installed: the unit's syntax is not verified here")

    args = systemd_expand(svc["ExecStart"], env)
    check(args[0] == "/usr/local/bin/mhla-server", "ExecStart runs /usr/local/bin/mhla-server")
    args = args[1:]
    missing = [x for x in args if x.startswith("--") and x not in flags]
    check(not missing, "every flag of ExecStart and the environment file exists in --help (%s)"
          % (missing or "%d flags" % sum(1 for x in args if x.startswith("--"))))
    shutdown = int(flag_value(args, "--shutdown-timeout") or 30)
    stop_sec = seconds(svc.get("TimeoutStopSec", "90"))
    check(stop_sec > shutdown, "TimeoutStopSec %d s is above --shutdown-timeout %d s"
          % (stop_sec, shutdown))

    # the same arguments, on loopback, a free port and the bundled model
    run = with_flag(args, "--host", "127.0.0.1")
    run = with_flag(run, "--port", "0")
    run = with_flag(run, "--model", a.model)
    run = with_flag(run, "--state-memory", "64")
    run = with_flag(run, "--threads", "1")
    proc, port, err = start(binary, run, a.work, "systemd")
    try:
        if check(port is not None, "mhla-server starts with the unit's arguments%s"
                 % ("" if port else ": " + (err or "")[-400:])):
            st, body = complete(port)
            check(st == 200 and body["usage"]["completion_tokens"] == 8,
                  "it answers a completion (%r)" % body["choices"][0]["text"])
    finally:
        code, took = stop(proc, stop_sec)
    check(code == 0 and took < stop_sec, "SIGTERM: exit %s after %.2f s (TimeoutStopSec %d s)"
          % (code, took, stop_sec))


def containerfile(path):
    """[(instruction, argument)] of a Containerfile, continuation lines joined."""
    out = []
    for s in logical_lines(path, "#"):
        k, _, v = s.partition(" ")
        out.append((k.upper(), v.strip()))
    return out


def exec_form(v):
    v = v.strip()
    if v.startswith("["):
        return json.loads(v)
    return shlex.split(v)


def part_container(a, flags):
    binary = os.path.join(a.bin, "mhla-server")
    health = None
    for name in ("Containerfile", "Containerfile.cuda"):
        path = os.path.join(CONTAINER, name)
        if not check(os.path.exists(path), "%s exists" % name):
            continue
        ins = containerfile(path)
        stages = [i for i, (k, _) in enumerate(ins) if k == "FROM"]
        check(len(stages) >= 2, "%s: a build stage and a runtime stage" % name)
        final = ins[stages[-1]:]
        kv = {}
        for k, v in final:
            kv.setdefault(k, []).append(v)
        entry = exec_form(kv.get("ENTRYPOINT", ["[]"])[-1])
        cmd = exec_form(kv.get("CMD", ["[]"])[-1])
        args = entry[1:] + cmd
        missing = [x for x in args if x.startswith("--") and x not in flags]
        check(entry and entry[0] == "/usr/local/bin/mhla-server" and not missing,
              "%s: ENTRYPOINT runs mhla-server and every flag exists in --help (%s)"
              % (name, missing or " ".join(args)))
        check(flag_value(args, "--host") == "0.0.0.0", "%s: listens on 0.0.0.0" % name)
        check((flag_value(args, "--model") or "").startswith("/models/"),
              "%s: the model under /models" % name)
        check(kv.get("STOPSIGNAL", [""])[-1] == "SIGTERM", "%s: STOPSIGNAL SIGTERM" % name)
        user = kv.get("USER", ["root"])[-1].split(":")[0]
        check(user not in ("root", "0"), "%s: runs as a non-root user (%s)" % (name, user))
        hc = kv.get("HEALTHCHECK", [""])[-1]
        m = re.search(r"CMD\s+(\[.*\])\s*$", hc)
        check(m is not None and "/health" in hc, "%s: HEALTHCHECK on /health" % name)
        if name.endswith("cuda"):
            check(flag_value(args, "--device") == "auto", "%s: --device auto" % name)
        elif m:
            health = json.loads(m.group(1))
    # the HEALTHCHECK command against a live server and a draining one (on the image's
    # port 8080 when it is free, else the command pointed at the server's port)
    if health:
        proc, port, err = start(binary, ["--host", "127.0.0.1", "--port", "0", "--model", a.model,
                                         "--threads", "1", "--shutdown-timeout", "20"],
                                a.work, "container")
        try:
            if check(port is not None, "a server for the HEALTHCHECK starts"):
                cmd = [x.replace("8080", str(port)) for x in health]
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=HTTP_TIMEOUT)
                check(p.returncode == 0, "HEALTHCHECK succeeds against a serving server")
                # hold a request open so that the drain lasts, then ask again
                body = json.dumps({"prompt": "x", "max_tokens": 2000, "ignore_eos": True,
                                   "stream": True}).encode()
                req = urllib.request.Request("http://127.0.0.1:%d/v1/completions" % port, body,
                                             {"Content-Type": "application/json"})
                stream = urllib.request.urlopen(req, timeout=HTTP_TIMEOUT)
                stream.readline()
                proc.send_signal(signal.SIGTERM)
                time.sleep(0.2)
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=HTTP_TIMEOUT)
                check(p.returncode != 0 and proc.poll() is None,
                      "HEALTHCHECK fails against a draining server (exit %d)" % p.returncode)
                stream.close()
        finally:
            stop(proc, 60)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "brown-mhla"))
    ap.add_argument("--work", required=True)
    ap.add_argument("--part", choices=("systemd", "container"), required=True)
    a = ap.parse_args()
    a.model = os.path.abspath(a.model)
    a.bin = os.path.abspath(a.bin)
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    flags = help_flags(os.path.join(a.bin, "mhla-server"))
    try:
        {"systemd": part_systemd, "container": part_container}[a.part](a, flags)
    except Exception as e:
        check(False, "%s: %s: %s" % (a.part, type(e).__name__, e))
    return finish()


if __name__ == "__main__":
    sys.exit(main())
