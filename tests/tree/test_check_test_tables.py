#!/usr/bin/python3
"""The README test-table check itself: on a copy of the READMEs where one row
names a test that does not exist instead of one that does, the check must fail
and name both; on the READMEs as they are, it must pass.

    test_check_test_tables.py --source SOURCE_DIR --build BUILD_DIR --work DIR [--ctest CTEST]
"""
import argparse
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_test_tables  # noqa: E402

CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "check_test_tables.py")


def run(source, a):
    r = subprocess.run([sys.executable, CHECK, "--source", source, "--build", a.build,
                        "--ctest", a.ctest], capture_output=True, text=True)
    print(r.stdout + r.stderr)
    return r.returncode, r.stdout


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--source", required=True)
    p.add_argument("--build", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--ctest", default="ctest")
    a = p.parse_args()

    # The deliberate mismatch: kvstate.churn_asan's row renamed.
    shutil.rmtree(a.work, ignore_errors=True)
    for readme in set(check_test_tables.MODULE_README.values()):
        os.makedirs(os.path.join(a.work, os.path.dirname(readme)), exist_ok=True)
        shutil.copy(os.path.join(a.source, readme), os.path.join(a.work, readme))
    path = os.path.join(a.work, "kvstate/README.md")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if "| `kvstate.churn_asan` |" not in text:
        sys.exit("FAIL: kvstate/README.md has no row `kvstate.churn_asan` to rename")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text.replace("| `kvstate.churn_asan` |", "| `kvstate.churn_asan_renamed` |"))

    rc, out = run(a.work, a)
    if rc != 1:
        sys.exit(f"FAIL: the check exits {rc} on a renamed row, expected 1")
    for want in ("no row names kvstate.churn_asan ",
                 "`kvstate.churn_asan_renamed` is in the table"):
        if want not in out:
            sys.exit(f"FAIL: the check's report lacks '{want}'")

    rc, _ = run(a.source, a)
    if rc != 0:
        sys.exit(f"FAIL: the check exits {rc} on the READMEs as they are")
    print("PASS: a renamed row fails the check and is named; the real tables pass")


if __name__ == "__main__":
    main()
