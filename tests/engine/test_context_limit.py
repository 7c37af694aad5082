#!/usr/bin/python3
"""The context limit Lm*C (docs/model.md, Context limit): positions >= Lm*C are outside
what the checkpoint defines, so mhla-generate must refuse a prompt plus --max-tokens that
exceeds it.

Checks (checkpoint with C=4, Lm=8, context 32):
  * a prompt of Lm*C+1 ids is refused: exit status 1, exactly one stderr line mentioning
    an error, of the form `mhla-generate: error: ...`, that mentions the context
    (informational stderr lines such as "model loaded" may precede it);
  * Lm*C ids with --max-tokens 1 is refused the same way (prompt + max_tokens > Lm*C);
  * Lm*C ids with --max-tokens 0 is accepted (exit 0) and --logits-out has Lm*C rows;
  * Lm*C-1 ids with --max-tokens 1 is accepted (exactly fills the context);
  * Lm*C+1 ids through --prompt-ids-file are refused, Lm*C accepted;
  * the same for a second shape (C=16, Lm=3).
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import testutil as tu  # noqa: E402


def main():
    a = tu.parse_args(__doc__)
    exe = os.path.join(a.bin, "mhla-generate")
    if not os.access(exe, os.X_OK):
        print("FAIL: %s not found / not executable" % exe)
        return 1
    failures, passed = [], 0
    for name, C, Lm, V in (("c4_l8", 4, 8, 48), ("c16_l3", 16, 3, 40)):
        mdir = tu.gen(os.path.join(a.work, name), "--vocab", V, "--hidden", 32, "--heads", 2, "--chunk", C,
                      "--blocks", Lm, "--intermediate", 64, seed=7)
        N = Lm * C
        rng = np.random.default_rng(C)
        ids = lambda n: tu.ids_arg(rng.integers(0, V, size=n))  # noqa: E731

        def refused(label, args):
            p = tu.run(exe, ["--model", mdir, "--threads", "1"] + args, timeout=120)
            # informational stderr lines (model loaded ...) may come first; the error is one line
            lines = [l for l in tu.error_lines(p.stderr) if "error" in l.lower()]
            ok = (p.returncode == 1 and len(lines) == 1 and lines[0].startswith(tu.ERROR_PREFIX)
                  and "context" in lines[0].lower())
            print("%-8s %-44s rc=%s %s" % (name, label, p.returncode, lines[:1]))
            if not ok:
                failures.append("%s %s: expected exit 1 and one '%s...context...' line, got %s"
                                % (name, label, tu.ERROR_PREFIX, tu.describe(p)))
            return ok

        def accepted(label, args, rows=None):
            out = os.path.join(a.work, "logits.f32")
            if os.path.exists(out):
                os.remove(out)
            extra = ["--logits-out", out] if rows is not None else []
            p = tu.run(exe, ["--model", mdir, "--threads", "1"] + args + extra, timeout=120)
            ok = p.returncode == 0
            if ok and rows is not None:
                ok = os.path.exists(out) and os.path.getsize(out) == rows * V * 4
            print("%-8s %-44s rc=%s" % (name, label, p.returncode))
            if not ok:
                failures.append("%s %s: expected success%s, got %s" % (
                    name, label, " with %d logit rows" % rows if rows else "", tu.describe(p)))
            return ok

        checks = [
            refused("prompt Lm*C+1, --max-tokens 0", ["--prompt-ids", ids(N + 1), "--max-tokens", "0"]),
            refused("prompt Lm*C+1 (default max-tokens)", ["--prompt-ids", ids(N + 1)]),
            refused("prompt Lm*C, --max-tokens 1", ["--prompt-ids", ids(N), "--max-tokens", "1"]),
            refused("prompt Lm*C-3, --max-tokens 4", ["--prompt-ids", ids(N - 3), "--max-tokens", "4"]),
            accepted("prompt Lm*C, --max-tokens 0", ["--prompt-ids", ids(N), "--max-tokens", "0"], rows=N),
            accepted("prompt Lm*C-1, --max-tokens 1", ["--prompt-ids", ids(N - 1), "--max-tokens", "1",
                                                       "--temperature", "0"]),
            accepted("prompt Lm*C-3, --max-tokens 3 (decode feed)",
                     ["--prompt-ids", ids(N - 3), "--max-tokens", "3", "--feed", "decode", "--seed", "5"]),
        ]
        # the same limit through --prompt-ids-file (comma separated, newline terminated)
        fn = os.path.join(a.work, "ids.txt")
        with open(fn, "w") as f:
            f.write(ids(N + 1) + "\n")
        checks.append(refused("--prompt-ids-file with Lm*C+1 ids, --max-tokens 0",
                              ["--prompt-ids-file", fn, "--max-tokens", "0"]))
        with open(fn, "w") as f:
            f.write(ids(N) + "\n")
        checks.append(accepted("--prompt-ids-file with Lm*C ids, --max-tokens 0",
                               ["--prompt-ids-file", fn, "--max-tokens", "0"], rows=N))
        passed += sum(checks)
    if failures:
        print("\n%d FAILURES:" % len(failures))
        for f in failures:
            print("  " + f)
        return 1
    print("\nPASS: %d context-limit checks" % passed)
    if not a.keep:
        import shutil
        shutil.rmtree(a.work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
