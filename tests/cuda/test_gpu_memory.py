#!/usr/bin/python3
"""--state-memory auto on a GPU engine: the state pool is sized from the device's free memory.

The server (--device cuda, default --state-memory auto) logs the budget's arithmetic with
"device free memory" as its limit; the test checks it:
  - the pool's pages equal the logged terms: free - step buffers - headroom (256 MiB + 10 % of
    free) - sequence buffers - resume entries, under the cap, in whole pages;
  - the engine got that pool (/metrics: pages total x page bytes);
  - with --fake-mib (the CUDA simulator's CUDASIM_DEVICE_MEM_MB): the device total is the one
    set, the free memory is that total less what the weights and the engine hold, two device
    sizes 512 MiB apart give free memory exactly 512 MiB apart and pools 90 % of that apart,
    and a device too small for one full-context sequence makes the server refuse to start
    with the reason.
Without a usable GPU (real backend) it exits 77: skipped.
"""
import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import server_metrics  # noqa: E402
import server_proc  # noqa: E402
import testutil as tu  # noqa: E402

MIB = 1 << 20
# a shape whose pool stays under its cap (4 x --max-running full-context sequences)
SHAPE = ("--vocab 256 --hidden 256 --layers 4 --heads 4 --chunk 64 --blocks 32 "
         "--intermediate 512")
failures = []


def check(ok, what):
    print("%s %s" % ("ok  " if ok else "FAIL", what), flush=True)
    if not ok:
        failures.append(what)


def serve(a, model, tag, fake_mib):
    """Starts the server, returns (budget event, arithmetic message, metrics) or the log when
    it did not start."""
    env = dict(os.environ)
    if fake_mib:
        env["CUDASIM_DEVICE_MEM_MB"] = str(fake_mib)
    log = os.path.join(a.work, tag + ".log")
    argv = [a.server, "--model", model, "--host", "127.0.0.1", "--port", "0", "--device",
            "cuda", "--gpu-weights", "f32", "--threads", "2", "--max-running", "128"]
    with open(log, "wb") as f:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=f, env=env)
    # loading and uploading a small checkpoint: seconds even in the simulator on a busy machine
    port, why = server_proc.listening_port(proc, log, 600)
    if port is None:
        server_proc.stop(proc, 30)
        return None, None, None, open(log, errors="replace").read()
    try:
        m = server_metrics.fetch(port, 120)
    finally:
        rc, _ = server_proc.stop(proc, 120)
        check(rc == 0, "%s: SIGTERM: exit 0 (got %s)" % (tag, rc))
    ev = server_proc.log_events(log, "state_memory")
    ar = server_proc.log_events(log, "state_memory_arithmetic")
    return (ev[0] if ev else None), (ar[0]["message"] if ar else ""), m, None


def check_budget(tag, ev, msg, m, fake_mib):
    check(ev is not None and ev["limit_from"] == "device free memory",
          "%s: the budget's limit is the device's free memory (%s)" % (tag, ev and ev["limit_from"]))
    if ev is None:
        return
    check("device free" in msg and "already there" in msg,
          "%s: the arithmetic is logged: %s" % (tag, msg))
    free, total = ev["limit_mib"], ev["device_total_mib"]
    check(0 < free < total, "%s: free %d MiB of a %d MiB device" % (tag, free, total))
    if fake_mib:
        check(total == fake_mib, "%s: the device total is the simulator's %d MiB (got %d)" %
              (tag, fake_mib, total))
        check(free <= total - ev["device_weights_mib"],
              "%s: the weights (%d MiB) are already taken from the free memory" %
              (tag, ev["device_weights_mib"]))
    check(ev["weights_mib"] == 0, "%s: the weights are not taken twice" % tag)
    # each logged term is rounded down to whole MiB: the sum may differ by that much
    check(abs(ev["headroom_mib"] - (256 + free * 0.10)) <= 1,
          "%s: headroom %d MiB = 256 + 10%% of %d" % (tag, ev["headroom_mib"], free))
    want = min(ev["cache_cap_mib"], free - ev["step_buffers_mib"] - ev["headroom_mib"] -
               ev["sequence_buffers_mib"] - ev["resume_entries_mib"])
    check(want - 6 <= ev["pages_mib"] <= want + 1,
          "%s: pages %d MiB = min(cap, free - step buffers - headroom - sequence buffers - "
          "resume entries) = %d MiB" % (tag, ev["pages_mib"], want))
    got = m.get('mhla_state_pages{kind="total"}', 0) * m.get("mhla_state_page_bytes", 0) / MIB
    check(abs(got - ev["pages_mib"]) <= 1,
          "%s: the engine's pool is that budget (%.1f MiB in /metrics)" % (tag, got))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--server", required=True, help="the mhla-server build to test")
    ap.add_argument("--work", required=True)
    ap.add_argument("--fake-mib", type=int, default=0,
                    help="the simulator's device size (CUDASIM_DEVICE_MEM_MB); 0: a real GPU")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    model = tu.gen(os.path.join(a.work, "model"), *SHAPE.split(), seed=41)

    ev, msg, m, log = serve(a, model, "device", a.fake_mib)
    if ev is None and log is not None:
        if not a.fake_mib and "no usable CUDA" in log:
            print("skipped: no usable GPU:\n" + log[-400:])
            return 77
        check(False, "the server starts on the device: %s" % log[-800:])
        return 1
    check_budget("device", ev, msg, m, a.fake_mib)

    if a.fake_mib:
        ev2, msg2, m2, log2 = serve(a, model, "device_plus_512", a.fake_mib + 512)
        check(ev2 is not None, "a 512 MiB larger device starts" + (log2 or "")[-400:])
        if ev and ev2:
            check_budget("device_plus_512", ev2, msg2, m2, a.fake_mib + 512)
            check(ev2["limit_mib"] - ev["limit_mib"] == 512,
                  "512 MiB more device memory: 512 MiB more free (%d vs %d)" %
                  (ev2["limit_mib"], ev["limit_mib"]))
            grow = ev2["pages_mib"] - ev["pages_mib"]
            check(abs(grow - 512 * 0.9) <= 2,
                  "512 MiB more device memory: %d MiB more pages (90 %% of it)" % grow)
        # too small for one full-context sequence after the weights and the headroom
        ev3, _, _, log3 = serve(a, model, "too_small", 300)
        check(ev3 is None and log3 is not None and "less than one full-context sequence" in log3,
              "a 300 MiB device: the server refuses to start with the reason (%s)" %
              (log3 or "")[-300:].strip())
    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
