"""The measurements of the side-by-side benchmark: our bench_decode and
mhla-server, llama.cpp's llama-bench, llama-batched-bench and llama-server,
each run as a child process whose output is parsed here."""

import json
import os
import random
import re
import resource
import socket
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
STEPS = 64
SERVED_CONC, SERVED_IN, SERVED_OUT = 8, 96, 64


def points_of(a):
    pre = [int(p[2:]) for p in a.points if p.startswith("pp")]
    dec = [tuple(int(x) for x in p[1:].split("@")) for p in a.points if p.startswith("b")]
    return pre, sorted({b for b, _ in dec}), sorted({d for _, d in dec})


class Context:
    """Paths, the model files, and the log of every tool's output."""

    def __init__(self, a, bins, log):
        self.a, self.bins, self.log = a, bins, log
        self.bench_decode = os.path.join(a.build, "bin", "bench_decode")
        self.server = os.path.join(a.build, "bin", "mhla-server")
        self.client = os.path.join(a.build, "bin", "mhla-bench")
        self.our_isa_note, self.llama_cpu = {}, {}
        self.llama_commit = git_head(a.llama)
        self.prompts = os.path.join(a.gguf_dir, "prompts-%d.jsonl" % SERVED_IN)
        self._usage = None
        self.llama_env = dict(os.environ)
        if a.llama_omp != "default":
            self.llama_env["OMP_WAIT_POLICY"] = a.llama_omp
        self.cpu_share = None  # CPU seconds per wall second of the last tool run

    def our_env(self, isa):
        """AVX2 only: our avx2 path also leaves out AVX-VNNI (it takes it where
        the CPU has it), as llama.cpp's AVX2 build does."""
        env = dict(os.environ)
        if isa == "avx2":
            env["MHLA_CPU_Q8_NO_DOT"] = "1"
        return env

    def gguf(self, fmt):
        return os.path.join(self.a.gguf_dir, "m340-%s.gguf" % fmt)

    def run(self, argv, env=None, timeout=None, ok=(0,)):
        """Runs argv, returns its stdout+stderr; logs both; an exit status not
        in ok raises."""
        self.log("$ " + " ".join(argv))
        t0, r0 = time.time(), resource.getrusage(resource.RUSAGE_CHILDREN)
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           env=env, timeout=timeout)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
        self.cpu_share = cpu / max(time.time() - t0, 1e-9)
        if self.a.log:
            with open(self.a.log, "a") as f:
                f.write("$ %s\n%s\n" % (" ".join(argv), p.stdout))
        if p.returncode not in ok:
            raise RuntimeError("%s exited %d: %s" % (os.path.basename(argv[0]), p.returncode,
                                                      p.stdout.strip()[-400:]))
        return p.stdout

    def prepare_model(self):
        a = self.a
        if not os.path.isdir(a.model):
            self.run([sys.executable, os.path.join(ROOT, "tests/tools/gen_checkpoint.py"),
                      "--shape-340m", "--seed", "7", "--out", a.model])
        os.makedirs(a.gguf_dir, exist_ok=True)
        fmts = {f for fmt in a.formats for f in a.pairs[fmt]}
        for f in sorted(fmts):
            if not os.path.exists(self.gguf(f)):
                self.run([sys.executable, os.path.join(HERE, "make_gguf.py"), "--checkpoint",
                          a.model, "--type", f, "--out", self.gguf(f)])
        if not os.path.exists(self.prompts):
            write_prompts(self.prompts, 32000)

    def ours_accepts(self, fmt):
        if self._usage is None:
            p = subprocess.run([self.bench_decode], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
            self._usage = p.stdout
        return re.search(r"weights\s+\S*\b%s\b" % fmt, self._usage) is not None


def git_head(tree):
    """The llama.cpp tree's commit where it is a git checkout (llama-bench's
    build_commit replaces it once a bench ran)."""
    try:
        p = subprocess.run(["git", "-C", tree, "rev-parse", "--short=8", "HEAD"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        return p.stdout.strip() or None
    except OSError:
        return None


def write_prompts(path, vocab):
    """512 distinct prompts of token ids (more than a run sends, so no
    prompt repeats and neither server's prefix cache helps)."""
    rng = random.Random(7)
    with open(path, "w") as f:
        for _ in range(512):
            ids = [rng.randrange(259, vocab) for _ in range(SERVED_IN)]
            f.write(json.dumps({"prompt": ids, "max_tokens": SERVED_OUT}) + "\n")


def loadavg():
    return os.getloadavg()[0]


def ours_block(a, ctx, isa, fmt, res):
    if not ctx.ours_accepts(fmt):
        res.not_built(isa, fmt)
        return
    pre, batches, _ = points_of(a)
    if pre or batches:
        l0 = loadavg()
        out = ctx.run([ctx.bench_decode, a.model, "--batch", ",".join(map(str, batches or [1])),
                       "--steps", str(STEPS), "--rounds", "1", "--threads", str(a.threads),
                       "--weights", fmt, "--cpu-isa", "avx2" if isa == "avx2" else "auto",
                       "--prefill", ",".join(map(str, pre or [512]))] + a.our_flags.split(),
                      ctx.our_env(isa))
        m = re.search(r"^cpu: (.*)$", out, re.M)
        ctx.our_isa_note[isa] = m.group(1) if m else "?"
        for point, rate in parse_bench_decode(out).items():
            if point in a.points:
                res.add(isa, fmt, point, "ours", rate, (l0, loadavg(), ctx.cpu_share))
    if "served" in a.points:
        served(a, ctx, isa, fmt, res, "ours", our_server_argv(a, ctx, isa, fmt))


def parse_bench_decode(out):
    """{point: tokens/s} from bench_decode's output."""
    r = {}
    for n, rate in re.findall(r"^prefill: (\d+)-token prompt in [0-9.]+ s: ([0-9.]+) tokens/s",
                              out, re.M):
        r["pp%s" % n] = float(rate)
    for line in out.splitlines():
        f = line.split()
        if len(f) > 4 and f[0].isdigit() and f[4] == "|":
            r["b%s@100" % f[0]], r["b%s@1900" % f[0]] = float(f[1]), float(f[2])
    return r


def theirs_block(a, ctx, isa, fmt, llama_fmts, res):
    if not ctx.ours_accepts(fmt):
        return
    for lf in llama_fmts:
        l0 = loadavg()
        for point, (rate, share) in llama_points(a, ctx, isa, lf).items():
            if point in a.points:
                res.add(isa, fmt, point, lf, rate, (l0, loadavg(), share))
        if "served" in a.points:
            served(a, ctx, isa, fmt, res, lf, llama_server_argv(a, ctx, isa, lf))


def llama_points(a, ctx, isa, lf):
    pre, batches, depths = points_of(a)
    bench = os.path.join(ctx.bins[isa], "llama-bench")
    base = [bench, "-m", ctx.gguf(lf), "-t", str(a.threads), "-r", "1", "-o", "jsonl"]
    r = {}
    if pre:
        out = ctx.run(base + ["-p", ",".join(map(str, pre)), "-n", "0"], ctx.llama_env)
        r.update({"pp%d" % j["n_prompt"]: (j["avg_ts"], ctx.cpu_share)
                  for j in json_lines(out, ctx, isa)})
    if 1 in batches:
        out = ctx.run(base + ["-p", "0", "-n", str(STEPS), "-d", ",".join(map(str, depths))],
                      ctx.llama_env)
        r.update({"b1@%d" % j["n_depth"]: (j["avg_ts"], ctx.cpu_share)
                  for j in json_lines(out, ctx, isa)})
    big = [b for b in batches if b > 1]
    if big:
        out = ctx.run([os.path.join(ctx.bins[isa], "llama-batched-bench"), "-m", ctx.gguf(lf),
                       "-t", str(a.threads), "-c", str(max(depths) + max(big) * STEPS + 64),
                       "-b", "2048", "-ub", "512", "-npp", ",".join(map(str, depths)),
                       "-ntg", str(STEPS), "-npl", ",".join(map(str, big)), "-pps", "-kvu",
                       "--output-format", "jsonl"], ctx.llama_env)
        r.update({"b%d@%d" % (j["pl"], j["pp"]): (j["speed_tg"], ctx.cpu_share)
                  for j in json_lines(out)})
    return r


def json_lines(out, ctx=None, isa=None):
    rows = []
    for line in out.splitlines():
        if line.startswith("{"):
            j = json.loads(line)
            rows.append(j)
            if ctx is not None and "build_commit" in j:
                ctx.llama_commit = j["build_commit"]
                ctx.llama_cpu[isa] = j.get("cpu_info", "?")
    return rows


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def our_server_argv(a, ctx, isa, fmt):
    port = free_port()
    argv = [ctx.server, "--model", a.model, "--port", str(port), "--threads", str(a.threads),
            "--weights", fmt]
    if isa == "avx2":
        argv += ["--cpu-isa", "avx2"]
    return argv + a.our_flags.split(), port, [], ctx.our_env(isa)


def llama_server_argv(a, ctx, isa, lf):
    port = free_port()
    slots = SERVED_CONC
    argv = [os.path.join(ctx.bins[isa], "llama-server"), "-m", ctx.gguf(lf), "--host",
            "127.0.0.1", "--port", str(port), "-t", str(a.threads), "-np", str(slots), "-c",
            str(slots * 256), "--threads-http", str(2 * slots)]
    return argv, port, ["--no-token-ids"], ctx.llama_env


def wait_healthy(proc, port, logf, limit=600):
    t0 = time.time()
    while time.time() - t0 < limit:
        if proc.poll() is not None:
            raise RuntimeError("server exited %d: %s" % (proc.returncode, tail(logf)))
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/health" % port, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError("server not healthy after %d s: %s" % (limit, tail(logf)))


def proc_cpu(pid):
    """CPU seconds the process has used (utime + stime of /proc/PID/stat)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tail(path):
    with open(path, errors="replace") as f:
        return f.read()[-400:]


def served(a, ctx, isa, fmt, res, side, spec):
    argv, port, client_extra, env = spec
    logf = os.path.join(a.gguf_dir, "server.log")
    ctx.log("$ " + " ".join(argv))
    with open(logf, "w") as lf:
        proc = subprocess.Popen(argv, stdout=lf, stderr=subprocess.STDOUT, env=env)
    try:
        wait_healthy(proc, port, logf)
        l0, c0, t0 = loadavg(), proc_cpu(proc.pid), time.time()
        lv = client_run(a, ctx, port, client_extra)
        share = (proc_cpu(proc.pid) - c0) / (time.time() - t0)
        res.add(isa, fmt, "served", side, lv["output_token_throughput"], (l0, loadavg(), share),
                ttft=lv["ttft_ms"]["p50"] / 1000.0)
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def served_span(a):
    """What mhla-bench measures: a count of requests after a first round left out, so a
    slow machine measures as many rounds as a fast one (a fixed 20 s held two or three
    rounds of 8 where a round took 8 s, and the rate then hung on where the window fell
    in them), or a fixed window where one is asked for."""
    if a.served_seconds > 0:
        return ["--duration", str(a.served_seconds), "--warmup", "3"]
    return ["--requests", str(a.served_requests), "--warmup-requests", str(SERVED_CONC)]


def client_run(a, ctx, port, extra):
    js = os.path.join(a.gguf_dir, "served.json")
    if os.path.exists(js):
        os.remove(js)  # exit status 1 is a failed request, or no answer at all
    ctx.run([ctx.client, "--url", "http://127.0.0.1:%d" % port, "--prompts", ctx.prompts,
             "--concurrency", str(SERVED_CONC), "--no-progress", "--json", js] +
            served_span(a) + extra, ok=(0, 1))
    with open(js) as f:
        lv = json.load(f)["levels"][0]
    # llama-server now and then drops a kept-alive connection as a request goes out
    # (mhla-bench counts a transport failure): a few are noted, more fail the row
    if not lv["completed"] or lv["failed"] > 0.05 * lv["completed"]:
        raise RuntimeError("mhla-bench: %d requests failed, %d completed" %
                           (lv["failed"], lv["completed"]))
    if lv["failed"]:
        ctx.log("note: %d of %d requests failed (%s)" % (
            lv["failed"], lv["failed"] + lv["completed"], json.dumps(lv.get("failures"))))
    return lv
