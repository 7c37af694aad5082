"""A fresh memory cgroup with a limit for the soak's server (soak.py --memory-limit).

The cgroup is made under this process's own memory cgroup (v1: memory.limit_in_bytes
under /sys/fs/cgroup/memory), or in v2 (memory.max) there or beside it, wherever the
memory controller is delegated to children, and
the server joins it between fork and exec, so that --state-memory auto reads the
limit at start the way it would in a container. Only the server is in it: the load
generators' memory does not count against the limit. Needs write access to the
cgroup tree (root, or a delegated v2 subtree).
"""
import os

ROOT = "/sys/fs/cgroup"


class CgroupError(Exception):
    pass


def own_memory_cgroup():
    """(version, path) of this process's memory cgroup, as /proc/self/cgroup names it."""
    v1 = v2 = None
    with open("/proc/self/cgroup") as f:
        for line in f:
            num, controllers, path = line.rstrip("\n").split(":", 2)
            if "memory" in controllers.split(","):
                v1 = path
            elif num == "0" and controllers == "":
                v2 = path
    if v1 is not None:
        return 1, v1
    if v2 is not None and os.path.exists(os.path.join(ROOT, "cgroup.controllers")):
        return 2, v2
    raise CgroupError("no memory cgroup in /proc/self/cgroup (neither a v1 memory line nor "
                      "a v2 unified hierarchy at %s)" % ROOT)


def v2_memory_parent(own):
    """The v2 cgroup to make the child in: our own when it delegates memory to children,
    else its parent when that one does (the child is then a sibling of ours); None."""
    for d in (own, os.path.dirname(own)):
        if not d.startswith(ROOT):
            break
        try:
            with open(os.path.join(d, "cgroup.subtree_control")) as f:
                if "memory" in f.read().split():
                    return d
        except OSError:
            pass
    return None


class MemoryCgroup:
    """mkdir, limit, join (in the child), usage, rmdir."""

    def __init__(self, limit_mib, name):
        self.version, own = own_memory_cgroup()
        base = ROOT + ("/memory" if self.version == 1 else "")
        own = base + own.rstrip("/")
        self.limit = limit_mib << 20
        self.limit_file = "memory.limit_in_bytes" if self.version == 1 else "memory.max"
        self.usage_file = "memory.usage_in_bytes" if self.version == 1 else "memory.current"
        self.peak_file = "memory.max_usage_in_bytes" if self.version == 1 else "memory.peak"
        # v1: a child of our own memory cgroup. v2 gives a child the memory controller only
        # where the parent lists it in cgroup.subtree_control, which a cgroup holding
        # processes (ours does) cannot do: there a sibling, under a parent that delegates it
        self.parent = own if self.version == 1 else v2_memory_parent(own)
        self.path = os.path.join(self.parent or own, name)
        try:
            if self.parent is None:
                raise OSError("neither %s nor its parent lists memory in "
                              "cgroup.subtree_control" % own)
            os.mkdir(self.path)
        except OSError as e:
            raise CgroupError("cannot create the memory cgroup %s (cgroup v%d): %s; it needs "
                              "root or a delegated cgroup (v2: e.g. systemd-run --scope -p "
                              "Delegate=yes)" % (self.path, self.version, e))
        try:
            self._write(self.limit_file, str(self.limit))
        except OSError as e:
            self.remove()
            raise CgroupError("cannot set %s/%s to %d: %s" % (self.path, self.limit_file,
                                                              self.limit, e))

    def _write(self, name, value):
        with open(os.path.join(self.path, name), "w") as f:
            f.write(value)

    def _read(self, name):
        try:
            with open(os.path.join(self.path, name)) as f:
                v = f.read().strip()
            return int(v) if v.isdigit() else v
        except OSError:
            return None

    def join(self):
        """Moves the calling process in (subprocess's preexec_fn: the child, before exec)."""
        self._write("cgroup.procs", str(os.getpid()))

    def usage(self):
        """What the cgroup's files say now: MiB in use, peak MiB, limit hits."""
        mib = lambda v: round(v / (1 << 20), 1) if isinstance(v, int) else v
        out = {"usage_mib": mib(self._read(self.usage_file)),
               "peak_mib": mib(self._read(self.peak_file))}
        if self.version == 1:
            out["failcnt"] = self._read("memory.failcnt")
        else:
            events = self._read("memory.events")
            if isinstance(events, str):
                out.update({"events_" + k: int(v) for k, v in
                            (line.split() for line in events.splitlines())})
        return out

    def describe(self):
        return {"cgroup": self.path, "version": self.version, "limit_mib": self.limit >> 20}

    def remove(self):
        """rmdir once its processes are gone; the error text, or None."""
        try:
            os.rmdir(self.path)
            return None
        except OSError as e:
            return "cannot remove %s: %s" % (self.path, e)
