#!/usr/bin/env python3
"""A loopback stand-in for the two AWS credential endpoints a VM or container asks: the ECS container
credentials endpoint and EC2's instance metadata service (IMDSv2). It hands out temporary credentials that
expire within seconds, each time with a new access key id, so that a test can see refreshes happen during one
transfer (the access key ids the S3 server saw change) without the transfer starting over.

Python 3 standard library only.

    python3 tests/support/aws_metadata_server.py --port-file FILE [--lifetime SECONDS] [--ecs-token TOKEN]
        [--role NAME] [--secret SECRET]

Endpoints:
    GET  /ecs/credentials                   ECS (AWS_CONTAINER_CREDENTIALS_FULL_URI=http://127.0.0.1:P/ecs/credentials);
                                            with --ecs-token, the Authorization header must carry it (else 401)
    PUT  /latest/api/token                  IMDSv2 session token (needs X-aws-ec2-metadata-token-ttl-seconds)
    GET  /latest/meta-data/iam/security-credentials/        the role name   } both need the session token in
    GET  /latest/meta-data/iam/security-credentials/<role>  the credentials } X-aws-ec2-metadata-token (else 401)
    GET  /_stats                            {"ecs": N, "imds": N, "tokens": N, "refused": N, "keys": [...]}
Every credential answer: AccessKeyId ASIA<ECS|IMDS><n>, SecretAccessKey (--secret, default "test-secret"), Token,
Expiration = now + lifetime (ISO 8601, UTC). IMDSv1 (no session token) is refused, as on a hardened instance.
"""

import argparse
import datetime
import json
import os
import secrets
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class State:
    def __init__(self, options):
        self.options = options
        self.lock = threading.Lock()
        self.counts = {"ecs": 0, "imds": 0, "tokens": 0, "refused": 0}
        self.keys = []
        self.session_tokens = set()

    def issue(self, source):
        with self.lock:
            self.counts[source] += 1
            key = "ASIA%s%06d" % (source.upper(), self.counts[source])
            self.keys.append(key)
        expires = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=self.options.lifetime)
        return {"AccessKeyId": key, "SecretAccessKey": self.options.secret,
                "Token": "session-" + secrets.token_hex(8), "Expiration": expires.strftime("%Y-%m-%dT%H:%M:%SZ")}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def reply(self, status, body, content_type="application/json"):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def refuse(self):
        with self.server.state.lock:
            self.server.state.counts["refused"] += 1
        self.reply(401, '{"message": "unauthorized"}')

    def do_PUT(self):
        state = self.server.state
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        if self.path == "/latest/api/token" and self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
            token = secrets.token_hex(16)
            with state.lock:
                state.counts["tokens"] += 1
                state.session_tokens.add(token)
            self.reply(200, token, "text/plain")
            return
        self.reply(400, "bad request", "text/plain")

    def do_GET(self):
        state = self.server.state
        options = state.options
        if self.path == "/_stats":
            with state.lock:
                self.reply(200, json.dumps(dict(state.counts, keys=state.keys)))
            return
        if self.path == "/ecs/credentials":
            if options.ecs_token and self.headers.get("Authorization") != options.ecs_token:
                self.refuse()
                return
            self.reply(200, json.dumps(state.issue("ecs")))
            return
        prefix = "/latest/meta-data/iam/security-credentials/"
        if self.path.startswith(prefix):
            with state.lock:
                valid = self.headers.get("X-aws-ec2-metadata-token") in state.session_tokens
            if not valid:
                self.refuse()
                return
            role = self.path[len(prefix):]
            if role == "":
                self.reply(200, options.role, "text/plain")
            elif role == options.role:
                answer = dict(state.issue("imds"), Code="Success", Type="AWS-HMAC",
                              LastUpdated=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
                self.reply(200, json.dumps(answer))
            else:
                self.reply(404, "not found", "text/plain")
            return
        self.reply(404, "not found", "text/plain")


class Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port-file", required=True)
    parser.add_argument("--lifetime", type=float, default=4.0, help="seconds each credential lives")
    parser.add_argument("--ecs-token", help="the Authorization value the ECS endpoint requires")
    parser.add_argument("--role", default="datavo-test-role")
    parser.add_argument("--secret", default="test-secret")
    options = parser.parse_args(argv)
    server = Server(("127.0.0.1", 0), Handler)
    server.state = State(options)

    def stop(signum, frame):
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    tmp = "%s.tmp.%d" % (options.port_file, os.getpid())
    with open(tmp, "w") as f:
        f.write("%d\n" % server.server_address[1])
    os.replace(tmp, options.port_file)
    try:
        server.serve_forever(poll_interval=0.1)
    except SystemExit:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
