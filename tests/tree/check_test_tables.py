#!/usr/bin/python3
"""Each module README's test table lists exactly the tests `ctest -N -L <module>` lists.

    check_test_tables.py --source SOURCE_DIR --build BUILD_DIR [--ctest CTEST]

A test table is a Markdown table whose header's first cell is "test"; the names
are the `backticked` words of its first column, with {a,b} alternatives
(`kvstate.prefix_exact.{gqa,elu_norm}` is two names). For every module of
MODULE_README the check reads `ctest -N -L <module>` and reports:
  - a test of the module that its README's table does not name;
  - a name in the table that is no test of this build, unless the build left
    that test out for a missing requirement (tests-absent.txt, written by
    mhla_add_test's REQUIRES), e.g. the GPU tests in a build without nvcc;
  - a name in a table of a README that is not its module's README;
  - a test that `-L <module>` selects but that belongs to another module
    (other than the fixtures ctest adds to run the module's tests);
  - a test without its module's label or without exactly one tier label
    (quick or slow), i.e. one not declared with mhla_add_test.
Exit 0 when all agree, 1 with the list of differences.
"""
import argparse
import json
import os
import re
import subprocess
import sys

# Where each module's tests are documented. A module that declares tests needs
# an entry here (and its README a test table).
MODULE_README = {
    "base": "base/README.md",
    "engine": "README.md",
    "fuzz": "README.md",
    "style": "README.md",
    "docs": "README.md",
    "cuda": "engine/cuda/README.md",
    "kvstate": "kvstate/README.md",
    "tokenizer": "tokenizer/README.md",
    "template": "template/README.md",
    "grammar": "grammar/README.md",
    "server": "server/README.md",
    "client": "client/README.md",
    "train": "train/README.md",
    "deploy": "deploy/README.md",
    "fault": "tests/fault/README.md",
}
TIERS = {"quick", "slow"}
NAME_RE = re.compile(r"^[a-z0-9]+(\.[a-z0-9_]+){1,2}$")


def expand(word):
    """`a.{x,y}.z` -> [a.x.z, a.y.z] (nested alternatives expand left to right)."""
    m = re.search(r"\{([^{}]*)\}", word)
    if not m:
        return [word]
    out = []
    for alt in m.group(1).split(","):
        out += expand(word[:m.start()] + alt + word[m.end():])
    return out


def table_names(path):
    """{name: line number} of every test table's first column in a Markdown file."""
    names = {}
    in_table = False
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not line.lstrip().startswith("|"):
                in_table = False
                continue
            if not in_table:
                in_table = cells[0].lower() == "test"
                continue
            if set(cells[0]) <= set("-: "):
                continue  # the separator row
            for word in re.findall(r"`([^`]+)`", cells[0]):
                for name in expand(word):
                    names.setdefault(name, lineno)
    return names


def ctest_tests(ctest, build, label=None):
    """The tests `ctest -N [-L label]` lists: {name: properties}."""
    cmd = [ctest, "--test-dir", build, "-N", "--show-only=json-v1"]
    if label:
        cmd += ["-L", label]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    tests = {}
    for t in json.loads(out)["tests"]:
        props = {p["name"]: p["value"] for p in t.get("properties", [])}
        tests[t["name"]] = props
    return tests


def absent_tests(build):
    path = os.path.join(build, "tests-absent.txt")
    absent = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    name, why = (line.split(None, 1) + [""])[:2]
                    absent[name] = why.strip()
    return absent


def module_of(name):
    return name.split(".", 1)[0]


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--source", required=True, help="the source tree (its READMEs)")
    p.add_argument("--build", required=True, help="the build folder ctest reads")
    p.add_argument("--ctest", default="ctest")
    a = p.parse_args()

    problems = []
    absent = absent_tests(a.build)

    # Every test: a module.test[.variant] name, its module's label, one tier.
    for name, props in sorted(ctest_tests(a.ctest, a.build).items()):
        labels = set(props.get("LABELS", []))
        module = module_of(name)
        if not NAME_RE.match(name):
            problems.append(f"{name}: not a module.test[.variant] name")
        if module not in MODULE_README:
            problems.append(f"{name}: module '{module}' has no README in MODULE_README "
                            f"({os.path.relpath(__file__, a.source)})")
        if module not in labels or len(labels & TIERS) != 1:
            problems.append(f"{name}: labels {sorted(labels)} are not its module and one "
                            f"tier of {sorted(TIERS)} (declare it with mhla_add_test)")

    documented = {}
    for readme in sorted(set(MODULE_README.values())):
        path = os.path.join(a.source, readme)
        if not os.path.exists(path):
            problems.append(f"{readme}: missing")
            continue
        for name, lineno in table_names(path).items():
            module = module_of(name)
            if MODULE_README.get(module) != readme:
                where = MODULE_README.get(module, "no README")
                problems.append(f"{readme}:{lineno}: `{name}` belongs in {where}")
            documented.setdefault(module, {})[name] = f"{readme}:{lineno}"

    counts = []
    for module, readme in sorted(MODULE_README.items()):
        selected = ctest_tests(a.ctest, a.build, module)
        fixtures = {f for props in selected.values() for f in props.get("FIXTURES_REQUIRED", [])}
        registered = set()
        for name, props in selected.items():
            if module_of(name) == module:
                registered.add(name)
            elif not fixtures & set(props.get("FIXTURES_SETUP", [])):
                problems.append(f"ctest -L {module} selects {name}, a test of another module")
        doc = documented.get(module, {})
        for name in sorted(registered - set(doc)):
            problems.append(f"{readme}: no row names {name} (ctest -N -L {module} lists it)")
        for name in sorted(set(doc) - registered):
            if name in absent:
                continue  # left out of this build: its requirement is missing
            problems.append(f"{doc[name]}: `{name}` is in the table but ctest -N -L {module} "
                            f"does not list it")
        counts.append(f"{module} {len(registered)}")

    if problems:
        print("README test tables and ctest -N differ:")
        for pr in problems:
            print("  " + pr)
        return 1
    print("README test tables match ctest -N: " + ", ".join(counts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
