#!/usr/bin/env python3
"""deploy/systemd and deploy/container against the server they start. Both give the server
its settings as MHLA_<FLAG> variables, and these checks fail on flags in the command line.

systemd: `systemd-analyze verify` accepts the unit and the GPU drop-in (where the tool is
installed; with the unit's binary path pointed at the build); ExecStart is the bare program;
every variable of the environment file, set or shown commented, is MHLA_<FLAG> of a flag of
`mhla-server --help`, and the commented ones show --help's defaults; the device as systemd
composes the environment (Environment= of the unit, then of gpu.conf, EnvironmentFile= over
both) is cpu, and cuda with gpu.conf; a server started with that environment (on loopback,
a free port, the bundled model) listens where it says, answers a completion, and on SIGTERM
drains with the file's MHLA_SHUTDOWN_TIMEOUT as its deadline and exits 0 well within
TimeoutStopSec, which is above it.

container: the Containerfiles' ENTRYPOINT is the bare program and their ENV names only
flags (0.0.0.0, the model under /models, MHLA_DEVICE=auto for CUDA), the stop signal is
SIGTERM, the user is not root; a server with the CPU image's ENV drains with its
MHLA_SHUTDOWN_TIMEOUT, and the HEALTHCHECK command, run with the image's ENV and the
server's port as MHLA_PORT, succeeds against it serving and fails against it draining.
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


def seconds(v):
    m = re.fullmatch(r"(\d+)\s*(s|min)?", v)
    return int(m.group(1)) * (60 if m.group(2) == "min" else 1)


def complete(port):
    body = json.dumps({"prompt": "The jury said", "max_tokens": 8, "temperature": 0}).encode()
    req = urllib.request.Request("http://127.0.0.1:%d/v1/completions" % port, body,
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=HTTP_TIMEOUT) as r:
        return r.status, json.loads(r.read())


def help_defaults(binary):
    """{flag: default} for the flags whose --help text says "(default X" (X up to a space,
    a parenthesis, a comma or a colon)."""
    out = subprocess.run([binary, "--help"], capture_output=True, text=True, check=True).stdout
    found, flag = {}, None
    for line in out.splitlines():
        m = re.match(r"^\s+(--[a-z][a-z0-9-]*)", line)
        if m:
            flag = m.group(1)
        d = re.search(r"\(default:? ([^\s),;:]+)", line)
        if flag and d and flag not in found:
            found[flag] = d.group(1)
    return found


def flag_of(var):
    """MHLA_MAX_QUEUE -> --max-queue (base/opts.c's naming, backwards)."""
    return "--" + var[len("MHLA_"):].lower().replace("_", "-")


def env_settings(path):
    """(set, commented): {MHLA_X: value} of the lines that set a variable and of the
    commented-out ones ("#MHLA_X=value": a default shown, not set)."""
    live, shown = {}, {}
    for line in open(path):
        s = line.strip()
        m = re.fullmatch(r"(#?)\s*(MHLA_[A-Z0-9_]+)=(.*)", s)
        if m:
            (shown if m.group(1) else live)[m.group(2)] = m.group(3).strip()
        elif s and not s.startswith("#"):
            live[s.partition("=")[0].strip()] = s.partition("=")[2].strip()
    return live, shown


def unit_environment(*sections):
    """Environment= assignments of the unit and its drop-ins in order (a later one replaces
    an earlier one), as {name: value}."""
    env = {}
    for sec in sections:
        for k, v in sec:
            if k == "Environment":
                for word in shlex.split(v):
                    name, _, value = word.partition("=")
                    env[name] = value
    return env


def systemd_env(svc, drop_in):
    """The server's environment as systemd builds it: Environment= of the unit, then of the
    drop-in, then EnvironmentFile= on top (its values win over Environment=)."""
    live, _ = env_settings(os.path.join(SYSTEMD, "mhla-server.env"))
    env = unit_environment(svc, drop_in)
    env.update(live)
    return env


def check_env_file(flags, defaults):
    live, shown = env_settings(os.path.join(SYSTEMD, "mhla-server.env"))
    names = sorted(set(live) | set(shown))
    bad = [n for n in names if not n.startswith("MHLA_") or flag_of(n) not in flags]
    check(names and not bad, "mhla-server.env: every variable (set or shown) is MHLA_<FLAG> of a "
          "flag in --help (%s)" % (bad or "%d variables" % len(names)))
    # the commented lines show the defaults --help gives, but for the settings that are
    # off by default, where the file shows an example value (the file says so)
    examples = {"MHLA_API_KEY", "MHLA_STATE_DIR", "MHLA_STATE_DISK_MAX"}
    wrong = ["%s=%s (--help: %s)" % (n, v, defaults[flag_of(n)]) for n, v in shown.items()
             if n not in examples and flag_of(n) in defaults and defaults[flag_of(n)] != v]
    check(len(shown) >= 5 and not wrong, "mhla-server.env: %d commented defaults, each as in "
          "--help (%s)" % (len(shown), wrong or "all equal"))


def analyze_units(a, unit, binary):
    analyze = shutil.which("systemd-analyze")
    if not analyze:
        print("note systemd-analyze is not installed: the unit's syntax is not verified here")
        return
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


def log_event(path, event):
    for line in open(path, errors="replace"):
        if '"event":"%s"' % event in line:
            try:
                return json.loads(line)
            except ValueError:
                pass
    return None


def server_env(settings):
    """The environment a test server gets: this one's without any MHLA_ variable (a
    developer's own settings must not leak in), plus settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MHLA_")}
    env.update(settings)
    return env


def part_systemd(a, flags):
    unit = os.path.join(SYSTEMD, "mhla-server.service")
    svc_items = unit_sections(unit)["Service"]
    svc = dict(svc_items)
    gpu_items = unit_sections(os.path.join(SYSTEMD, "gpu.conf"))["Service"]
    binary = os.path.join(a.bin, "mhla-server")

    for key, want in (("DynamicUser", "yes"), ("ProtectSystem", "strict"),
                      ("NoNewPrivileges", "yes"), ("PrivateTmp", "yes")):
        check(svc.get(key) == want, "unit: %s=%s" % (key, want))
    check("MemoryMax" in svc and "CPUQuota" in svc, "unit: MemoryMax and CPUQuota examples")
    check(svc.get("KillSignal") == "SIGTERM", "unit: stops with SIGTERM (the server's drain)")
    analyze_units(a, unit, binary)

    # settings only from the environment: the unit runs the bare program
    argv = shlex.split(svc.get("ExecStart", ""))
    check(argv == ["/usr/local/bin/mhla-server"], "ExecStart is /usr/local/bin/mhla-server "
          "with no flags, its settings from the environment (%s)" % " ".join(argv))
    check_env_file(flags, help_defaults(binary))
    unit_env = unit_environment(svc_items, gpu_items)
    bad = [n for n in unit_env if flag_of(n) not in flags]
    check(not bad, "Environment= of the unit and gpu.conf names only flags (%s)"
          % (bad or ", ".join(sorted(unit_env))))
    cpu_env = systemd_env(svc_items, [])
    gpu_env = systemd_env(svc_items, gpu_items)
    check(cpu_env.get("MHLA_DEVICE") == "cpu" and gpu_env.get("MHLA_DEVICE") == "cuda",
          "the device as systemd sets it: cpu, with gpu.conf cuda (%s, %s)"
          % (cpu_env.get("MHLA_DEVICE"), gpu_env.get("MHLA_DEVICE")))
    shutdown = int(cpu_env.get("MHLA_SHUTDOWN_TIMEOUT", "30"))
    stop_sec = seconds(svc.get("TimeoutStopSec", "90"))
    check(stop_sec > shutdown, "TimeoutStopSec %d s is above MHLA_SHUTDOWN_TIMEOUT %d s"
          % (stop_sec, shutdown))

    # the unit's environment, on loopback, a free port and the bundled model
    env = dict(cpu_env, MHLA_HOST="127.0.0.1", MHLA_PORT="0", MHLA_MODEL=a.model,
               MHLA_STATE_MEMORY="64", MHLA_THREADS="1")
    log_path = os.path.join(a.work, "systemd.log")
    proc = start_logged([binary], log_path, server_env(env))
    port, err = listening_port(proc, log_path, HTTP_TIMEOUT)
    try:
        if check(port is not None, "mhla-server starts with the unit's environment%s"
                 % ("" if port else ": " + (err or "")[-400:])):
            ev = log_event(log_path, "listening")
            check(ev and ev.get("host") == "127.0.0.1" and port != 8080,
                  "it listens where MHLA_HOST and MHLA_PORT say (%s:%s)"
                  % (ev and ev.get("host"), port))
            st, body = complete(port)
            check(st == 200 and body["usage"]["completion_tokens"] == 8,
                  "it answers a completion (%r)" % body["choices"][0]["text"])
    finally:
        code, took = stop(proc, stop_sec)
    check(code == 0 and took < stop_sec, "SIGTERM: exit %s after %.2f s (TimeoutStopSec %d s)"
          % (code, took, stop_sec))
    drain = log_event(log_path, "draining") or {}
    check("deadline %d s" % shutdown in drain.get("message", ""),
          "the drain's deadline is the environment file's MHLA_SHUTDOWN_TIMEOUT (%s)"
          % drain.get("message"))


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


def image_env(final):
    """{name: value} of the final stage's ENV instructions (NAME=VALUE words)."""
    env = {}
    for k, v in final:
        if k == "ENV":
            for word in shlex.split(v):
                name, _, value = word.partition("=")
                env[name] = value
    return env


def check_containerfile(name, flags):
    """The checks of one Containerfile; returns (its ENV, its HEALTHCHECK command)."""
    ins = containerfile(os.path.join(CONTAINER, name))
    stages = [i for i, (k, _) in enumerate(ins) if k == "FROM"]
    check(len(stages) >= 2, "%s: a build stage and a runtime stage" % name)
    final = ins[stages[-1]:]
    kv = {}
    for k, v in final:
        kv.setdefault(k, []).append(v)
    argv = exec_form(kv.get("ENTRYPOINT", ["[]"])[-1]) + exec_form(kv.get("CMD", ["[]"])[-1])
    check(argv == ["/usr/local/bin/mhla-server"], "%s: ENTRYPOINT runs mhla-server with no "
          "flags, its settings in ENV (%s)" % (name, " ".join(argv)))
    env = image_env(final)
    bad = [n for n in env if not n.startswith("MHLA_") or flag_of(n) not in flags]
    check(env and not bad, "%s: every ENV variable is MHLA_<FLAG> of a flag in --help (%s)"
          % (name, bad or " ".join(sorted(env))))
    check(env.get("MHLA_HOST") == "0.0.0.0", "%s: listens on 0.0.0.0" % name)
    check(env.get("MHLA_MODEL", "").startswith("/models/"), "%s: the model under /models" % name)
    check(kv.get("STOPSIGNAL", [""])[-1] == "SIGTERM", "%s: STOPSIGNAL SIGTERM" % name)
    user = kv.get("USER", ["root"])[-1].split(":")[0]
    check(user not in ("root", "0"), "%s: runs as a non-root user (%s)" % (name, user))
    hc = kv.get("HEALTHCHECK", [""])[-1]
    m = re.search(r"CMD\s+(\[.*\])\s*$", hc)
    check(m is not None and "/health" in hc and "MHLA_PORT" in hc,
          "%s: HEALTHCHECK on /health at MHLA_PORT" % name)
    if name.endswith("cuda"):
        check(env.get("MHLA_DEVICE") == "auto", "%s: MHLA_DEVICE=auto" % name)
    return env, json.loads(m.group(1)) if m else None


def part_container(a, flags):
    """Both Containerfiles; then the CPU image's settings on a server, and its HEALTHCHECK
    command against it serving and draining (the command gets the image's ENV, as in a
    container, with the port the server has)."""
    binary = os.path.join(a.bin, "mhla-server")
    image = None
    for name in ("Containerfile", "Containerfile.cuda"):
        if check(os.path.exists(os.path.join(CONTAINER, name)), "%s exists" % name):
            got = check_containerfile(name, flags)
            image = got if name == "Containerfile" else image
    if not image or not image[1]:
        return
    env, health = image
    log_path = os.path.join(a.work, "container.log")
    proc = start_logged([binary], log_path, server_env(dict(
        env, MHLA_HOST="127.0.0.1", MHLA_PORT="0", MHLA_MODEL=a.model, MHLA_THREADS="1")))
    port, err = listening_port(proc, log_path, HTTP_TIMEOUT)
    try:
        if check(port is not None, "a server with the image's ENV starts%s"
                 % ("" if port else ": " + (err or "")[-400:])):
            hc_env = server_env(dict(env, MHLA_PORT=str(port)))
            p = subprocess.run(health, capture_output=True, text=True, timeout=HTTP_TIMEOUT,
                               env=hc_env)
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
            p = subprocess.run(health, capture_output=True, text=True, timeout=HTTP_TIMEOUT,
                               env=hc_env)
            check(p.returncode != 0 and proc.poll() is None,
                  "HEALTHCHECK fails against a draining server (exit %d)" % p.returncode)
            stream.close()
    finally:
        stop(proc, 60)
    drain = log_event(log_path, "draining") or {}
    want = "deadline %s s" % env.get("MHLA_SHUTDOWN_TIMEOUT", "30")
    check(want in drain.get("message", ""), "the drain's deadline is the image's "
          "MHLA_SHUTDOWN_TIMEOUT (%s)" % drain.get("message"))


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
