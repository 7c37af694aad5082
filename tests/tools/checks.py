"""Named checks for the Python-driven tests: each check prints one ok/FAIL line, failures
are collected, and finish() turns them into the test's exit status."""

FAILURES = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILURES.append(what)
    return cond


def finish():
    """Exit status of the test: 1 with the count of failed checks, else 0."""
    if FAILURES:
        print("%d check(s) failed" % len(FAILURES))
        return 1
    print("all checks passed")
    return 0
