#!/usr/bin/python3
"""A fake OpenAI-style completions server for testing mhla-bench (loopback only).

Each request's behaviour is programmed by its prompt, a string of key=value words
(defaults in brackets):
  ttft=MS [100]     delay from the request's arrival to the first token
  itl=MS [20]       delay between tokens
  n=N [8]           tokens to send
  per_chunk=K [1]   tokens per chunk, chunks K*itl apart (token_ids of length K when asked)
  status=CODE       answer with this HTTP status and an OpenAI error body instead
  drop=K            close the connection after K tokens, without [DONE]
  split=1           write every event in pieces of 1-3 bytes, with \\r\\n line endings and
                    comment lines in between (exercises incremental parsing)
Tokens are sent on an absolute schedule (arrival + ttft + k*itl), so scheduling errors
do not accumulate. The server records the arrival time of every request, and
GET /arrivals returns them (seconds, time.monotonic()); take_log() gives the send time
of every chunk, i.e. what the server actually did when a busy machine made it late.
Token text is "t<k> ".
POST /v1/chat/completions is served too: the program is then the content of the last
user message, and the stream is chat.completion.chunk events: a first chunk with only
the assistant's role (sent on arrival, before the programmed TTFT; with token_ids [] when
asked, as mhla-server does), one delta.content chunk per programmed chunk, and an empty
delta with the finish_reason. A chat body without a list of {role, content} messages, or
with "prompt", is answered 400; so is a completions body with "messages". take_log()
records each request's path and body.
/tokenize and /detokenize map bytes to ids (byte b = id b) like mhla-server's stand-in.
"""
import http.server
import json
import random
import socket
import socketserver
import threading
import time


def program(prompt):
    p = {"ttft": 100.0, "itl": 20.0, "n": 8, "per_chunk": 1, "status": 200, "drop": -1,
         "split": 0}
    if isinstance(prompt, str):
        for word in prompt.split():
            if "=" in word:
                k, v = word.split("=", 1)
                if k in p:
                    p[k] = type(p[k])(float(v)) if isinstance(p[k], float) else int(v)
    return p


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def setup(self):
        super().setup()
        # tokens go out the moment they are written: no Nagle delay on small chunks
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def send_json(self, status, obj):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/arrivals":
            with self.server.lock:
                self.send_json(200, {"arrivals": list(self.server.arrivals)})
        else:
            self.send_json(404, {"error": {"message": "not found"}})

    def chunk(self, data, split):
        """One HTTP chunk per write; split writes tiny pieces."""
        if not split:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
            return
        i = 0
        while i < len(data):
            k = self.server.rng.randint(1, 3)
            piece = data[i:i + k]
            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.flush()
            i += k

    def event(self, obj, split):
        payload = obj if isinstance(obj, str) else json.dumps(obj)
        if split:
            self.chunk(b": keep-alive\r\ndata: " + payload.encode() + b"\r\n\r\n", True)
        else:
            self.chunk(b"data: " + payload.encode() + b"\n\n", False)

    def bad_request(self, msg):
        return self.send_json(400, {"error": {"message": msg, "type": "invalid_request_error",
                                              "param": None, "code": None}})

    def body_error(self, body):
        """Why body does not fit the path's shape, or None."""
        if self.path == "/v1/completions":
            return "'messages' belongs to /v1/chat/completions" if "messages" in body else None
        msgs = body.get("messages")
        if "prompt" in body:
            return "'prompt' belongs to /v1/completions"
        if not isinstance(msgs, list) or not msgs or not all(
                isinstance(m, dict) and isinstance(m.get("role"), str) and
                isinstance(m.get("content"), str) for m in msgs):
            return "'messages' must be a non-empty list of {role, content} objects"
        return None

    def event_obj(self, chat, delta_or_text, finish, ids):
        """One stream chunk of either shape; ids None: no token_ids field."""
        choice = {"index": 0, "logprobs": None, "finish_reason": finish}
        if chat:
            choice["delta"] = delta_or_text
        else:
            choice["text"] = delta_or_text
        if ids is not None:
            choice["token_ids"] = ids
        return {"id": "cmpl-fake", "object": "chat.completion.chunk" if chat else
                "text_completion", "created": 0, "model": "fake", "choices": [choice]}

    def do_POST(self):
        t0 = time.monotonic()
        length = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(length) or b"{}")
        if self.path == "/tokenize":
            ids = list(body.get("prompt", "").encode())
            return self.send_json(200, {"tokens": ids, "count": len(ids), "max_model_len": 4096})
        if self.path == "/detokenize":
            ids = body.get("tokens", [])
            text = bytes(i for i in ids if 0 < i < 256).decode("utf-8", "replace")
            return self.send_json(200, {"prompt": text})
        if self.path not in ("/v1/completions", "/v1/chat/completions"):
            return self.send_json(404, {"error": {"message": "not found"}})
        chat = self.path == "/v1/chat/completions"
        with self.server.lock:
            self.server.arrivals.append(t0)
        why = self.body_error(body)
        users = [] if why or not chat else [m["content"] for m in body["messages"]
                                             if m["role"] == "user"]
        p = program(users[-1] if users else body.get("prompt"))
        rec = {"t0": t0, "program": p, "sends": [], "done": None, "path": self.path,
               "body": body}
        with self.server.lock:
            self.server.log.append(rec)
        if why:
            return self.bad_request(why)
        if p["status"] != 200:
            return self.send_json(p["status"], {"error": {
                "message": "programmed failure %d" % p["status"], "type": "test",
                "param": None, "code": None}})
        want_ids = bool(body.get("return_token_ids"))
        usage = bool((body.get("stream_options") or {}).get("include_usage"))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        if chat:  # the role alone, at once: no token, so it must not end the TTFT
            self.event(self.event_obj(True, {"role": "assistant", "content": ""}, None,
                                      [] if want_ids else None), p["split"])
        if not self.stream_tokens(p, rec, chat, want_ids):
            return  # dropped: no terminating chunk, the client sees a broken transfer
        self.event(self.event_obj(chat, {} if chat else "", "length", None), p["split"])
        if usage:
            n = p["n"]
            self.event({"id": "cmpl-fake", "object": "chat.completion.chunk" if chat else
                        "text_completion", "created": 0, "model": "fake", "choices": [],
                        "usage": {"prompt_tokens": 5, "completion_tokens": n,
                                  "total_tokens": n + 5}}, p["split"])
        self.event("[DONE]", p["split"])
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
        rec["done"] = time.monotonic()

    def stream_tokens(self, p, rec, chat, want_ids):
        """Sends the programmed tokens; False when the program dropped the connection."""
        n, k = p["n"], p["per_chunk"]
        sent = 0
        step = 0
        while sent < n:
            # chunk `step` carries k tokens: the programmed per-token gap is itl
            due = rec["t0"] + (p["ttft"] + step * k * p["itl"]) / 1000.0
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            m = min(k, n - sent)
            text = "".join("t%d " % (sent + j) for j in range(m))
            self.event(self.event_obj(chat, {"content": text} if chat else text, None,
                                      list(range(sent, sent + m)) if want_ids else None),
                       p["split"])
            rec["sends"].append((time.monotonic(), m))
            sent += m
            step += 1
            if p["drop"] >= 0 and sent >= p["drop"]:
                self.close_connection = True
                self.wfile.flush()
                return False
        return True


class FakeServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # many clients connect at once; the default backlog of 5 drops SYNs (1 s retries)
    request_queue_size = 256

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.lock = threading.Lock()
        self.arrivals = []
        self.log = []
        self.rng = random.Random(7)
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.server_address[1]

    def take_arrivals(self):
        with self.lock:
            a, self.arrivals = self.arrivals, []
        return a

    def take_log(self):
        """What the server actually did, per request: arrival t0, the program, the
        (time, tokens) of every chunk sent, and when [DONE] went out."""
        with self.lock:
            g, self.log = self.log, []
        return g

    def stop(self):
        self.shutdown()
        self.server_close()


if __name__ == "__main__":
    s = FakeServer()
    print(s.url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        s.stop()
