"""Server-sent events as a client reads them: the one reader the tests and benchmarks that
time a stream's chunks share."""
import json


def events(resp):
    """The JSON data events of a streamed http.client response, each as soon as it arrives:
    read1 returns what the connection has, where iterating the response waits to fill its
    buffer. Other lines (comments, `data: [DONE]`) are skipped."""
    buf = b""
    while True:
        data = resp.read1(65536)
        if not data:
            return
        buf += data
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            line = line.strip()
            if line.startswith(b"data: {"):
                yield json.loads(line[6:])
