#!/usr/bin/env python3
"""Agreement with Python's jinja2 on real chat templates the renderer was not
developed against (tests/template/unseen/, see its README.md).

test_differential.py checks the templates the renderer was built and fixed
against, so passing it says little about a template nobody has tried yet.
This test renders a separate set of real templates, collected after the
renderer was written and never used to change it, on the same conversations
and with the same jinja2 setup (imported from test_differential.py, so both
tests measure the same thing). A template counts as equal when every
conversation gives the same bytes on both sides, or both refuse it.

usage: test_unseen.py MHLA_TOKENIZE [TEMPLATE_DIR]
Prints each differing template with its first differing bytes, then the
fraction of equal templates; exit 1 when that fraction is below 95 %.
"""
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_differential import CONVERSATIONS, jinja_env, render_jinja, render_ours  # noqa: E402

THRESHOLD = 0.95


def first_difference(a, b, context=60):
    """The offset of the first differing byte and both sides around it."""
    i = 0
    while i < len(a) and i < len(b) and a[i] == b[i]:
        i += 1
    lo = max(0, i - context)
    return i, a[lo:i + context], b[lo:i + context]


def main():
    tool = sys.argv[1]
    tdir = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "unseen")
    # strftime_now must give the same date on both sides (see test_differential.py)
    os.environ["TZ"] = "UTC"
    time.tzset()
    env = jinja_env()
    names = sorted(n for n in os.listdir(tdir) if n.endswith(".jinja"))
    equal = all_refused = 0
    differing = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            path = os.path.join(tdir, name)
            with open(path, encoding="utf-8") as f:
                source = f.read()
            first = None
            refused = 0
            for cname, conv in CONVERSATIONS.items():
                ok_j, out_j = render_jinja(env, source, conv)
                ok_o, out_o = render_ours(tool, path, conv, tmp)
                if ok_j == ok_o and (not ok_j or out_j == out_o):
                    refused += not ok_j
                elif first is None:
                    first = (cname, ok_j, out_j, ok_o, out_o)
            if first is None:
                equal += 1
                # a template both sides refuse on every conversation agrees
                # without showing anything about rendering: say how many
                all_refused += refused == len(CONVERSATIONS)
            else:
                differing.append((name, first))
    for name, (cname, ok_j, out_j, ok_o, out_o) in differing:
        print(f"DIFFER {name} [{cname}] jinja2 {'ok' if ok_j else 'error'}, ours {'ok' if ok_o else 'error'}")
        if ok_j and ok_o:
            at, j, o = first_difference(out_j, out_o)
            print(f"  first difference at byte {at}:")
            print(f"    jinja2: {j!r}")
            print(f"    ours:   {o!r}")
        else:
            print(f"    jinja2: {out_j[:300]!r}")
            print(f"    ours:   {out_o[:300]!r}")
    fraction = equal / len(names) if names else 0.0
    print(f"unseen templates: {equal} of {len(names)} equal to jinja2 ({100 * fraction:.1f} %) "
          f"on {len(CONVERSATIONS)} conversations each; {all_refused} of them refused by both "
          f"on every conversation; threshold {100 * THRESHOLD:.0f} %")
    return 0 if fraction >= THRESHOLD else 1


if __name__ == "__main__":
    sys.exit(main())
