#!/usr/bin/python3
"""Corrupted checkpoints must be refused cleanly (docs/model.md, Checkpoint directory):
never a crash, never a leak.

Each case starts from a valid generated checkpoint (single file or 3 shards), applies one
corruption and runs the AddressSanitizer build
    mhla-generate-asan --model DIR --prompt-ids 1 --max-tokens 0
with ASAN_OPTIONS=detect_leaks=1 (sanitizer reports exit with status 86 here, so they cannot
pass for the engine's own exit 1). Every case must give:
  * exit status exactly 1 (not a signal, not a sanitizer exit, no timeout),
  * exactly one non-empty stderr line, of the form `mhla-generate: error: ...`,
  * no AddressSanitizer / LeakSanitizer text,
  * a message containing the listed words (a tensor name where a tensor is at fault;
    words like "missing", "shape", "dtype", "truncated", "header" are matched
    case-insensitively; a group "a|b" accepts either).
The unmodified checkpoints must load (exit 0) under the same conditions.

Then a bounded fuzz loop: 200 seeded random mutations of the header region (first 8 + N
bytes) of a small checkpoint -- byte flips, digit replacements that keep the JSON valid, and
truncations -- each must exit 0 or 1 (1 with the one-line error form), with no sanitizer
report, no signal, no timeout.
"""
import json
import os
import random
import shutil
import struct
import sys
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import safetensors_np as st  # noqa: E402
import testutil as tu  # noqa: E402

BASE_FLAGS = ["--vocab", 32, "--hidden", 16, "--layers", 2, "--heads", 2, "--chunk", 4, "--blocks", 4,
              "--intermediate", 32]
T = "model.layers.1.attn.k_proj.weight"
SAFE = "model.safetensors"


# ---- corruption helpers -------------------------------------------------------------------

def edit_header(d, hook, fn=SAFE):
    path = os.path.join(d, fn)
    meta, entries = st.read_raw(path)
    st.write_raw(path, entries, meta, header_hook=hook)


def edit_entries(d, fn_entries, fn=SAFE):
    path = os.path.join(d, fn)
    meta, entries = st.read_raw(path)
    st.write_raw(path, fn_entries(entries), meta)


def replace_header_bytes(d, raw, fn=SAFE):
    path = os.path.join(d, fn)
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        f.seek(8 + n)
        data = f.read()
    raw = raw + b" " * ((-(8 + len(raw))) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw + data)


def file_layout(d, fn=SAFE):
    path = os.path.join(d, fn)
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
    return path, n, os.path.getsize(path)


def truncate_to(d, size, fn=SAFE):
    path = os.path.join(d, fn)
    with open(path, "r+b") as f:
        f.truncate(size)


def set_header_len(d, value, fn=SAFE):
    path = os.path.join(d, fn)
    with open(path, "r+b") as f:
        f.write(struct.pack("<Q", value))


def edit_json(d, fn, change):
    path = os.path.join(d, fn)
    with open(path) as f:
        obj = json.load(f)
    change(obj)
    with open(path, "w") as f:
        json.dump(obj, f, indent=2)


def write_text(d, fn, text):
    with open(os.path.join(d, fn), "w") as f:
        f.write(text)


def set_field(obj, **kw):
    obj.update(kw)


def drop(name):
    return lambda entries: [e for e in entries if e[0] != name]


def reshape_entry(name, new_shape):
    """Rewrites `name` with consistent data for a new shape (so only the shape is wrong)."""
    def f(entries):
        out = []
        for n, dt, shape, blob in entries:
            if n == name:
                esz = st.DTYPES[dt][1]
                count = 1
                for s in new_shape:
                    count *= s
                blob = (blob * (count * esz // len(blob) + 1))[:count * esz]
                shape = new_shape
            out.append((n, dt, shape, blob))
        return out
    return f


def retype_f64(name):
    def f(entries):
        out = []
        for n, dt, shape, blob in entries:
            if n == name:
                blob = st.decode(blob, dt, shape).astype("<f8").tobytes()
                dt = "F64"
            out.append((n, dt, shape, blob))
        return out
    return f


def shorten(name, nbytes):
    def f(entries):
        return [(n, dt, s, blob[:-nbytes] if n == name else blob) for n, dt, s, blob in entries]
    return f


def hook_set(name, **kw):
    def h(header):
        header[name].update(kw)
    return h


def hook_offsets(name, fn):
    def h(header):
        total = max(v["data_offsets"][1] for k, v in header.items() if k != "__metadata__")
        b, e = header[name]["data_offsets"]
        header[name]["data_offsets"] = fn(b, e, total)
    return h


def shard_of(d, idx_no):
    return "model-%05d-of-00003.safetensors" % idx_no


def remap_in_index(d):
    path = os.path.join(d, "model.safetensors.index.json")
    with open(path) as f:
        idx = json.load(f)
    wm = idx["weight_map"]
    name = sorted(n for n, f in wm.items() if f == shard_of(d, 1))[-1]
    wm[name] = shard_of(d, 2)
    with open(path, "w") as f:
        json.dump(idx, f, indent=2)
    return name


def cases(base_meta):
    Lm = base_meta["Lm"]
    D = base_meta["D"]
    c = [
        # (label, base, mutate(dir) -> optional extra expected word, expected groups)
        ("missing tensor", "single", lambda d: edit_entries(d, drop(T)), [T, "missing"]),
        ("missing lm_head.weight (untied)", "single", lambda d: edit_entries(d, drop("lm_head.weight")),
         ["lm_head.weight", "missing"]),
        ("missing mixing_matrix", "single",
         lambda d: edit_entries(d, drop("model.layers.0.attn.mixing_matrix")),
         ["model.layers.0.attn.mixing_matrix", "missing"]),
        ("wrong shape (transposed)", "single",
         lambda d: edit_header(d, hook_set(T, shape=[D, 8])), [T, "shape"]),
        ("wrong shape (extra row, consistent data)", "single",
         lambda d: edit_entries(d, reshape_entry(T, [9, D])), [T, "shape"]),
        ("wrong shape model.norm.weight", "single",
         lambda d: edit_entries(d, reshape_entry("model.norm.weight", [D + 1])), ["model.norm.weight", "shape"]),
        ("mixing_matrix of layer 1 has other Lm", "single",
         lambda d: edit_entries(d, reshape_entry("model.layers.1.attn.mixing_matrix",
                                                 [Lm + 1, Lm + 1, 1, 1, 1, 1])),
         ["mixing_matrix", "shape"]),
        ("config vocab_size != embeddings rows", "single",
         lambda d: edit_json(d, "config.json", lambda o: set_field(o, vocab_size=40)),
         ["model.embeddings.weight|lm_head.weight", "shape"]),
        ("dtype F64", "single", lambda d: edit_entries(d, retype_f64(T)), [T, "dtype"]),
        ("dtype XX", "single", lambda d: edit_header(d, hook_set(T, dtype="XX")), [T, "dtype"]),
        ("truncated in the data", "single",
         lambda d: truncate_to(d, (lambda p, n, s: 8 + n + (s - 8 - n) // 2)(*file_layout(d))), ["truncated"]),
        ("truncated by 1 byte", "single",
         lambda d: truncate_to(d, file_layout(d)[2] - 1), ["truncated"]),
        ("truncated in the header", "single",
         lambda d: truncate_to(d, 8 + file_layout(d)[1] // 2), ["truncated"]),
        ("truncated in the length prefix (5 bytes)", "single", lambda d: truncate_to(d, 5),
         ["truncated|header"]),
        ("empty model.safetensors", "single", lambda d: truncate_to(d, 0), ["truncated|header"]),
        ("header length = file size", "single",
         lambda d: set_header_len(d, file_layout(d)[2]), ["header|truncated"]),
        ("header length 2^62", "single", lambda d: set_header_len(d, 1 << 62), ["header|truncated"]),
        ("header length 2^64-1", "single", lambda d: set_header_len(d, (1 << 64) - 1), ["header|truncated"]),
        ("header not JSON", "single", lambda d: replace_header_bytes(d, b"this is {not json"), ["header"]),
        ("header JSON array", "single", lambda d: replace_header_bytes(d, b"[1, 2, 3]"), ["header"]),
        ("header JSON number", "single", lambda d: replace_header_bytes(d, b"42"), ["header"]),
        ("data_offsets out of range", "single",
         lambda d: edit_header(d, hook_offsets(T, lambda b, e, tot: [tot + 16, tot + 16 + e - b])), [T]),
        ("data_offsets end past the file", "single",
         lambda d: edit_header(d, hook_offsets(T, lambda b, e, tot: [b, tot + 4096])), [T]),
        ("data_offsets end < begin", "single",
         lambda d: edit_header(d, hook_offsets(T, lambda b, e, tot: [e, b])), [T]),
        ("data_offsets size != shape*dtype", "single",
         lambda d: edit_header(d, hook_offsets(T, lambda b, e, tot: [b, e - 4])), [T]),
        ("data size != shape*dtype (contiguous)", "single", lambda d: edit_entries(d, shorten(T, 4)), [T]),
        ("data_offsets with 3 numbers", "single",
         lambda d: edit_header(d, hook_offsets(T, lambda b, e, tot: [b, e, e])), [T]),
        ("missing config.json", "single", lambda d: os.remove(os.path.join(d, "config.json")), ["config.json"]),
        ("config.json invalid JSON", "single", lambda d: write_text(d, "config.json", '{"vocab_size": 32,'),
         ["config.json"]),
        ("config.json not an object", "single", lambda d: write_text(d, "config.json", '[1]'), ["config.json"]),
        ("use_short_conv true", "single",
         lambda d: edit_json(d, "config.json", lambda o: set_field(o, use_short_conv=True)), ["use_short_conv"]),
        ("attn non-null", "single",
         lambda d: edit_json(d, "config.json",
                             lambda o: set_field(o, attn={"layers": [1], "num_heads": 2, "num_kv_heads": 2,
                                                          "window_size": None})), ["attn"]),
        ("feature_map softmax", "single",
         lambda d: edit_json(d, "config.json", lambda o: set_field(o, feature_map="softmax")), ["feature_map"]),
        ("hidden_act gelu", "single",
         lambda d: edit_json(d, "config.json", lambda o: set_field(o, hidden_act="gelu")), ["hidden_act"]),
        ("no safetensors at all", "single", lambda d: os.remove(os.path.join(d, SAFE)), ["safetensors"]),
        ("sharded: missing shard file", "sharded", lambda d: os.remove(os.path.join(d, shard_of(d, 2))),
         [shard_of(None, 2)]),
        ("sharded: index maps a tensor to a shard lacking it", "sharded", remap_in_index, ["<remapped>"]),
        ("sharded: index.json invalid JSON", "sharded",
         lambda d: write_text(d, "model.safetensors.index.json", "{\"weight_map\": "), ["index"]),
        ("sharded: shard truncated", "sharded",
         lambda d: truncate_to(d, file_layout(d, shard_of(d, 3))[2] - 3, shard_of(d, 3)),
         ["truncated"]),
    ]
    return c


def check_clean_exit(p, allow_zero):
    """Returns a list of problems with a run's exit status / stderr."""
    probs = []
    if p.returncode is None:
        probs.append("timed out")
    elif p.returncode < 0:
        probs.append("killed by signal %d" % -p.returncode)
    elif p.returncode == tu.SANITIZER_EXITCODE:
        probs.append("sanitizer exit status %d" % p.returncode)
    elif p.returncode not in ((0, 1) if allow_zero else (1,)):
        probs.append("exit status %d" % p.returncode)
    for w in tu.SANITIZER_WORDS:
        if w in p.stderr:
            probs.append("stderr contains %r" % w)
    if p.returncode == 1:
        lines = tu.error_lines(p.stderr)
        if len(lines) != 1 or not lines[0].startswith(tu.ERROR_PREFIX):
            probs.append("stderr is not one '%s...' line" % tu.ERROR_PREFIX)
    return probs


def fuzz(exe, work, base_dir, n, seed, jobs):
    path = os.path.join(base_dir, SAFE)
    with open(path, "rb") as f:
        orig = f.read()
    (hlen,) = struct.unpack("<Q", orig[:8])
    region = 8 + hlen
    rng = random.Random(seed)
    muts = []
    digits = [i for i in range(8, region) if 48 <= orig[i] <= 57]
    for k in range(n):
        kind = k % 4
        b = bytearray(orig)
        if kind in (0, 1):   # byte flip anywhere in the length prefix + header
            pos = rng.randrange(0, region) if kind == 0 else rng.randrange(0, 8)
            b[pos] ^= rng.randrange(1, 256)
            what = "flip byte %d" % pos
        elif kind == 2:      # digit replacement: the JSON stays valid, shapes/offsets change
            pos = rng.choice(digits)
            b[pos] = 48 + (b[pos] - 48 + rng.randrange(1, 10)) % 10
            what = "digit at %d -> %s" % (pos, chr(b[pos]))
        else:                # truncation in or just after the header
            cut = rng.randrange(0, min(len(orig), region + 64))
            b = b[:cut]
            what = "truncate to %d" % cut
        muts.append((k, what, bytes(b)))

    def one(m):
        k, what, data = m
        d = os.path.join(work, "fuzz", "f%03d" % k)
        os.makedirs(d, exist_ok=True)
        shutil.copy(os.path.join(base_dir, "config.json"), d)
        with open(os.path.join(d, SAFE), "wb") as f:
            f.write(data)
        p = tu.run(exe, ["--model", d, "--prompt-ids", "1", "--max-tokens", "0", "--threads", "1"],
                   timeout=60, env=tu.sanitizer_env())
        probs = check_clean_exit(p, allow_zero=True)
        if not probs:
            shutil.rmtree(d, ignore_errors=True)
        return k, what, p, probs

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(one, muts))


def main():
    def extra(ap):
        ap.add_argument("--exe", default="mhla-generate-asan", help="program in --bin to run")
        ap.add_argument("--fuzz", type=int, default=200, help="number of fuzz mutations")
        ap.add_argument("--fuzz-seed", type=int, default=12345)
        ap.add_argument("--jobs", type=int, default=2)
    a = tu.parse_args(__doc__, extra)
    exe = os.path.join(a.bin, a.exe)
    if not os.access(exe, os.X_OK):
        print("FAIL: %s not found / not executable" % exe)
        return 1
    env = tu.sanitizer_env()
    bases = {
        "single": tu.gen(os.path.join(a.work, "base_single"), *BASE_FLAGS, seed=3),
        "sharded": tu.gen(os.path.join(a.work, "base_sharded"), *BASE_FLAGS, "--shards", 3, seed=3),
    }
    cfg = st.load_config(bases["single"])
    meta = {"Lm": 4, "D": cfg["hidden_size"]}
    failures = []

    def run_model(d):
        return tu.run(exe, ["--model", d, "--prompt-ids", "1", "--max-tokens", "0", "--threads", "1"],
                      timeout=120, env=env)

    for label, d in bases.items():
        p = run_model(d)
        probs = check_clean_exit(p, allow_zero=True)
        if p.returncode != 0:
            probs.append("the valid checkpoint does not load")
        print("%-52s rc=%s" % ("valid checkpoint (%s)" % label, p.returncode))
        if probs:
            failures.append("valid %s checkpoint: %s; %s" % (label, "; ".join(probs), tu.describe(p)))

    pending = []
    for k, (label, base, mutate, expect) in enumerate(cases(meta)):
        d = os.path.join(a.work, "case%02d" % k)
        shutil.copytree(bases[base], d)
        ret = mutate(d)
        if "<remapped>" in expect:
            expect = [ret]
        pending.append((label, d, expect))
    with ThreadPoolExecutor(max_workers=a.jobs) as pool:
        results = list(pool.map(lambda t: (t, run_model(t[1])), pending))
    for (label, d, expect), p in results:
        probs = check_clean_exit(p, allow_zero=False)
        lines = tu.error_lines(p.stderr)
        msg = lines[0] if lines else ""
        for group in expect:
            alts = group.split("|")
            # tensor / file names match exactly, plain words case-insensitively
            if not any((alt in msg) if ("." in alt or "_" in alt) else (alt.lower() in msg.lower())
                       for alt in alts):
                probs.append("message lacks %r" % group)
        print("%-52s rc=%-4s %s%s" % (label, p.returncode, msg[:110],
                                      "" if not probs else "   <-- " + "; ".join(probs)))
        if probs:
            failures.append("%s: %s\n    dir: %s\n    stderr: %r" % (label, "; ".join(probs), d, p.stderr[-1500:]))
        else:
            shutil.rmtree(d, ignore_errors=True)

    fz_dir = tu.gen(os.path.join(a.work, "fuzz_base"), "--vocab", 16, "--hidden", 16, "--layers", 1,
                    "--heads", 2, "--chunk", 4, "--blocks", 2, "--intermediate", 16, seed=5)
    res = fuzz(exe, a.work, fz_dir, a.fuzz, a.fuzz_seed, a.jobs)
    counts = {}
    for k, what, p, probs in res:
        counts[p.returncode] = counts.get(p.returncode, 0) + 1
        if probs:
            failures.append("fuzz #%d (%s): %s\n    dir: %s\n    stderr: %r" % (
                k, what, "; ".join(probs), os.path.join(a.work, "fuzz", "f%03d" % k), p.stderr[-1500:]))
    print("fuzz: %d mutations, exit statuses %s" % (len(res), dict(sorted(counts.items(), key=str))))

    if failures:
        print("\n%d FAILURES:" % len(failures))
        for f in failures:
            print("  " + f)
        return 1
    print("\nPASS: %d corruption cases, 2 valid controls, %d fuzz mutations" % (len(pending), len(res)))
    if not a.keep:
        shutil.rmtree(a.work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
