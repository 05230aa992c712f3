#!/usr/bin/env python3
"""A loopback HTTP file server with fault injection, for Datavo's unit and end-to-end tests.

Python 3 standard library only. It serves the files under --root and can misbehave on request, so that tests can
drive the HTTP transport (src/net/http_client.cpp) through every failure it claims to handle.

Starting it
-----------
    python3 tests/support/http_fault_server.py --root DIR --port-file FILE [--port 0] [--host 127.0.0.1]
        [--delay-ms N] [--rate-limit BYTES_PER_S] [--no-ranges] [--verbose]

It binds 127.0.0.1 on an ephemeral port (port 0) by default and, once it is listening, writes the port number to
--port-file atomically (write + rename), so a test waits for that file to appear instead of racing for a port.
SIGTERM (or SIGINT) stops it cleanly with exit status 0. tests/support/test_server.hpp starts and stops it from C++;
from bash:

    python3 "$DATAVO_SOURCE_DIR/tests/support/http_fault_server.py" --root "$dir" --port-file "$tmp/port" &
    pid=$!; while [ ! -s "$tmp/port" ]; do sleep 0.05; done; port=$(cat "$tmp/port")
    ...; kill -TERM "$pid"; wait "$pid"

URLs
----
    GET|HEAD /<name>                     the file <root>/<name> (same as /faults/ok/<name>)
    GET|HEAD /faults/<modes>/<name>      the file, with the faults in <modes> ('+'-separated, e.g. truncate+badrange)
    GET      /_stats                     request counters as JSON (see below); not counted itself
    POST     /_reset                     zeroes the counters
    any      /_echo                      answers 200 with the request body; X-Echo-Method, X-Echo-Authorization and
                                         X-Echo-Content-Type carry the request's method and headers
    any      /faults/<modes>/_echo       the same after the status faults of <modes> (e.g. a POST answered 500)

Fault modes (a "transient" fault hits only the first `count` requests of that path, so a retry succeeds):
    ok            serve normally
    truncate      transient: send the full Content-Length but close the connection after half of the body
    reset         transient: send half of the body, then abort the connection with a TCP RST
    stall         transient: send half of the body, then go silent for `stall_s` seconds (past the client's stall
                  timeout), then close
    status<NNN>   transient: answer HTTP NNN (e.g. status500, status503) with a short text body; status429 (and any
                  status given `retry_after`) carries "Retry-After: <retry_after>" (default 1 for 429)
    404, 403      permanent: answer that status on every request
    wrongbytes    serve the right length, but every byte inverted (the client must report the server's size and
                  let the SHA-256 check catch it)
    wrongsize     serve the file plus one extra byte, with a Content-Length that matches what is sent
    badrange      answer a Range request with 206 and the whole file as "bytes 0-<size-1>/<size>", whatever start
                  was asked (the client must check the Content-Range start)
    noranges      same as the query option ranges=0

Query options (all optional):
    count=K         how many requests of this path a transient fault hits (default 1)
    ranges=0        no Range support for this request: no "Accept-Ranges: bytes", Range is ignored (200, full body)
    retry_after=S   the Retry-After value (seconds, or an HTTP-date string) for status faults
    stall_s=S       how long a stall lasts (default 5)
    delay_ms=N      wait N ms before answering (overrides --delay-ms)
    rate=B          send the body at B bytes/s (overrides --rate-limit)
    require_auth=V  answer 401 unless the Authorization header is exactly V (e.g. require_auth=Bearer%20tok)

Normal behaviour worth knowing:
    - Range: "bytes=a-b", "bytes=a-" and "bytes=-n" get 206 with Content-Range; an unsatisfiable range gets 416 with
      "Content-Range: bytes */<size>"; several ranges get the whole file (200), as RFC 9110 allows.
    - If-Range with a validator other than the current ETag gets the whole file (200).
    - Every file response carries a strong ETag ("<size>-<mtime_ns>") and Last-Modified; If-None-Match with the
      current ETag gets 304.
    - --delay-ms delays every file response (before the status line), so the first GET of a file "takes a while"
      and concurrent clients pile up behind it (stampede tests). --rate-limit slows every body (kill tests).
    - Connections are HTTP/1.1 keep-alive; a fault that cuts a body closes its connection.

/_stats JSON:
    {"total": <requests counted>,
     "paths": {"/faults/truncate/a.bin": {"requests": 2, "range_requests": 1, "head_requests": 0,
                                           "statuses": [200, 206]}, ...},
     "log": [{"method": "GET", "path": "...", "query": "...", "range": "bytes=5-" or null, "status": 206}, ...]}
Counters are keyed by the URL path without its query string. Requests to /_stats, /_reset and /_echo are not counted
in "total"; /_echo is still listed under "paths".
"""

import argparse
import email.utils
import json
import os
import signal
import socket
import struct
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CHUNK = 64 * 1024
TRANSIENT_FAULTS = {"truncate", "reset", "stall"}


class Stats:
    """Request counters shared by the handler threads."""

    def __init__(self):
        self.lock = threading.Lock()
        self.reset()

    def reset(self):
        with self.lock:
            self.total = 0
            self.paths = {}
            self.log = []

    def count(self, method, path, query, range_header, counted_in_total=True):
        """Records a request; returns its 1-based ordinal for this path and its log entry (status filled later)."""
        with self.lock:
            if counted_in_total:
                self.total += 1
            entry = self.paths.setdefault(
                path, {"requests": 0, "range_requests": 0, "head_requests": 0, "statuses": []})
            entry["requests"] += 1
            if range_header is not None:
                entry["range_requests"] += 1
            if method == "HEAD":
                entry["head_requests"] += 1
            record = {"method": method, "path": path, "query": query, "range": range_header, "status": None}
            self.log.append(record)
            return entry["requests"], record

    def set_status(self, path, record, status):
        with self.lock:
            record["status"] = status
            self.paths[path]["statuses"].append(status)

    def to_json(self):
        with self.lock:
            return json.dumps({"total": self.total, "paths": self.paths, "log": self.log}).encode()


def parse_range(header, size):
    """Returns (start, end_inclusive) for a single satisfiable byte range, "unsatisfiable", or None to ignore it."""
    if not header or not header.startswith("bytes="):
        return None
    spec = header[len("bytes="):].strip()
    if "," in spec:
        return None  # several ranges: serving the whole entity is allowed and keeps this server simple
    first, sep, last = spec.partition("-")
    if not sep:
        return None
    try:
        if first == "":
            suffix = int(last)
            if suffix <= 0:
                return "unsatisfiable"
            return (max(0, size - suffix), size - 1)
        start = int(first)
        end = int(last) if last else size - 1
    except ValueError:
        return None
    if start >= size or end < start:
        return "unsatisfiable"
    return (start, min(end, size - 1))


class Handler(BaseHTTPRequestHandler):
    # HTTP/1.1 so that Content-Length and keep-alive behave as they do against real object stores.
    protocol_version = "HTTP/1.1"
    server_version = "DatavoFaultServer/1"

    # --- plumbing -----------------------------------------------------------------------------------------------

    def log_message(self, fmt, *args):
        if self.server.options.verbose:
            sys.stderr.write("fault-server: " + (fmt % args) + "\n")

    def parse_url(self):
        parsed = urllib.parse.urlsplit(self.path)
        self.url_path = urllib.parse.unquote(parsed.path)
        self.url_query = parsed.query
        self.query = {k: v[-1] for k, v in urllib.parse.parse_qs(parsed.query).items()}

    def send_simple(self, status, body=b"", headers=None, head=False):
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head and body:
            self.wfile.write(body)

    def read_request_body(self):
        length = int(self.headers.get("Content-Length") or 0)
        data = b""
        while len(data) < length:
            chunk = self.rfile.read(min(CHUNK, length - len(data)))
            if not chunk:
                break
            data += chunk
        return data

    def send_body(self, data, rate):
        """Writes `data`, at `rate` bytes/s when rate > 0. Returns False when the client went away."""
        try:
            if rate <= 0:
                self.wfile.write(data)
                return True
            # Small slices keep the rate smooth, so a client killed mid-download sees a steady trickle.
            step = max(1, min(CHUNK, rate // 10))
            started = time.monotonic()
            sent = 0
            while sent < len(data):
                piece = data[sent:sent + step]
                self.wfile.write(piece)
                sent += len(piece)
                ahead = sent / rate - (time.monotonic() - started)
                if ahead > 0:
                    time.sleep(ahead)
            return True
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
            return False

    def abort_with_rst(self):
        """Closes the connection with a TCP RST instead of a FIN (SO_LINGER with a zero timeout)."""
        self.close_connection = True
        sock = self.connection
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        # detach() + os.close() closes the descriptor now; socket.close() would wait for rfile/wfile to be closed,
        # and socketserver's shutdown(SHUT_WR) would send a FIN first.
        os.close(sock.detach())

    # --- verbs --------------------------------------------------------------------------------------------------

    def do_GET(self):
        self.parse_url()
        if self.url_path == "/_stats":
            self.send_simple(200, self.server.stats.to_json(), {"Cache-Control": "no-store"})
            return
        if self.url_path.endswith("/_echo"):
            self.echo()
            return
        self.serve_file(head=False)

    def do_HEAD(self):
        self.parse_url()
        self.serve_file(head=True)

    def do_POST(self):
        self.parse_url()
        if self.url_path == "/_reset":
            self.read_request_body()
            self.server.stats.reset()
            self.send_simple(200, b"reset\n")
            return
        self.echo()

    def do_PUT(self):
        self.parse_url()
        self.echo()

    def do_DELETE(self):
        self.parse_url()
        self.echo()

    def echo(self):
        """/_echo and /faults/<modes>/_echo: answers with the request body, after any status fault of <modes>."""
        body = self.read_request_body()
        if not self.url_path.endswith("/_echo"):
            self.send_simple(405, b"method not allowed\n")
            return
        modes, _ = self.resolve()
        ordinal, record = self.server.stats.count(self.command, self.url_path, self.url_query, None, False)
        status = self.send_status_fault(modes, ordinal, head=False)
        if status is None:
            status = 200
            self.send_simple(200, body, {
                "X-Echo-Method": self.command,
                "X-Echo-Authorization": self.headers.get("Authorization", ""),
                "X-Echo-Content-Type": self.headers.get("Content-Type", ""),
            })
        self.server.stats.set_status(self.url_path, record, status)

    # --- files and faults ---------------------------------------------------------------------------------------

    def resolve(self):
        """Splits the URL path into (modes, file path on disk or None)."""
        path = self.url_path
        modes = {"ok"}
        if path.startswith("/faults/"):
            mode_part, _, rest = path[len("/faults/"):].partition("/")
            modes = set(mode_part.split("+"))
            path = "/" + rest
        root = self.server.options.root
        candidate = os.path.realpath(os.path.join(root, path.lstrip("/")))
        if candidate != root and not candidate.startswith(root + os.sep):
            return modes, None  # no escaping the root with ".."
        return modes, candidate

    def send_status_fault(self, modes, ordinal, head):
        """Answers a 404/403/status<NNN> fault of `modes` if one applies to this request; returns its status."""
        faulty = ordinal <= int(self.query.get("count", "1"))
        for mode in sorted(modes):
            if mode in ("404", "403"):
                self.send_simple(int(mode), ("fault: %s\n" % mode).encode(), head=head)
                return int(mode)
            if mode.startswith("status") and faulty:
                status = int(mode[len("status"):])
                headers = {}
                retry_after = self.query.get("retry_after", "1" if status == 429 else None)
                if retry_after is not None:
                    headers["Retry-After"] = retry_after
                self.send_simple(status, ("fault: %s\n" % mode).encode(), headers, head=head)
                return status
        return None

    def serve_file(self, head):
        range_header = self.headers.get("Range")
        ordinal, record = self.server.stats.count(self.command, self.url_path, self.url_query, range_header)
        status = self.serve_file_counted(head, ordinal, range_header)
        self.server.stats.set_status(self.url_path, record, status)

    def serve_file_counted(self, head, ordinal, range_header):
        """Answers one file request; returns the status sent (for the stats)."""
        options = self.server.options
        modes, file_path = self.resolve()
        count = int(self.query.get("count", "1"))
        faulty = ordinal <= count  # transient faults hit only the first `count` requests of this path

        delay_ms = int(self.query.get("delay_ms", options.delay_ms))
        if delay_ms > 0:
            time.sleep(delay_ms / 1000.0)

        required = self.query.get("require_auth")
        if required is not None and self.headers.get("Authorization") != required:
            self.send_simple(401, b"unauthorized\n", {"WWW-Authenticate": "Bearer"}, head=head)
            return 401
        status = self.send_status_fault(modes, ordinal, head)
        if status is not None:
            return status

        if file_path is None or not os.path.isfile(file_path):
            self.send_simple(404, b"no such file\n", head=head)
            return 404
        with open(file_path, "rb") as f:
            data = f.read()
        st = os.stat(file_path)
        etag = '"%d-%d"' % (st.st_size, st.st_mtime_ns)
        size = len(data)
        if "wrongbytes" in modes:
            data = bytes(b ^ 0xFF for b in data)
        if "wrongsize" in modes:
            data = data + b"!"
            size = len(data)

        ranges_ok = not options.no_ranges and self.query.get("ranges", "1") != "0" and "noranges" not in modes
        headers = {
            "ETag": etag,
            "Last-Modified": email.utils.formatdate(st.st_mtime, usegmt=True),
            "Content-Type": "application/octet-stream",
        }
        if ranges_ok:
            headers["Accept-Ranges"] = "bytes"

        if_none_match = self.headers.get("If-None-Match")
        if if_none_match is not None and etag in [t.strip() for t in if_none_match.split(",")]:
            self.send_response(304)
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            return 304

        status = 200
        start, end = 0, size - 1
        if ranges_ok and range_header is not None:
            if_range = self.headers.get("If-Range")
            wanted = parse_range(range_header, size) if if_range is None or if_range == etag else None
            if wanted == "unsatisfiable":
                self.send_simple(416, b"range not satisfiable\n", {"Content-Range": "bytes */%d" % size}, head=head)
                return 416
            if wanted is not None:
                status = 206
                start, end = wanted
                if "badrange" in modes:
                    start, end = 0, size - 1  # claims (and sends) the whole file, whatever was asked
                headers["Content-Range"] = "bytes %d-%d/%d" % (start, end, size)
        body = data[start:end + 1]

        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if head:
            return status

        rate = int(self.query.get("rate", options.rate_limit))
        cut = faulty and bool(modes & TRANSIENT_FAULTS)
        if not cut:
            self.send_body(body, rate)
            return status

        half = len(body) // 2
        if not self.send_body(body[:half], rate):
            return status
        if "stall" in modes:
            # Go silent without closing: only the client's low-speed timer can notice.
            self.wfile.flush()
            time.sleep(float(self.query.get("stall_s", "5")))
            self.close_connection = True
        elif "reset" in modes:
            self.abort_with_rst()
        else:  # truncate: a clean FIN after a short body
            self.close_connection = True
        return status


class Server(ThreadingHTTPServer):
    daemon_threads = True
    # Do not join handler threads on close: a stalled handler may be asleep for seconds, and SIGTERM must be quick.
    block_on_close = False
    allow_reuse_address = True


def write_port_file(path, port):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        f.write("%d\n" % port)
    os.replace(tmp, path)  # readers see either no file or the whole number


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", required=True, help="directory whose files are served")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (see --port-file)")
    parser.add_argument("--port-file", help="written atomically with the port once listening")
    parser.add_argument("--delay-ms", type=int, default=0, help="delay before every file response")
    parser.add_argument("--rate-limit", type=int, default=0, help="body bytes per second (0: unlimited)")
    parser.add_argument("--no-ranges", action="store_true", help="no Range support for any request")
    parser.add_argument("--verbose", action="store_true", help="log every request to stderr")
    options = parser.parse_args(argv)
    options.root = os.path.realpath(options.root)
    if not os.path.isdir(options.root):
        parser.error("--root %s is not a directory" % options.root)

    server = Server((options.host, options.port), Handler)
    server.options = options
    server.stats = Stats()

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
        sys.stderr.write("fault-server: serving %s on %s:%d\n" % (options.root, options.host, port))
    try:
        server.serve_forever(poll_interval=0.1)
    except SystemExit:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
