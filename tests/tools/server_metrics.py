"""The server's /metrics (Prometheus text format) as a dict of samples: the one parser the
tests and benchmarks that read the server's counters share."""
import http.client
import re
import time

# a sample's name with its optional {labels}, as Prometheus writes it
_KEY = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[^}]*\})?$')


def parse(text):
    """Every sample of a Prometheus text exposition as {'name{labels}': value}, e.g.
    'mhla_step_cost_seconds{part="fixed"}': 0.0012; # HELP / # TYPE and blank lines are
    skipped. A line without a value, or whose name is not a metric name with optional
    {labels}, raises ValueError naming it."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.rpartition(" ")
        try:
            if not sep or not _KEY.match(key):
                raise ValueError("no name and value")
            out[key] = float(value)
        except ValueError:
            raise ValueError("/metrics: not a 'name value' sample: %r" % line) from None
    return out


def fetch(port, timeout, host="127.0.0.1"):
    """GET /metrics from the server at host:port, parsed (see parse). Raises RuntimeError
    when the server answers other than 200."""
    c = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        c.request("GET", "/metrics")
        r = c.getresponse()
        body = r.read().decode()
    finally:
        c.close()
    if r.status != 200:
        raise RuntimeError("GET /metrics on port %d: HTTP %d: %s" % (port, r.status, body[:200]))
    return parse(body)


def wait_until(read, pred, limit_s, poll_s=0.02):
    """Polls read() (a server's parsed /metrics) until pred(metrics) holds: True, or False
    when limit_s seconds pass first. The wait is on the server's work, so the caller derives
    limit_s from that work (tests/tools/pace.py), not a fixed short time."""
    deadline = time.time() + limit_s
    while time.time() < deadline:
        if pred(read()):
            return True
        time.sleep(poll_s)
    return False
