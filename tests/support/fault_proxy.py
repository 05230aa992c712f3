#!/usr/bin/env python3
"""A loopback HTTP reverse proxy with fault injection, in front of a Datavo origin server (`datavo serve`).

Python 3 standard library only. It forwards every request to the upstream origin unchanged and streams the answer
back, except that shard downloads (GET of a ticket URL, paths under /v1/shards/) misbehave as the *mode file* says.
The end-to-end suite tests/e2e/test_faulty_origin.sh rewrites the mode file between runs of the real client
(`datavo warm`, `datavo read`), so that the client's transport (src/net/http_client.cpp) and its install path meet
every origin failure it claims to handle, with the real server's tickets, ETags and Range answers behind them.

Starting it
-----------
    python3 tests/support/fault_proxy.py --upstream http://127.0.0.1:PORT --mode-file FILE --port-file FILE
        [--host 127.0.0.1] [--port 0] [--verbose]

It binds 127.0.0.1 on an ephemeral port (port 0) by default and, once it is listening, writes the port number to
--port-file atomically (write + rename), so a test waits for that file to appear instead of racing for a port.
SIGTERM (or SIGINT) stops it at once with exit status 0, even while a handler thread sleeps in a stall.

The mode file
-------------
One line: a mode name and optional key=value options, e.g.

    ok                          pass everything through (also: the mode file is missing or empty)
    truncate count=1            send the upstream status and headers (Content-Length included) but only half of the
                                body, then close the connection cleanly (FIN): a short body
    reset count=2               send half of the body, then abort the connection with a TCP RST (SO_LINGER 0)
    status500 count=2           answer 500 with a JSON error body (docs/protocol.md's error format) without asking
                                the upstream; any status<NNN> works the same way (status503, status404, status403)
    status404                   ... with no count: every shard request gets it (a permanent failure)
    stall count=1 seconds=40    send half of the body, then go silent for `seconds` (default 5), then close
    wrongbytes                  send the upstream body with every byte inverted, keeping status, headers and length
    wrongsize                   send the upstream body without its last byte, with a Content-Length to match: a
                                complete, well-formed answer that is one byte shorter than the ticket's size
    slow rate=65536             send the whole upstream body, correctly, at `rate` bytes/s (a slow link: for
                                tests that interrupt a transfer in the middle)
    flipbyte offset=N           send the upstream body with the one byte at entity offset N (counted from the
                                shard's first byte, also in a 206 answer to a Range) XORed with 0x01

Options:
    count=K       the fault hits the first K shard requests after the mode (re)armed, then requests pass through.
                  Without count, every shard request is hit.
    seconds=S     how long a stall lasts (default 5).
    rate=B        slow: body bytes per second (default 65536); flipbyte: given, the body goes at that pace too.
    linger_ms=N   reset only: pause N ms (default 200) between the half body and the RST, so that the client has
                  read the half before the RST arrives (a RST lets the receiving kernel drop unread data).
    ticket=R      with any mode: rewrite every 200 answer to POST /v1/stream-tickets (docs/protocol.md, "Chunk
                  digests"), whatever `count` says: R is
                    strip      drop chunk_size, chunks and chunks_sha256 (a server from before chunk digests)
                    lie:K      replace the digest of chunk K and recompute chunks_sha256 (a lying list that is
                               consistent with itself: only the bytes can show the lie)
                    unbound:K  replace the digest of chunk K and keep chunks_sha256 (a list that is not the ticket's)
                    drop:K     remove the digest of chunk K and recompute chunks_sha256 (a list one chunk short of
                               the ticket's size)

The mode re-arms (its K requests start over) whenever the mode file changes (inode, mtime, size or content: write
it atomically with a temp file + mv) and on POST /_proxy_reset. The file is re-read on every shard request, so a
change needs no signal and no restart.

Control endpoints (answered by the proxy itself, never forwarded, never counted)
-------------------------------------------------------------------------------
    GET  /_proxy_stats      the counters below, as JSON
    POST /_proxy_reset      zeroes the counters and re-arms the current mode

/_proxy_stats JSON:
    {"total": <requests forwarded or faulted>,
     "mode": "truncate count=1",                    the mode line in force
     "routes": {"manifest": {"requests": 1, "statuses": [200]}, "ticket": {...}, "shard": {...}, ...},
     "shard": {"requests": 5, "range_requests": 1, "ranges": ["bytes=81408-"], "statuses": [200, 200, 206, ...],
               "faults": 1,
               "paths": {"/v1/shards/<hash>.tar": {"requests": 2, "range_requests": 1, "statuses": [200, 206]}}},
     "log": [{"method": "GET", "route": "shard", "path": "...", "range": null or "bytes=a-", "status": 200,
              "fault": "truncate" or null, "body_bytes": <body bytes sent to the client>,
              "content_length": <the Content-Length sent, or null>, "done": <false while still being answered>,
              "at": <seconds since the proxy started, when the request arrived>,
              "authorization": <whether the request carried an Authorization header (its value is never kept)>}, ...]}
A request's status (and its entry in "statuses") is recorded once its status line is sent, so a stalled request
shows up while it stalls; "status" is null for a request that never got an answer (the client went away first).
Routes follow docs/protocol.md's metrics: instance, manifest, ticket, shard, metrics, other. Query strings (which
carry ticket signatures) are left out of the stats; "path" is the URL path alone.
"""

import argparse
import hashlib
import http.client
import json
import os
import re
import signal
import socket
import struct
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CHUNK = 64 * 1024

# Hop-by-hop headers (RFC 9110 section 7.6.1) are about one connection: never forwarded in either direction.
HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection", "te",
              "trailer", "transfer-encoding", "upgrade"}

# Faults that cut a body: the status line and headers come from the upstream, the body stops halfway.
BODY_CUTS = {"truncate", "reset", "stall"}
KNOWN_MODES = BODY_CUTS | {"ok", "wrongbytes", "wrongsize", "slow", "flipbyte"}

# The error code of docs/protocol.md for an injected status (the JSON body of a status<NNN> fault).
ERROR_CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found", 410: "expired",
               416: "range_not_satisfiable", 500: "internal"}


def route_of(path):
    """The protocol route of a URL path, as in the origin's /v1/metrics."""
    if path == "/v1/instance":
        return "instance"
    if path.startswith("/v1/datasets/") and path.endswith("/manifest"):
        return "manifest"
    if path == "/v1/stream-tickets":
        return "ticket"
    if path.startswith("/v1/shards/"):
        return "shard"
    if path == "/v1/metrics":
        return "metrics"
    return "other"


class Mode:
    """One parsed mode line: `name` and its options."""

    def __init__(self, line):
        self.line = line.strip()
        words = self.line.split()
        self.name = words[0] if words else "ok"
        self.options = {}
        for word in words[1:]:
            key, sep, value = word.partition("=")
            if not sep:
                raise ValueError("mode option %r is not key=value" % word)
            self.options[key] = value
        if self.name not in KNOWN_MODES and not (self.name.startswith("status") and self.name[6:].isdigit()):
            raise ValueError("unknown fault mode %r" % self.name)
        self.count = int(self.options["count"]) if "count" in self.options else None  # None: every request
        self.seconds = float(self.options.get("seconds", "5"))
        self.linger_ms = int(self.options.get("linger_ms", "200"))
        self.rate = int(self.options.get("rate", "65536"))
        self.offset = int(self.options.get("offset", "0"))
        self.ticket = self.options.get("ticket")
        if self.ticket is not None and not (self.ticket == "strip" or re.fullmatch(r"(lie|unbound|drop):\d+", self.ticket)):
            raise ValueError("ticket=%r: expected strip, lie:K, unbound:K or drop:K" % self.ticket)

    def status(self):
        """The injected status of a status<NNN> mode, else None."""
        return int(self.name[6:]) if self.name.startswith("status") else None


class FaultState:
    """The mode in force and the counters, shared by the handler threads (one lock for both)."""

    def __init__(self, mode_file):
        self.mode_file = mode_file
        self.lock = threading.Lock()
        self.mode = Mode("ok")
        self.mode_key = None  # (inode, mtime_ns, size, text) of the mode file the mode came from
        self.armed = 0        # shard requests seen since the mode (re)armed
        self.started = time.monotonic()  # the "at" of log records counts from here
        self.reset_stats()

    def reset_stats(self):
        with self.lock:
            self.total = 0
            self.routes = {}
            self.shard = {"requests": 0, "range_requests": 0, "ranges": [], "statuses": [], "faults": 0, "paths": {}}
            self.log = []
            self.armed = 0

    def _reload_mode(self):
        """Re-reads the mode file (called with the lock held); a change re-arms the mode."""
        try:
            st = os.stat(self.mode_file)
            with open(self.mode_file) as f:
                text = f.read()
            key = (st.st_ino, st.st_mtime_ns, st.st_size, text)
        except FileNotFoundError:
            text, key = "", None
        if key == self.mode_key:
            return
        self.mode_key = key
        line = text.strip().splitlines()[0] if text.strip() else "ok"
        try:
            self.mode = Mode(line)
        except ValueError as e:
            # A typo in a test must not pass silently as "ok": every shard request then fails loudly.
            sys.stderr.write("fault-proxy: bad mode file %s: %s\n" % (self.mode_file, e))
            self.mode = Mode("status500")
        self.armed = 0

    def begin(self, method, path, range_header, has_authorization):
        """Counts a request; for a shard GET, decides its fault. Returns (log record, fault Mode or None)."""
        route = route_of(path)
        with self.lock:
            self.total += 1
            self.routes.setdefault(route, {"requests": 0, "statuses": []})["requests"] += 1
            record = {"method": method, "route": route, "path": path, "range": range_header, "status": None,
                      "fault": None, "body_bytes": 0, "content_length": None, "done": False,
                      "at": round(time.monotonic() - self.started, 3), "authorization": has_authorization}
            self.log.append(record)
            fault = None
            if route == "shard" and method == "GET":
                self.shard["requests"] += 1
                entry = self.shard["paths"].setdefault(path, {"requests": 0, "range_requests": 0, "statuses": []})
                entry["requests"] += 1
                if range_header is not None:
                    self.shard["range_requests"] += 1
                    self.shard["ranges"].append(range_header)
                    entry["range_requests"] += 1
                self._reload_mode()
                mode = self.mode
                self.armed += 1
                if mode.name != "ok" and (mode.count is None or self.armed <= mode.count):
                    fault = mode
                    record["fault"] = mode.name
                    self.shard["faults"] += 1
            return record, fault

    def ticket_rewrite(self):
        """The ticket= option of the mode in force (re-read from the mode file), or None."""
        with self.lock:
            self._reload_mode()
            return self.mode.ticket

    def responded(self, record, status, content_length):
        """Records the status line and Content-Length sent to the client (before its body: a stalled request shows)."""
        with self.lock:
            record["status"] = status
            record["content_length"] = content_length
            self.routes[record["route"]]["statuses"].append(status)
            if record["route"] == "shard" and record["method"] == "GET":
                self.shard["statuses"].append(status)
                self.shard["paths"][record["path"]]["statuses"].append(status)

    def sent(self, record, body_bytes, done):
        """Records the body bytes sent so far; `done` once the proxy is through with the request."""
        with self.lock:
            record["body_bytes"] = body_bytes
            record["done"] = done

    def to_json(self):
        with self.lock:
            self._reload_mode()
            return json.dumps({"total": self.total, "mode": self.mode.line or "ok", "routes": self.routes,
                               "shard": self.shard, "log": self.log}).encode()


def entity_start(response):
    """The entity offset of the first body byte: the start of a 206's Content-Range, else 0."""
    match = re.match(r"bytes (\d+)-", response.getheader("Content-Range") or "")
    return int(match.group(1)) if response.status == 206 and match else 0


def rewrite_ticket(ticket, rewrite):
    """A ticket with its chunk fields rewritten as the mode's ticket= option says (see the top of this file)."""
    if rewrite == "strip":
        for field in ("chunk_size", "chunks", "chunks_sha256"):
            ticket.pop(field, None)
        return ticket
    how, index = rewrite.split(":")
    chunks = ticket["chunks"]
    if how == "drop":
        del chunks[int(index)]
    else:
        chunks[int(index)] = hashlib.sha256(b"not chunk " + index.encode()).hexdigest()
    if how in ("lie", "drop"):
        ticket["chunks_sha256"] = hashlib.sha256("".join(c + "\n" for c in chunks).encode()).hexdigest()
    return ticket


class ClientGone(Exception):
    """The downstream client closed its connection (e.g. it gave up on a stall)."""


class Handler(BaseHTTPRequestHandler):
    # HTTP/1.1: keep-alive towards the client, as with the real server; a fault that cuts a body closes it.
    protocol_version = "HTTP/1.1"
    server_version = "DatavoFaultProxy/1"

    def log_message(self, fmt, *args):
        if self.server.options.verbose:
            sys.stderr.write("fault-proxy: " + (fmt % args) + "\n")

    # --- verbs: everything goes through forward() --------------------------------------------------------------

    def do_GET(self):
        self.forward()

    def do_HEAD(self):
        self.forward()

    def do_POST(self):
        self.forward()

    def do_PUT(self):
        self.forward()

    def do_DELETE(self):
        self.forward()

    # --- plumbing -----------------------------------------------------------------------------------------------

    def read_request_body(self):
        """The request body: Content-Length or chunked (curl uses Content-Length for the ticket POST)."""
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline().strip():  # trailers up to the empty line
                        pass
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()  # the CRLF after each chunk
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def send_json(self, status, document, record=None):
        """Answers `document` as JSON; records the status in `record` (a counted request) when given."""
        body = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if record is not None:
            self.server.state.responded(record, status, len(body))
        if self.command != "HEAD":
            self.write(body)
        return len(body)

    def write(self, data):
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError) as e:
            raise ClientGone() from e

    def abort_with_rst(self):
        """Closes the connection with a TCP RST instead of a FIN (SO_LINGER with a zero timeout)."""
        self.close_connection = True
        sock = self.connection
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        # detach() + os.close() closes the descriptor now: socket.close() would wait for rfile/wfile, and
        # socketserver's shutdown(SHUT_WR) afterwards would send a FIN first.
        os.close(sock.detach())

    # --- the proxy ----------------------------------------------------------------------------------------------

    def forward(self):
        parsed = urllib.parse.urlsplit(self.path)
        path = urllib.parse.unquote(parsed.path)
        state = self.server.state

        if path == "/_proxy_stats" and self.command == "GET":
            body = state.to_json()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Cache-Control", "no-store")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        if path == "/_proxy_reset" and self.command == "POST":
            self.read_request_body()
            state.reset_stats()
            self.send_json(200, {"reset": True})
            return

        range_header = self.headers.get("Range")
        record, fault = state.begin(self.command, path, range_header, "Authorization" in self.headers)
        sent = 0
        try:
            sent = self.forward_counted(record, fault)
        except ClientGone:
            self.close_connection = True
        finally:
            state.sent(record, sent, done=True)

    def forward_counted(self, record, fault):
        """Answers one request, with `fault` (a Mode or None). Returns the body bytes sent."""
        body = self.read_request_body()

        # A status fault answers in place of the upstream, which never sees the request.
        if fault is not None and fault.status() is not None:
            status = fault.status()
            code = ERROR_CODES.get(status, "internal" if status >= 500 else "bad_request")
            return self.send_json(status, {"error": {"code": code, "message": "fault proxy: injected HTTP %d" % status}},
                                  record)

        # Forward: same method, path and query, body and end-to-end headers (Authorization, Range, If-Range,
        # If-None-Match, Content-Type, ...). Host names the upstream.
        options = self.server.options
        headers = {}
        for name, value in self.headers.items():
            if name.lower() in HOP_BY_HOP or name.lower() in ("host", "content-length"):
                continue
            headers[name] = value
        if body or self.command in ("POST", "PUT"):
            headers["Content-Length"] = str(len(body))
        upstream = http.client.HTTPConnection(options.upstream_host, options.upstream_port, timeout=60)
        try:
            try:
                upstream.request(self.command, self.path, body=body if body else None, headers=headers)
                response = upstream.getresponse()
            except (OSError, http.client.HTTPException) as e:
                return self.send_json(502, {"error": {"code": "internal", "message": "fault proxy: upstream: %s" % e}},
                                      record)
            rewrite = self.server.state.ticket_rewrite() if record["route"] == "ticket" and response.status == 200 else None
            if rewrite is not None:
                return self.send_json(200, rewrite_ticket(json.loads(response.read()), rewrite), record)
            return self.relay(record, response, fault)
        finally:
            upstream.close()

    def relay(self, record, response, fault):
        """Streams the upstream `response` to the client, applying a body fault. Returns the body bytes sent."""
        state = self.server.state
        status = response.status
        has_body = self.command != "HEAD" and status not in (204, 304) and not 100 <= status < 200
        length_header = response.getheader("Content-Length")
        if has_body and length_header is None:
            # No Content-Length upstream (chunked): buffer it, so that the client gets one and "half" is defined.
            data = response.read()
            length = len(data)
            chunks = iter([data])
        else:
            length = int(length_header) if length_header is not None else 0
            chunks = iter(lambda: response.read(CHUNK), b"")

        upstream_length = length
        if has_body and fault is not None and fault.name == "wrongsize" and length > 0:
            length -= 1  # a consistent answer, just not the ticket's bytes

        self.send_response(status)
        for name, value in response.getheaders():
            if name.lower() in HOP_BY_HOP or name.lower() == "content-length":
                continue
            self.send_header(name, value)
        if has_body or length_header is not None:
            self.send_header("Content-Length", str(length))
        self.end_headers()
        state.responded(record, status, length if (has_body or length_header is not None) else None)
        if not has_body:
            self.wfile.flush()
            return 0

        cut_at = length // 2 if fault is not None and fault.name in BODY_CUTS else None
        if length < upstream_length:
            cut_at = length  # wrongsize: stop one byte early, then carry on as if all was well
        sent = 0
        if fault is not None and fault.name == "slow":
            # Small slices at a steady pace, so that a client interrupted mid-download sees a steady trickle.
            step = max(1, fault.rate // 10)
            started = time.monotonic()
            for chunk in chunks:
                for i in range(0, len(chunk), step):
                    piece = chunk[i:i + step]
                    self.write(piece)
                    sent += len(piece)
                    ahead = sent / fault.rate - (time.monotonic() - started)
                    if ahead > 0:
                        time.sleep(ahead)
            return sent
        first = entity_start(response)
        # flipbyte with rate=B: the flipped body at a slow pace too (a reader that follows a download as it arrives).
        paced = fault is not None and fault.name == "flipbyte" and "rate" in fault.options
        started = time.monotonic()
        for chunk in chunks:
            if cut_at is not None and sent + len(chunk) > cut_at:
                chunk = chunk[:cut_at - sent]
            if fault is not None and fault.name == "wrongbytes":
                chunk = bytes(b ^ 0xFF for b in chunk)  # same length, every byte wrong
            if fault is not None and fault.name == "flipbyte" and 0 <= fault.offset - first - sent < len(chunk):
                at = fault.offset - first - sent
                chunk = chunk[:at] + bytes([chunk[at] ^ 0x01]) + chunk[at + 1:]
            if chunk and paced:
                step = max(1, fault.rate // 10)
                for i in range(0, len(chunk), step):
                    self.write(chunk[i:i + step])
                    sent += len(chunk[i:i + step])
                    ahead = sent / fault.rate - (time.monotonic() - started)
                    if ahead > 0:
                        time.sleep(ahead)
            elif chunk:
                self.write(chunk)
                sent += len(chunk)
            if cut_at is not None and sent >= cut_at:
                break
        if cut_at is None or fault.name == "wrongsize":
            return sent  # the whole (declared) body went out: the connection stays usable

        # The body is cut at half: end the connection the way the fault says. The bytes sent are recorded first,
        # so that /_proxy_stats shows them while a stall is still going on.
        self.wfile.flush()
        state.sent(record, sent, done=False)
        if fault.name == "stall":
            # Silent but open: only the client's stall timer can notice. Then a plain close.
            time.sleep(fault.seconds)
            self.close_connection = True
        elif fault.name == "reset":
            time.sleep(fault.linger_ms / 1000.0)  # let the client read the half first
            self.abort_with_rst()
        else:  # truncate: a clean FIN after a body shorter than its Content-Length
            self.close_connection = True
        return sent


class Server(ThreadingHTTPServer):
    daemon_threads = True
    # Do not join handler threads on close: a stalled handler may sleep for a long time, and SIGTERM must be quick.
    block_on_close = False
    allow_reuse_address = True


def write_port_file(path, port):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        f.write("%d\n" % port)
    os.replace(tmp, path)  # readers see either no file or the whole number


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--upstream", required=True, help="base URL of the origin, http://HOST:PORT")
    parser.add_argument("--mode-file", required=True, help="the fault mode, one line, re-read on every shard request")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (see --port-file)")
    parser.add_argument("--port-file", help="written atomically with the port once listening")
    parser.add_argument("--verbose", action="store_true", help="log every request to stderr")
    options = parser.parse_args(argv)
    upstream = urllib.parse.urlsplit(options.upstream)
    if upstream.scheme != "http" or not upstream.hostname or upstream.path not in ("", "/"):
        parser.error("--upstream must be http://HOST:PORT, got %r" % options.upstream)
    options.upstream_host = upstream.hostname
    options.upstream_port = upstream.port or 80

    server = Server((options.host, options.port), Handler)
    server.options = options
    server.state = FaultState(options.mode_file)

    def stop(signum, frame):
        # Raised in the main thread, inside serve_forever(): unwinds it without the deadlock of calling
        # server.shutdown() from the thread that runs the loop.
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    port = server.server_address[1]
    if options.port_file:
        write_port_file(options.port_file, port)
    if options.verbose:
        sys.stderr.write("fault-proxy: %s:%d -> %s\n" % (options.host, port, options.upstream))
    try:
        server.serve_forever(poll_interval=0.1)
    except SystemExit:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
