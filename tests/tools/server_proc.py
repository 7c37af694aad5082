"""Start an mhla-server (or any program logging like it) as a child process, wait until it
says on which port it listens, and stop it: the pieces the Python-driven tests share."""
import json
import signal
import subprocess
import time


def start_logged(argv, log_path, env=None):
    """Starts argv with its stderr in log_path, stdin and stdout closed (and env as its
    whole environment, when given)."""
    with open(log_path, "wb") as log:
        return subprocess.Popen([str(x) for x in argv], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=log, env=env)


def listening_port(proc, log_path, limit_s):
    """Waits for the server's "listening" log event (it was started with --port 0).
    Returns (port, None), or (None, why): the log when the process exited first,
    "did not listen" after limit_s seconds (the process is left running)."""
    t0 = time.time()
    while time.time() - t0 < limit_s:
        if proc.poll() is not None:
            return None, open(log_path, errors="replace").read()
        for line in open(log_path, errors="replace"):
            if '"event":"listening"' in line and '"port":' in line:
                try:
                    return json.loads(line)["port"], None
                except ValueError:  # the line is still being written
                    pass
        time.sleep(0.05)
    return None, "did not listen"


def isa_refused(why):
    """Whether a server that did not start (listening_port's why) refused its --cpu-isa path
    because this CPU lacks it: the message engine/cpu/isa.c gives, which a test of every
    path takes as "skip", not "fail"."""
    return "cannot run here" in (why or "")


def stop(proc, grace):
    """SIGTERM, then SIGKILL after grace seconds. Returns (exit code, seconds taken), or
    (None, grace) when it had to be killed."""
    if proc.poll() is not None:
        return proc.returncode, 0.0
    t = time.time()
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(grace), time.time() - t
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return None, grace


def log_events(log_path, name):
    """The JSON log lines of event `name` in a server's log, parsed, in order."""
    out = []
    for line in open(log_path, errors="replace"):
        if '"event":"%s"' % name in line:
            out.append(json.loads(line))
    return out
