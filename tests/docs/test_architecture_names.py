#!/usr/bin/python3
"""docs/architecture.md cannot rot: every function it names must exist where it says.

The page writes functions as `name()` and ends with an index table `| `name()` | `path` |`.
This script checks that
  1. every `name()` on the page has a row in the index;
  2. every row's function is defined (a C definition, not a declaration or a call) in the
     file the row names;
  3. every source path the docs pages cite in backticks (`server/http.c`, ...) and every
     relative link they hold (with its #anchor) exists;
  4. every "docs/model.md, Section" citation in the repository's files names a heading.
It prints every failure (so a rename shows all the rows to update) and exits 1 on any.

--self-test proves the checker can fail: it checks a copy of the page with a made-up
function added to the text and to the index and a row pointing at the wrong file, and a
citation of a section that does not exist; it passes only if all three are reported.

Run:  /usr/bin/python3 tests/docs/test_architecture_names.py --root .
"""
import argparse
import os
import re
import sys
import tempfile

NAME_RE = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*)\(\)`")
ROW_RE = re.compile(r"^\|\s*`([A-Za-z_][A-Za-z0-9_]*)\(\)`\s*\|\s*`([^`]+)`\s*\|\s*$")
PATH_RE = re.compile(r"`((?:[A-Za-z0-9_.-]+/)+[A-Za-z0-9_.-]+\.(?:c|h|cu|cuh|cpp|py|md))`")
LINK_RE = re.compile(r"\]\(([^)\s]+)\)")
SKIP_EXT = (".json", ".safetensors", ".ids", ".svg")


def strip_comments_and_strings(src):
    """Blanks out comments, string and character literals (keeping newlines), so that a
    name in a comment or a string never counts as a definition."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if src[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + re.sub(r"[^\n]", " ", src[i + 1:j - 1]) + c)
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def defines(src, name):
    """True when src holds a definition of function name: at file scope (the name's line
    starts in column 0 with a type, or the name itself is at column 0), a balanced
    parameter list, then an opening brace."""
    text = strip_comments_and_strings(src)
    for m in re.finditer(r"\b%s\s*\(" % re.escape(name), text):
        line_start = text.rfind("\n", 0, m.start()) + 1
        head = text[line_start:m.start()]
        if head and (head[0].isspace() or not re.fullmatch(r"[A-Za-z_][\w\s\*]*", head)):
            continue  # indented (a call or a statement) or after an operator
        if re.search(r"\b(return|else|if|while|for|switch|case)\b", head):
            continue
        depth, j = 0, m.end() - 1
        while j < len(text):
            if text[j] == "(":
                depth += 1
            elif text[j] == ")":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        rest = text[j + 1:].lstrip()
        if rest.startswith("{"):
            return True
    return False


def check(doc_path, root):
    with open(doc_path, encoding="utf-8") as f:
        doc = f.read()
    errors = []
    index = {}
    for line in doc.splitlines():
        m = ROW_RE.match(line.strip())
        if m:
            index[m.group(1)] = m.group(2)
    if not index:
        errors.append("%s: no index table of `function()` | `file` rows" % doc_path)
    named = sorted(set(NAME_RE.findall(doc)))
    for name in named:
        if name not in index:
            errors.append("`%s()` is named on the page but has no row in the index" % name)
    for name, rel in sorted(index.items()):
        path = os.path.join(root, rel)
        if not os.path.isfile(path):
            errors.append("`%s()`: the index names %s, which does not exist" % (name, rel))
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            if not defines(f.read(), name):
                errors.append("`%s()` is not defined in %s" % (name, rel))
    errors += check_paths(doc_path, root)
    return named, index, errors


def check_paths(doc_path, root):
    """Source paths cited in backticks (from the repository root) and relative Markdown
    links (from the page's folder) must exist."""
    with open(doc_path, encoding="utf-8") as f:
        doc = f.read()
    errors = []
    for rel in sorted(set(PATH_RE.findall(doc))):
        if not os.path.exists(os.path.join(root, rel)):
            errors.append("%s cites `%s`, which does not exist" % (doc_path, rel))
    for target in sorted(set(LINK_RE.findall(doc))):
        if re.match(r"[a-z]+:", target):
            continue  # an absolute URL
        path, _, anchor = target.partition("#")
        full = os.path.join(os.path.dirname(doc_path), path) if path else doc_path
        if not os.path.exists(full):
            errors.append("%s links to %s, which does not exist" % (doc_path, target))
        elif anchor and full.endswith(".md") and anchor not in anchors_of(full):
            errors.append("%s links to %s, which has no heading #%s" % (doc_path, target, anchor))
    return errors


def anchors_of(md_path):
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces
    turned into hyphens."""
    with open(md_path, encoding="utf-8") as f:
        heads = re.findall(r"^#+\s+(.*?)\s*$", f.read(), re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in heads}


CITE_RE = re.compile(r'docs/(model|api|architecture)\.md, ((?:[^),;:."\n]|\.(?=\w)|\n[ \t*#]*)+)')


def check_citations(root):
    """Code and READMEs cite sections as "docs/model.md, Streaming form": each named
    section must be a heading of that page."""
    import subprocess
    try:
        files = subprocess.run(["git", "-C", root, "ls-files"], capture_output=True, text=True,
                               check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        return []  # not a git checkout: nothing to scan reliably
    errors = []
    for rel in files:
        if rel.startswith(("docs/", "tests/docs/")) or rel.endswith(SKIP_EXT):
            continue
        try:
            with open(os.path.join(root, rel), encoding="utf-8") as f:
                text = f.read()
        except (UnicodeDecodeError, OSError):
            continue
        for m in CITE_RE.finditer(text):
            section = " ".join(re.sub(r"\n[ \t*#]*", " ", m.group(2)).split())
            page = os.path.join(root, "docs", m.group(1) + ".md")
            heads = headings_of(page) if os.path.exists(page) else set()
            if section.lower() not in heads:
                line = text.count("\n", 0, m.start()) + 1
                errors.append("%s:%d cites docs/%s.md, %s: no such heading"
                              % (rel, line, m.group(1), section))
    return errors


def headings_of(md_path):
    with open(md_path, encoding="utf-8") as f:
        return {h.lower() for h in re.findall(r"^#+\s+(.*?)\s*$", f.read(), re.M)}


def self_test(doc_path, root):
    """The checker must report a made-up function and a wrong file."""
    with open(doc_path, encoding="utf-8") as f:
        doc = f.read()
    fake = "mhla_made_up_function_for_the_self_test"
    doc += "\nThe request then visits `%s()`.\n\n| `%s()` | `server/http.c` |\n" % (fake, fake)
    doc = doc.replace("| `route()` | `server/http.c` |", "| `route()` | `server/sched.c` |")
    with tempfile.NamedTemporaryFile("w", suffix=".md", delete=False, encoding="utf-8") as t:
        t.write(doc)
        tmp = t.name
    try:
        _, _, errors = check(tmp, root)
    finally:
        os.unlink(tmp)
    want = ["`%s()` is not defined in server/http.c" % fake,
            "`route()` is not defined in server/sched.c"]
    missing = [w for w in want if w not in errors]
    # a citation of a section that does not exist, wrapped over a comment line
    m = CITE_RE.search("/* see docs/model.md, Streaming\n * forms). */")
    heads = headings_of(os.path.join(os.path.dirname(doc_path), "model.md"))
    section = " ".join(re.sub(r"\n[ \t*#]*", " ", m.group(2)).split()) if m else ""
    if section != "Streaming forms" or section.lower() in heads:
        missing.append("a citation of docs/model.md, Streaming forms (got %r)" % section)
    for e in errors:
        print("  reported: " + e)
    if missing:
        for w in missing:
            print("FAIL: the checker did not report: " + w)
        return 1
    print("ok: the checker reports a made-up function, a function in the wrong file and a "
          "citation of a missing section")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=".", help="repository root")
    ap.add_argument("--doc", help="page to check (default: ROOT/docs/architecture.md)")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    doc = a.doc or os.path.join(a.root, "docs", "architecture.md")
    if a.self_test:
        return self_test(doc, a.root)
    named, index, errors = check(doc, a.root)
    pages = sorted(os.path.join(os.path.dirname(doc), p) for p in os.listdir(os.path.dirname(doc))
                   if p.endswith(".md") and os.path.join(os.path.dirname(doc), p) != doc)
    for page in pages:
        errors += check_paths(page, a.root)
    errors += check_citations(a.root)
    print("%s: %d functions named, %d index rows" % (doc, len(named), len(index)))
    for e in errors:
        print("FAIL: " + e)
    if errors:
        return 1
    print("ok: every named function is defined where the index says; every cited path, "
          "anchor and section exists")
    return 0


if __name__ == "__main__":
    sys.exit(main())
