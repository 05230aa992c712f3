"""Fixtures of the datavo_sdk tests: a real origin (`datavo pack` + `datavo serve` on a loopback port), an isolated
environment per test (HOME, caches and DATAVO_* inside a temp dir), and helpers to count the origin's requests.

What they need: the `datavo` binary ($DATAVO_BIN, else the one bundled in the installed package, else
build/cli/datavo) and an importable datavo_sdk (installed, or PYTHONPATH=build/python). scripts/test.sh sets both.
"""
import json
import math
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATASET = "voice_demo_v1/train"
SAMPLES = 160
PER_SHARD = 10
SHARDS = SAMPLES // PER_SHARD


def pytest_collection_finish(session):
    """No test module may put the source tree's python/ on sys.path: its datavo_sdk/ has no extension, and
    DataLoader's spawned workers, which inherit sys.path, would import it instead of the package under test."""
    import datavo_sdk

    source = os.path.realpath(os.path.join(REPO, "python"))
    under_test = os.path.dirname(os.path.dirname(os.path.realpath(datavo_sdk.__file__)))
    if under_test != source and any(entry and os.path.realpath(entry) == source for entry in sys.path):
        raise pytest.UsageError("a test module put %s on sys.path: spawned workers would import the source "
                                "datavo_sdk, which has no extension, instead of the one under test in %s"
                                % (source, under_test))


def datavo_binary():
    path = os.environ.get("DATAVO_BIN")
    if path:
        return path
    try:
        from datavo_sdk import _cli

        if _cli.binary():
            return _cli.binary()
    except ImportError:
        pass
    return os.path.join(REPO, "build", "cli", "datavo")


def make_source(root, count, first=0, frames=800):
    """`count` samples utt_NNNN with a small valid WAV (audio.wav) and a transcript (transcript.txt)."""
    os.makedirs(root, exist_ok=True)
    for i in range(first, first + count):
        n = frames + 40 * (i % 50)
        pcm = b"".join(struct.pack("<h", int(8000 * math.sin(2 * math.pi * (200 + i) * t / 16000))) for t in range(n))
        wav = (
            b"RIFF" + struct.pack("<I", 36 + len(pcm)) + b"WAVEfmt "
            + struct.pack("<IHHIIHH", 16, 1, 1, 16000, 32000, 2, 16) + b"data" + struct.pack("<I", len(pcm)) + pcm
        )
        with open(os.path.join(root, "utt_%04d.audio.wav" % i), "wb") as f:
            f.write(wav)
        with open(os.path.join(root, "utt_%04d.transcript.txt" % i), "w") as f:
            f.write("utterance %d\n" % i)


class Origin:
    """A `datavo serve` process over a store packed by `datavo pack`."""

    def __init__(self, binary, store, log_path, extra=()):
        self.binary = binary
        self.store = store
        port_file = os.path.join(os.path.dirname(log_path), "port.%d" % os.getpid())
        if os.path.exists(port_file):
            os.unlink(port_file)
        self.log = open(log_path, "wb")
        self.process = subprocess.Popen(
            [binary, "serve", store, "--port", "0", "--port-file", port_file, "--quiet", *extra],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 15
        while not (os.path.exists(port_file) and os.path.getsize(port_file) > 0):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("datavo serve did not start; see " + log_path)
            time.sleep(0.05)
        with open(port_file) as f:
            self.port = int(f.read().strip())
        self.url = "http://127.0.0.1:%d" % self.port

    def requests(self, route=None):
        """datavo_requests_total from /v1/metrics: {route: count} (summed over statuses), or one route's count."""
        text = urllib.request.urlopen(self.url + "/v1/metrics", timeout=10).read().decode()
        counts = {}
        for line in text.splitlines():
            m = re.match(r"datavo_requests_total\{(.*)\}\s+([0-9.eE+]+)$", line)
            if m:
                labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
                counts[labels.get("route")] = counts.get(labels.get("route"), 0) + int(float(m.group(2)))
        return counts.get(route, 0) if route else counts

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


def pack(binary, source, store, dataset=DATASET, per_shard=PER_SHARD):
    subprocess.run(
        [binary, "pack", source, "--root", store, "--dataset", dataset, "--samples-per-shard", str(per_shard)],
        check=True,
        stdout=subprocess.DEVNULL,
    )


@pytest.fixture(scope="session")
def session_dir():
    path = tempfile.mkdtemp(prefix="datavo-pytest.")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def datavo_bin():
    path = datavo_binary()
    if not os.access(path, os.X_OK):
        pytest.fail("no datavo binary at %s: set DATAVO_BIN (scripts/test.sh does)" % path)
    return path


@pytest.fixture(scope="session")
def origin(session_dir, datavo_bin):
    """voice_demo_v1/train: 160 samples in 16 shards (keys audio.wav, transcript.txt), served on loopback."""
    source = os.path.join(session_dir, "src")
    store = os.path.join(session_dir, "store")
    make_source(source, SAMPLES)
    pack(datavo_bin, source, store)
    server = Origin(datavo_bin, store, os.path.join(session_dir, "serve.log"))
    yield server
    server.stop()


@pytest.fixture
def env(tmp_path, monkeypatch, origin):
    """A fresh HOME, shard cache and manifest cache per test; DATAVO_SERVER points at the session's origin."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("DATAVO_SHARD_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("DATAVO_MANIFEST_CACHE_DIR", str(tmp_path / "manifests"))
    monkeypatch.setenv("DATAVO_SERVER", origin.url)
    for name in ("DATAVO_SHARD_CACHE_CONFIG", "DATAVO_OFFLINE", "DATAVO_TOKEN", "DATAVO_LOG_LEVEL", "RANK",
                 "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def run_python(code, env=None, timeout=120):
    """Runs `code` in a fresh interpreter (this one's), returns the CompletedProcess (text)."""
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout)


class Proxy:
    """tests/support/fault_proxy.py in front of the origin; set_mode() arms a fault for the shard downloads (a stall,
    a slow link, an error status: see the proxy's docstring)."""

    def __init__(self, upstream, workdir):
        self.mode_file = os.path.join(workdir, "proxy.mode")
        port_file = os.path.join(workdir, "proxy.port")
        self.set_mode("ok")
        self.log = open(os.path.join(workdir, "proxy.log"), "wb")
        self.process = subprocess.Popen(
            [sys.executable, os.path.join(REPO, "tests", "support", "fault_proxy.py"), "--upstream", upstream,
             "--mode-file", self.mode_file, "--port-file", port_file],
            stdout=self.log, stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 15
        while not (os.path.exists(port_file) and os.path.getsize(port_file) > 0):
            assert self.process.poll() is None and time.monotonic() < deadline, "fault proxy did not start"
            time.sleep(0.05)
        self.url = "http://127.0.0.1:%s" % open(port_file).read().strip()

    def set_mode(self, mode):
        tmp = self.mode_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(mode + "\n")
        os.replace(tmp, self.mode_file)

    def stats(self):
        """The proxy's counters (GET /_proxy_stats; see its docstring)."""
        return json.loads(urllib.request.urlopen(self.url + "/_proxy_stats", timeout=10).read())

    def stop(self):
        self.process.terminate()
        self.process.wait(10)
        self.log.close()


@pytest.fixture
def proxy(env, origin, tmp_path):
    p = Proxy(origin.url, str(tmp_path))
    yield p
    p.stop()
