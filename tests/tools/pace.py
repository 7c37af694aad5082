"""Time limits derived from the work, for tests that run on shared, busy machines.

A test measures how long a known piece of work takes on this machine right now
(a few generated tokens of its model, say) and sizes every later limit as that
pace x the work the limit covers x a generous factor. A slow or busy machine
gets longer limits; a limit still ends a test that hangs. No limit is shorter
than the floor it is given (what the test used when the machine was idle).

MHLA_TEST_TIME_FACTOR multiplies the factor (a sanitizer build, say, whose
pace changes with the work more than a plain build's).
"""
import os
import time

# How much slower than measured the machine may get while the test runs: other
# jobs start, both cores are taken, several engine steps share one.
FACTOR = 20.0 * float(os.environ.get("MHLA_TEST_TIME_FACTOR", "1"))


class Pace:
    def __init__(self, scale=1.0):
        self.scale = scale  # a slow device's extra factor (e.g. the CUDA simulator)
        self.per_unit = {}

    def measure(self, name, units, fn):
        """Runs fn() (units of work named name), keeps its seconds per unit (the slowest
        seen), returns what fn returns."""
        t0 = time.time()
        out = fn()
        dt = max(time.time() - t0, 1e-3)
        self.per_unit[name] = max(self.per_unit.get(name, 0.0), dt / max(units, 1))
        return out

    def limit(self, name, units, floor):
        """Seconds allowed for units of work named name: never below floor."""
        return max(floor, FACTOR * units * self.per_unit.get(name, 0.0)) * self.scale
