#!/usr/bin/env python3
"""A loopback HTTP proxy in front of a cloud storage server (moto, s3rver, Azurite, the firebase-tools Storage
emulator) that counts its operations and injects faults.

Python 3 standard library only. It forwards every request to the upstream unchanged -- method, path, query, body
and every end-to-end header, Host included, so that a SigV4 signature made for the proxy's address still verifies
at a server that checks signatures (s3rver) -- and streams the answer back. The cloud-tier tests put it between
the real client (`datavo`, the conformance binary, boto3) and the server, to count what the client sends
(tests/e2e/test_s3_region.sh: each shard uploaded exactly once) and to make the server misbehave
(tests/e2e/test_s3_faults.sh, tests/conformance/).

Starting it
-----------
    python3 tests/support/cloud_proxy.py --upstream http://127.0.0.1:PORT --port-file FILE
        [--flavour s3|azure|gcs] [--mode-file FILE] [--host 127.0.0.1] [--port 0] [--verbose]

It listens on 127.0.0.1, on an ephemeral port by default, and writes the port to --port-file atomically once it
listens. SIGTERM (or SIGINT) stops it at once with exit status 0, even while a handler sleeps in a stall.

Conditional creates
-------------------
A PUT or POST with "If-None-Match: *" (PutObject, CompleteMultipartUpload) is forwarded one at a time per object:
moto 5.2 checks that the key is absent and then stores it in two steps on a threaded server, so that two creates
arriving together can both succeed, where AWS S3 makes the create atomic (one wins, the other gets 412). The proxy
restores S3's semantics, so that the tests of single flight are not at the mercy of that race.

Flavours
--------
Whatever the upstream, the proxy finds its service by itself (a path under /storage/v1/b/, /upload/... or
/download/... is GCS; a request with an x-ms-* header is Azure Blob; the rest is S3) and names each operation as
below. --flavour azure|gcs (default s3) names Azure and GCS operations with their S3 names instead (GetBlob and
GetMedia GetObject, PutBlock and UploadChunk UploadPart, PutBlockList CompleteMultipartUpload, UploadResumable
CreateMultipartUpload, ...: S3_NAME_OF), in the counters, the log and op= alike, so that one set of tests reads the
counters of every server (tests/conformance/).

What it counts
--------------
Every forwarded request is classified as one operation of its service. Azure Blob (a request with an x-ms-*
header; path /<account>/<container>/<blob>): GetBlob, GetBlobProperties (HEAD), PutBlob, PutBlock (comp=block),
PutBlockList (comp=blocklist), DeleteBlob, ListBlobs, CreateContainer, GetContainerProperties, DeleteContainer,
ListContainers, Other. GCS JSON API (a path under /storage/v1/b/, /upload/storage/v1/b/ or /download/storage/v1/b/):
GetMedia (alt=media, or /download/), GetResource (the object resource), ListObjects, DeleteObject, PatchObject,
UploadMultipart, UploadMedia, UploadResumable (the session's start), UploadChunk (a PUT to a session),
CancelUpload (a DELETE of a session), GetBucket, Other; the object name of an upload is its name= query field or
the "name" of the JSON resource at the start of its body. S3 otherwise: GetObject, HeadObject, PutObject, DeleteObject,
CreateMultipartUpload, UploadPart, CompleteMultipartUpload, AbortMultipartUpload, ListParts, ListObjectsV2,
ListObjects, ListMultipartUploads, CreateBucket, HeadBucket, DeleteBucket, DeleteObjects, CopyObject,
UploadPartCopy, STS:<Action> (a form POST to "/", e.g. STS:AssumeRoleWithWebIdentity), or Other. Requests on
Datavo's lease objects (a key with a ".leases/" segment) are counted apart, as Lease:<operation>, and those on
`datavo cache check`'s probes (".datavo-check/") as Probe:<operation>, so that "uploaded exactly once" counts
entries only.

The fault mode
--------------
One line: a mode name and optional key=value options. It is set by POST /_proxy/mode (the body is the line) or by
the --mode-file (re-read on every request; a change of the file re-arms it), whichever changed last.

    ok                          pass everything through (the default)
    status<NNN>                 answer NNN with an error in the service's own form without asking the upstream:
                                S3 XML (code=<S3 code>, default SlowDown for 503, InternalError for 500,
                                PreconditionFailed for 412, AccessDenied for 403, NoSuchKey for 404), Azure XML
                                with x-ms-error-code (default ServerBusy, InternalError, ConditionNotMet,
                                AuthenticationFailed, BlobNotFound), GCS JSON (code=NoSuchBucket says "The
                                specified bucket does not exist."); retry_after=S adds a Retry-After header
    expiredtoken                answer 400 <Code>ExpiredToken</Code> (the session token expired)
    drop                        read the request, then close the connection without an answer (a server that died)
    reset                       forward the request; send the status, the headers and half of the body, then
                                abort the connection with a TCP RST (a server killed mid-transfer). A request without
                                a response body is read and then reset without an answer.
    truncate                    as reset, but a clean FIN after half of the body
    stall                       as truncate, but silent for seconds=S (default 5) before the close
    wrongbytes                  forward, inverting every byte of the response body (same status and length)
    delay                       hold the request for seconds=S (default 5), or until the mode is set again
                                (POST /_proxy/mode, or a change of the mode file), before forwarding it: its answer
                                reflects the upstream's state after the delay
    throttle                    forward, at most rate=BYTES_PER_SECOND in each direction (request and response
                                bodies); with count=K only the first K matching requests are slowed

Options of every mode (they select the requests the fault applies to; the others pass through):
    op=A,B        only these operations (names as above, e.g. op=GetObject,UploadPart or op=Lease:PutObject)
    ifmatch=1     only requests pinned to a version: carrying If-Match (S3, Azure: the ranges of a read pinned to
                  an ETag) or a query ifGenerationMatch other than 0 (GCS)
    path=TEXT     only requests whose path contains TEXT
    after=N       let the first N matching requests through, then apply the fault
    count=K       apply the fault to K matching requests (after the first N), then pass through. No count: all.
    fraction=F    only a random F of those (0 < F <= 1; fraction=0.05 with delay: 5% of the requests delayed, the
                  hedges of a client among them), drawn from a generator seeded with seed=S (default 1) whenever
                  the mode is set
    every=E       only one in E of those: the Eth, 2Eth, ... matching request after the first N (every=20 with
                  delay: 5% of the requests delayed; counted among the first K of count=K)
    linger_ms=M   reset only: wait M ms (default 200) between the half body and the RST

Control endpoints (answered by the proxy, never forwarded, never counted)
------------------------------------------------------------------------
    GET  /_proxy/stats      the counters below, as JSON
    POST /_proxy/reset      zeroes the counters and re-arms the mode
    POST /_proxy/mode       sets the mode (body: one mode line; "ok" turns faults off); answers the parsed mode

/_proxy/stats JSON:
    {"total": <requests>, "faults": <requests faulted>, "mode": "<the mode line in force>",
     "ops": {"GetObject": 3, "Lease:PutObject": 1, ...},
     "statuses": {"GetObject": {"206": 3}, ...},
     "peak_in_flight": {"GetObject": 2, "UploadPart": 4, ...},   the most requests of one operation at once
     "access_keys": {"AKIA...": 12, ...},   the access key ids of the SigV4 Authorization headers (never a secret)
     "bytes_in": <request body bytes>, "bytes_out": <response body bytes sent>,
     "log": [{"method": "GET", "op": "GetObject", "path": "/bucket/key", "query": "partNumber=1&uploadId=...",
              "range": "bytes=0-5242879" or null (Range or x-ms-range),
              "if_match": "\\"etag\\"" or "generation=N" (GCS) or null, "if_none_match": "*" or null,
              "akid": "AKIA..." or null, "status": 206 or null, "fault": "reset" or null,
              "bytes_in": ..., "bytes_out": ..., "at": <seconds since start>, "done": true,
              "end": <seconds since start when it ended>}, ...]}
"""

import argparse
import http.client
import json
import os
import random
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

# Hop-by-hop headers (RFC 9110 section 7.6.1) belong to one connection; Expect is answered here (100-continue).
HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection", "te",
              "trailer", "transfer-encoding", "upgrade", "expect"}

CUTS = {"reset", "truncate", "stall"}
KNOWN_MODES = CUTS | {"ok", "drop", "wrongbytes", "throttle", "expiredtoken", "delay"}
DEFAULT_CODES = {400: "InvalidRequest", 403: "AccessDenied", 404: "NoSuchKey", 409: "OperationAborted",
                 412: "PreconditionFailed", 500: "InternalError", 503: "SlowDown"}
AZURE_CODES = {400: "InvalidInput", 403: "AuthenticationFailed", 404: "BlobNotFound", 409: "OperationNotAllowed",
               412: "ConditionNotMet", 500: "InternalError", 503: "ServerBusy"}
GCS_MESSAGES = {"NoSuchBucket": "The specified bucket does not exist.", "NoSuchKey": "No such object.",
                "PreconditionFailed": "At least one of the pre-conditions you specified did not hold.",
                "SlowDown": "We encountered an internal error. Please try again.",
                "AccessDenied": "Access denied."}
GCS_PATH = re.compile(r"^/(upload/|download/)?storage/v1/b(/|$)")
GCS_NAME = re.compile(rb'"name"\s*:\s*"((?:[^"\\]|\\.)*)"')
AKID = re.compile(r"Credential=([A-Za-z0-9]+)/")


def service_of(path, headers):
    """ "azure", "gcs" or "s3": whose API a request speaks."""
    if GCS_PATH.match(path):
        return "gcs"
    if any(h.lower().startswith("x-ms-") for h in headers):
        return "azure"
    return "s3"


def coordination(op, key):
    """op, or Lease:op / Probe:op for Datavo's lease and `cache check` objects."""
    segments = key.split("/")
    if ".leases" in segments[:-1]:
        return "Lease:" + op
    if ".datavo-check" in segments[:-1]:
        return "Probe:" + op
    return op


def classify_azure(method, path, params):
    parts = path.lstrip("/").split("/", 2)  # account, container, blob
    container = parts[1] if len(parts) > 1 else ""
    blob = parts[2] if len(parts) > 2 else ""
    comp = params.get("comp", [""])[0]
    if not container:
        return "ListContainers" if method == "GET" and comp == "list" else "Other"
    if not blob:
        if method == "GET" and comp == "list":
            return "ListBlobs"
        if "restype" in params:
            return {"PUT": "CreateContainer", "GET": "GetContainerProperties", "HEAD": "GetContainerProperties",
                    "DELETE": "DeleteContainer"}.get(method, "Other")
        return "Other"
    if method == "GET":
        op = "GetBlob" if not comp else "Other"
    elif method == "HEAD":
        op = "GetBlobProperties"
    elif method == "PUT":
        op = {"": "PutBlob", "block": "PutBlock", "blocklist": "PutBlockList"}.get(comp, "Other")
    elif method == "DELETE":
        op = "DeleteBlob"
    else:
        op = "Other"
    return coordination(op, blob)


def classify_gcs(method, path, params, body_prefix):
    upload = path.startswith("/upload/")
    rest = path.split("/b/", 1)[1] if "/b/" in path else ""
    bucket, _, tail = rest.partition("/")
    name = tail[2:] if tail.startswith("o/") else ""
    if upload:
        if "upload_id" in params:
            op = {"PUT": "UploadChunk", "POST": "UploadChunk", "DELETE": "CancelUpload"}.get(method, "Other")
        else:
            kind = params.get("uploadType", ["media"])[0]
            op = {"multipart": "UploadMultipart", "resumable": "UploadResumable", "media": "UploadMedia"}.get(
                kind, "Other")
        name = params.get("name", [""])[0]
        if not name:
            match = GCS_NAME.search(body_prefix)
            name = json.loads(b'"' + match.group(1) + b'"') if match else ""
        return coordination(op, name)
    if path.startswith("/download/"):
        return coordination("GetMedia", name)
    if not bucket:
        return "Other"
    if not tail:
        return "GetBucket" if method == "GET" else "Other"
    if tail == "o":
        return "ListObjects" if method == "GET" else "Other"
    if not name:
        return "Other"
    if method == "GET":
        op = "GetMedia" if params.get("alt", [""])[0] == "media" else "GetResource"
    else:
        op = {"DELETE": "DeleteObject", "PATCH": "PatchObject", "PUT": "PatchObject"}.get(method, "Other")
    return coordination(op, name)


def classify(method, path, query, headers, body_prefix):
    """The operation of a request (see the module docstring)."""
    params = urllib.parse.parse_qs(query, keep_blank_values=True)
    service = service_of(path, headers)
    if service == "azure":
        return classify_azure(method, path, params)
    if service == "gcs":
        return classify_gcs(method, path, params, body_prefix)
    params = urllib.parse.parse_qs(query, keep_blank_values=True)
    parts = path.lstrip("/").split("/", 1)
    bucket = parts[0]
    key = parts[1] if len(parts) > 1 else ""
    copy = "x-amz-copy-source" in (h.lower() for h in headers)
    if not bucket:
        if method == "POST":
            form = urllib.parse.parse_qs(body_prefix.decode("latin-1"), keep_blank_values=True)
            return "STS:" + form.get("Action", ["?"])[0]
        return "ListBuckets" if method == "GET" else "Other"
    if not key:
        if method == "GET":
            if "uploads" in params:
                return "ListMultipartUploads"
            return "ListObjectsV2" if "list-type" in params else "ListObjects"
        if method == "POST" and "delete" in params:
            return "DeleteObjects"
        return {"PUT": "CreateBucket", "HEAD": "HeadBucket", "DELETE": "DeleteBucket"}.get(method, "Other")
    if method == "GET":
        op = "ListParts" if "uploadId" in params else "GetObject"
    elif method == "HEAD":
        op = "HeadObject"
    elif method == "PUT":
        if "partNumber" in params and "uploadId" in params:
            op = "UploadPartCopy" if copy else "UploadPart"
        else:
            op = "CopyObject" if copy else "PutObject"
    elif method == "POST":
        op = "CreateMultipartUpload" if "uploads" in params else (
            "CompleteMultipartUpload" if "uploadId" in params else "Other")
    elif method == "DELETE":
        op = "AbortMultipartUpload" if "uploadId" in params else "DeleteObject"
    else:
        op = "Other"
    return coordination(op, key)


# --flavour azure|gcs: the S3 name of each native operation, for tests that read every server's counters with one
# set of names (the tier conformance suite). Lease:/Probe: prefixes are kept.
S3_NAME_OF = {
    "azure": {"GetBlob": "GetObject", "GetBlobProperties": "HeadObject", "PutBlob": "PutObject",
              "PutBlock": "UploadPart", "PutBlockList": "CompleteMultipartUpload", "DeleteBlob": "DeleteObject",
              "ListBlobs": "ListObjects", "CreateContainer": "CreateBucket", "GetContainerProperties": "HeadBucket",
              "DeleteContainer": "DeleteBucket", "ListContainers": "ListBuckets"},
    "gcs": {"GetMedia": "GetObject", "GetResource": "HeadObject", "UploadMultipart": "PutObject",
            "UploadMedia": "PutObject", "UploadResumable": "CreateMultipartUpload", "UploadChunk": "UploadPart",
            "CancelUpload": "AbortMultipartUpload", "DeleteObject": "DeleteObject", "ListObjects": "ListObjects",
            "GetBucket": "HeadBucket"},
}


def s3_name(flavour, op):
    """op under the S3 name of --flavour (unchanged for s3 or a name without one)."""
    table = S3_NAME_OF.get(flavour)
    if not table:
        return op
    head, sep, base = op.rpartition(":")
    return head + sep + table.get(base, base)


def pin_of(headers, query):
    """What a request is pinned to: its If-Match, or GCS's ifGenerationMatch=N (N != 0); None when unpinned."""
    if headers.get("If-Match") is not None:
        return headers.get("If-Match")
    generation = urllib.parse.parse_qs(query).get("ifGenerationMatch", [""])[0]
    return "generation=" + generation if generation not in ("", "0") else None


class Mode:
    """One parsed mode line."""

    def __init__(self, line):
        self.line = line.strip() or "ok"
        words = self.line.split()
        self.name = words[0]
        self.options = {}
        for word in words[1:]:
            key, sep, value = word.partition("=")
            if not sep:
                raise ValueError("mode option %r is not key=value" % word)
            self.options[key] = value
        if self.name not in KNOWN_MODES and not (self.name.startswith("status") and self.name[6:].isdigit()):
            raise ValueError("unknown fault mode %r" % self.name)
        known = {"op", "ifmatch", "path", "after", "count", "every", "fraction", "seed", "linger_ms", "seconds", "rate", "code",
                 "retry_after"}
        unknown = set(self.options) - known
        if unknown:
            raise ValueError("unknown mode options %s" % ", ".join(sorted(unknown)))
        self.ops = set(self.options["op"].split(",")) if "op" in self.options else None
        self.if_match = self.options.get("ifmatch") == "1"
        self.path = self.options.get("path")
        self.after = int(self.options.get("after", "0"))
        self.count = int(self.options["count"]) if "count" in self.options else None
        self.every = int(self.options.get("every", "1"))
        if self.every < 1:
            raise ValueError("every must be at least 1")
        self.fraction = float(self.options.get("fraction", "1"))
        if not 0 < self.fraction <= 1:
            raise ValueError("fraction must be more than 0 and at most 1")
        self.random = random.Random(int(self.options.get("seed", "1")))
        self.linger_ms = int(self.options.get("linger_ms", "200"))
        self.seconds = float(self.options.get("seconds", "5"))
        self.rate = float(self.options.get("rate", "1048576"))
        self.retry_after = self.options.get("retry_after")

    def status(self):
        if self.name == "expiredtoken":
            return 400
        return int(self.name[6:]) if self.name.startswith("status") else None

    def error_code(self, service="s3"):
        if self.name == "expiredtoken":
            return "ExpiredToken"
        codes = AZURE_CODES if service == "azure" else DEFAULT_CODES
        return self.options.get("code", codes.get(self.status(), "InternalError"))

    def error_answer(self, service):
        """(body, content type, extra headers) of an injected error, in the service's form."""
        code = self.error_code(service)
        if service == "gcs":
            message = GCS_MESSAGES.get(code, "cloud proxy: injected %s" % self.line)
            body = json.dumps({"error": {"code": self.status(), "message": message,
                                         "errors": [{"message": message, "domain": "global", "reason": code}]}})
            return body.encode(), "application/json; charset=UTF-8", []
        xml = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>%s</Code><Message>cloud proxy: "
               "injected %s</Message><RequestId>proxy</RequestId></Error>" % (code, self.line)).encode()
        return xml, "application/xml", [("x-ms-error-code", code)] if service == "azure" else []

    def selects(self, op, path, has_if_match):
        if self.name == "ok":
            return False
        if self.ops is not None and op not in self.ops:
            return False
        if self.if_match and not has_if_match:
            return False
        if self.path is not None and self.path not in path:
            return False
        return True


class State:
    """The mode in force and the counters, shared by the handler threads (one lock for all)."""

    def __init__(self, mode_file):
        self.mode_file = mode_file
        self.lock = threading.Lock()
        self.mode_changed = threading.Condition(self.lock)
        self.mode_serial = 0  # bumped whenever the mode is set: releases the requests a delay holds
        self.mode = Mode("ok")
        self.mode_key = None
        self.matched = 0  # requests the mode selected since it was (re)armed
        self.started = time.monotonic()
        self.in_flight = {}  # not reset: requests under way when the counters are zeroed still end
        self.create_locks = {}  # object path -> the lock its conditional creates are forwarded under
        self.reset()

    def reset(self):
        with self.lock:
            self.total = 0
            self.faults = 0
            self.ops = {}
            self.statuses = {}
            self.peak = {}
            self.keys = {}
            self.bytes_in = 0
            self.bytes_out = 0
            self.log = []
            self.matched = 0

    def set_mode(self, line):
        mode = Mode(line)  # ValueError for the caller
        with self.lock:
            self.mode = mode
            self.matched = 0
            self.mode_serial += 1
            self.mode_changed.notify_all()
        return mode

    def hold(self, seconds):
        """Waits `seconds`, or less when the mode is set meanwhile (a delay's hold)."""
        deadline = time.monotonic() + seconds
        with self.lock:
            serial = self.mode_serial
            while self.mode_serial == serial:
                self._reload()
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self.mode_changed.wait(min(left, 0.1))

    def _reload(self):
        """Re-reads the mode file (lock held); a change replaces the mode and re-arms it."""
        if not self.mode_file:
            return
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
            # A typo in a test must not pass as "ok": every request then fails loudly.
            sys.stderr.write("cloud-proxy: bad mode file %s: %s\n" % (self.mode_file, e))
            self.mode = Mode("status500")
        self.matched = 0
        self.mode_serial += 1
        self.mode_changed.notify_all()

    def begin(self, method, path, query, op, headers):
        pin = pin_of(headers, query)
        """Counts a request and decides its fault. Returns (log record, fault Mode or None)."""
        authorization = headers.get("Authorization") or ""
        match = AKID.search(authorization)
        akid = match.group(1) if match else None
        with self.lock:
            self._reload()
            self.total += 1
            self.ops[op] = self.ops.get(op, 0) + 1
            self.in_flight[op] = self.in_flight.get(op, 0) + 1
            self.peak[op] = max(self.peak.get(op, 0), self.in_flight[op])
            if akid:
                self.keys[akid] = self.keys.get(akid, 0) + 1
            record = {"method": method, "op": op, "path": path, "query": query,
                      "range": headers.get("Range") or headers.get("x-ms-range"), "if_match": pin, "if_none_match": headers.get("If-None-Match"),
                      "akid": akid, "status": None, "fault": None, "bytes_in": 0, "bytes_out": 0,
                      "at": round(time.monotonic() - self.started, 3), "done": False}
            self.log.append(record)
            fault = None
            mode = self.mode
            if mode.selects(op, path, pin is not None):
                self.matched += 1
                n = self.matched - mode.after
                if n >= 1 and (mode.count is None or n <= mode.count) and n % mode.every == 0 \
                        and (mode.fraction >= 1 or mode.random.random() < mode.fraction):
                    fault = mode
                    record["fault"] = mode.name
                    self.faults += 1
            return record, fault

    def received(self, record, n):
        with self.lock:
            record["bytes_in"] += n
            self.bytes_in += n

    def responded(self, record, status):
        with self.lock:
            record["status"] = status
            per = self.statuses.setdefault(record["op"], {})
            per[str(status)] = per.get(str(status), 0) + 1

    def sent(self, record, n):
        with self.lock:
            record["bytes_out"] += n
            self.bytes_out += n

    def end(self, record):
        with self.lock:
            record["done"] = True
            record["end"] = round(time.monotonic() - self.started, 3)
            self.in_flight[record["op"]] -= 1

    def create_lock(self, path):
        with self.lock:
            return self.create_locks.setdefault(path, threading.Lock())

    def to_json(self):
        with self.lock:
            self._reload()
            return json.dumps({"total": self.total, "faults": self.faults, "mode": self.mode.line,
                               "ops": self.ops, "statuses": self.statuses, "peak_in_flight": self.peak,
                               "access_keys": self.keys, "bytes_in": self.bytes_in, "bytes_out": self.bytes_out,
                               "log": self.log}).encode()


class ClientGone(Exception):
    """The downstream client closed its connection."""


class Aborted(Exception):
    """The proxy ended the connection on purpose (a fault, or the upstream went away)."""


class Throttle:
    """Sleeps so that at most `rate` bytes per second pass."""

    def __init__(self, rate):
        self.rate = rate
        self.start = time.monotonic()
        self.done = 0

    def pace(self, n):
        self.done += n
        ahead = self.done / self.rate - (time.monotonic() - self.start)
        if ahead > 0:
            time.sleep(ahead)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "DatavoCloudProxy/1"

    def log_message(self, fmt, *args):
        if self.server.options.verbose:
            sys.stderr.write("cloud-proxy: " + (fmt % args) + "\n")

    def do_GET(self):
        self.handle_one()

    def do_HEAD(self):
        self.handle_one()

    def do_PUT(self):
        self.handle_one()

    def do_POST(self):
        self.handle_one()

    def do_DELETE(self):
        self.handle_one()

    def do_PATCH(self):
        self.handle_one()

    # --- plumbing -----------------------------------------------------------------------------------------------

    def read_body(self, record, throttle, prefix=b""):
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            data = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline().strip():
                        pass
                    break
                data += self.rfile.read(size)
                self.rfile.readline()
            if record is not None:
                self.server.state.received(record, len(data))
            return bytes(data)
        length = int(self.headers.get("Content-Length") or 0)
        data = bytearray(prefix)
        if record is not None and prefix:
            self.server.state.received(record, len(prefix))
        while len(data) < length:
            chunk = self.rfile.read(min(CHUNK, length - len(data)))
            if not chunk:
                raise ClientGone()
            data += chunk
            if record is not None:
                self.server.state.received(record, len(chunk))
            if throttle:
                throttle.pace(len(chunk))
        return bytes(data)

    def write(self, data):
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError) as e:
            raise ClientGone() from e

    def abort_with_rst(self):
        """Closes the connection with a TCP RST (SO_LINGER 0) instead of a FIN."""
        self.close_connection = True
        sock = self.connection
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            os.close(sock.detach())
        except OSError:
            pass

    def answer(self, status, body, content_type="application/xml", extra=()):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in extra:
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.write(body)

    # --- the proxy ----------------------------------------------------------------------------------------------

    def handle_one(self):
        parsed = urllib.parse.urlsplit(self.path)
        path, query = parsed.path, parsed.query
        state = self.server.state
        if path.startswith("/_proxy/"):
            self.control(path)
            return
        record = None
        try:
            # The operation of a form POST to "/" (STS) is in its body: peek at it by reading the body first. The
            # object name of a GCS upload may be in its first bytes (the JSON resource): read those alone, so that
            # a throttle still paces the rest.
            body = None
            prefix = b""
            if self.command == "POST" and path in ("", "/"):
                body = self.read_body(None, None)
            elif self.command == "POST" and path.startswith("/upload/") and "chunked" not in (
                    self.headers.get("Transfer-Encoding") or "").lower():
                prefix = self.rfile.read(min(4096, int(self.headers.get("Content-Length") or 0)))
            op = s3_name(self.server.options.flavour,
                         classify(self.command, urllib.parse.unquote(path), query, list(self.headers.keys()),
                                  body or prefix))
            record, fault = state.begin(self.command, urllib.parse.unquote(path), query, op, self.headers)
            if body is not None:
                state.received(record, len(body))
            self.forward(record, fault, body, prefix)
        except ClientGone:
            self.close_connection = True
        except Aborted:
            pass
        finally:
            if record is not None:
                state.end(record)

    def control(self, path):
        state = self.server.state
        if path == "/_proxy/stats" and self.command == "GET":
            self.answer(200, state.to_json(), "application/json", [("Cache-Control", "no-store")])
        elif path == "/_proxy/reset" and self.command == "POST":
            self.read_body(None, None)
            state.reset()
            self.answer(200, b'{"reset": true}', "application/json")
        elif path == "/_proxy/mode" and self.command == "POST":
            line = self.read_body(None, None).decode().strip()
            try:
                mode = state.set_mode(line)
            except ValueError as e:
                self.answer(400, json.dumps({"error": str(e)}).encode(), "application/json")
                return
            self.answer(200, json.dumps({"mode": mode.line}).encode(), "application/json")
        else:
            self.answer(404, b'{"error": "unknown control endpoint"}', "application/json")

    def forward(self, record, fault, body, prefix=b""):
        state = self.server.state
        throttle = Throttle(fault.rate) if fault is not None and fault.name == "throttle" else None
        if body is None:
            body = self.read_body(record, throttle, prefix)

        if fault is not None and fault.status() is not None:
            service = service_of(urllib.parse.unquote(urllib.parse.urlsplit(self.path).path), list(self.headers.keys()))
            payload, content_type, extra = fault.error_answer(service)
            if fault.retry_after:
                extra = extra + [("Retry-After", fault.retry_after)]
            state.responded(record, fault.status())
            self.answer(fault.status(), payload, content_type, extra=extra)
            state.sent(record, len(payload) if self.command != "HEAD" else 0)
            return
        if fault is not None and fault.name == "delay":
            state.hold(fault.seconds)
        if fault is not None and fault.name == "drop":
            self.close_connection = True
            self.abort_with_rst()
            raise Aborted()

        if self.headers.get("If-None-Match") == "*" and self.command in ("PUT", "POST"):
            with state.create_lock(urllib.parse.urlsplit(self.path).path):
                self.forward_upstream(record, fault, body, throttle)
        else:
            self.forward_upstream(record, fault, body, throttle)

    def forward_upstream(self, record, fault, body, throttle):
        options = self.server.options
        upstream = http.client.HTTPConnection(options.upstream_host, options.upstream_port, timeout=120)
        try:
            try:
                upstream.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
                has_length = False
                for name, value in self.headers.items():
                    lower = name.lower()
                    if lower in HOP_BY_HOP:
                        continue
                    if lower == "content-length":
                        has_length = True
                        value = str(len(body))
                    upstream.putheader(name, value)
                if not has_length and (body or self.command in ("POST", "PUT")):
                    upstream.putheader("Content-Length", str(len(body)))
                upstream.endheaders(body if body else None)
                response = upstream.getresponse()
            except (OSError, http.client.HTTPException):
                # The server is gone: so is the connection, as the client would see it without the proxy.
                self.abort_with_rst()
                raise Aborted()
            self.relay(record, response, fault, throttle)
        finally:
            upstream.close()

    def relay(self, record, response, fault, throttle):
        state = self.server.state
        status = response.status
        has_body = self.command != "HEAD" and status not in (204, 304) and not 100 <= status < 200
        length_header = response.getheader("Content-Length")
        chunked = "chunked" in (response.getheader("Transfer-Encoding") or "").lower()
        if has_body and (length_header is None or chunked):
            try:
                data = response.read()  # no Content-Length upstream: buffer it, so that "half" is defined
            except (OSError, http.client.HTTPException):
                self.abort_with_rst()
                raise Aborted()
            length = len(data)
            chunks = iter([data])
        else:
            length = int(length_header) if length_header is not None else 0
            chunks = iter(lambda: response.read(CHUNK), b"")

        cut = fault is not None and fault.name in CUTS
        if cut and not has_body:
            self.abort_with_rst()  # no body to cut: the answer never arrives
            raise Aborted()
        self.send_response(status, response.reason)
        for name, value in response.getheaders():
            if name.lower() in HOP_BY_HOP or name.lower() == "content-length":
                continue
            self.send_header(name, value)
        if has_body or length_header is not None:
            self.send_header("Content-Length", str(length))
        self.end_headers()
        state.responded(record, status)
        if not has_body:
            self.wfile.flush()
            return

        cut_at = length // 2 if cut else None
        sent = 0
        while True:
            try:
                chunk = next(chunks)
            except StopIteration:
                break
            except (OSError, http.client.HTTPException):
                self.abort_with_rst()  # the upstream died mid-body
                raise Aborted()
            if cut_at is not None and sent + len(chunk) > cut_at:
                chunk = chunk[:cut_at - sent]
            if fault is not None and fault.name == "wrongbytes":
                chunk = bytes(b ^ 0xFF for b in chunk)
            if chunk:
                self.write(chunk)
                sent += len(chunk)
                state.sent(record, len(chunk))
                if throttle:
                    throttle.pace(len(chunk))
            if cut_at is not None and sent >= cut_at:
                break
        if cut_at is None:
            if sent < length:
                self.abort_with_rst()  # the upstream's body ended early (it died): so does the client's
                raise Aborted()
            return
        self.wfile.flush()
        if fault.name == "stall":
            time.sleep(fault.seconds)
            self.close_connection = True
        elif fault.name == "reset":
            time.sleep(fault.linger_ms / 1000.0)
            self.abort_with_rst()
            raise Aborted()
        else:
            self.close_connection = True


class Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 128


def write_port_file(path, port):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        f.write("%d\n" % port)
    os.replace(tmp, path)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--upstream", required=True, help="the S3 server, http://HOST:PORT")
    parser.add_argument("--flavour", choices=("s3", "azure", "gcs"), default="s3",
                        help="name Azure / GCS operations with their S3 names (see Flavours)")
    parser.add_argument("--mode-file", help="the fault mode, one line, re-read on every request")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (see --port-file)")
    parser.add_argument("--port-file", help="written atomically with the port once listening")
    parser.add_argument("--verbose", action="store_true", help="log every request to stderr")
    options = parser.parse_args(argv)
    upstream = urllib.parse.urlsplit(options.upstream)
    if upstream.scheme != "http" or not upstream.hostname or upstream.path not in ("", "/"):
        parser.error("--upstream must be http://HOST:PORT, got %r" % options.upstream)
    if options.host not in ("127.0.0.1", "::1", "localhost"):
        parser.error("the proxy listens on loopback only")
    options.upstream_host = upstream.hostname
    options.upstream_port = upstream.port or 80

    server = Server((options.host, options.port), Handler)
    server.options = options
    server.state = State(options.mode_file)

    def stop(signum, frame):
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    port = server.server_address[1]
    if options.port_file:
        write_port_file(options.port_file, port)
    if options.verbose:
        sys.stderr.write("cloud-proxy: %s:%d -> %s\n" % (options.host, port, options.upstream))
    try:
        server.serve_forever(poll_interval=0.1)
    except SystemExit:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
