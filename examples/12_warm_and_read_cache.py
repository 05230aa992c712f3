#!/usr/bin/env python3
"""Runnable companion of the guide's chapter 15, "Shard caching and the cache hierarchy".

    python3 examples/12_warm_and_read_cache.py [DATASET] [--key KEY]

1. Warms DATASET (default voice_demo_v1/train) with datavo_sdk.warm(DATASET, keys=["audio.wav"]), in this process
   (the library operation behind `datavo warm`): every shard is fetched from the server once and installed in the
   cache; a progress bar shows on a terminal.
2. Reads it twice, each pass in a process of its own, with SampleStream.from_dataset(DATASET, keys=["audio.wav"]).
3. Counts the server's requests on /v1/metrics around each step, and shows that the reads made no shard request,
   and that the second pass (its revision pinned by the first) made no server request at all.

The server is $DATAVO_SERVER when set (the cache is then yours: $DATAVO_SHARD_CACHE_CONFIG, /etc/datavo/shards.yaml,
~/.config/datavo/shards.yaml, or ~/.cache/altavo/datavo/shards). Without it the example packs a small synthetic
speech dataset of its own, serves it with `datavo serve` on a loopback port, and uses a cache in a temporary
directory that it removes at the end.

Needs datavo_sdk (`pip install --no-build-isolation .`), and without $DATAVO_SERVER the `datavo` command to pack and
serve its dataset: $DATAVO_BIN, else the one that comes with datavo_sdk, else `datavo` on PATH. Exit status 0 when
the warm cache served both passes.
"""
import argparse
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

ROUTES = ("manifest", "ticket", "shard")


def datavo_command():
    if os.environ.get("DATAVO_BIN"):
        return os.environ["DATAVO_BIN"]
    try:
        from datavo_sdk import _cli

        if _cli.binary():
            return _cli.binary()
    except ImportError:
        pass
    found = shutil.which("datavo")
    if not found:
        sys.exit("12_warm_and_read_cache: no datavo command (set DATAVO_BIN, or pip install the SDK)")
    return found


def requests(server):
    """The server's request counts by route, from /v1/metrics (datavo_requests_total, summed over statuses)."""
    text = urllib.request.urlopen(server.rstrip("/") + "/v1/metrics", timeout=10).read().decode()
    counts = dict.fromkeys(ROUTES, 0)
    for line in text.splitlines():
        match = re.match(r"datavo_requests_total\{(.*)\}\s+([0-9.eE+]+)$", line)
        if match:
            route = dict(re.findall(r'(\w+)="([^"]*)"', match.group(1))).get("route")
            if route in counts:
                counts[route] += int(float(match.group(2)))
    return counts


def delta(before, after):
    return {route: after[route] - before[route] for route in ROUTES}


def make_dataset(root, samples=240):
    """A small synthetic speech dataset: <id>.audio.wav (16 kHz mono tones) and <id>.transcript.txt."""
    os.makedirs(root)
    for i in range(samples):
        frames = 4000 + 80 * (i % 40)
        pcm = b"".join(struct.pack("<h", int(6000 * math.sin(2 * math.pi * (180 + 3 * i) * t / 16000)))
                       for t in range(frames))
        header = b"RIFF" + struct.pack("<I", 36 + len(pcm)) + b"WAVEfmt " + struct.pack(
            "<IHHIIHH", 16, 1, 1, 16000, 32000, 2, 16) + b"data" + struct.pack("<I", len(pcm))
        with open(os.path.join(root, "utt_%04d.audio.wav" % i), "wb") as f:
            f.write(header + pcm)
        with open(os.path.join(root, "utt_%04d.transcript.txt" % i), "w") as f:
            f.write("utterance number %d\n" % i)


def serve_own_dataset(datavo, workdir, dataset):
    source, store = os.path.join(workdir, "source"), os.path.join(workdir, "store")
    make_dataset(source)
    subprocess.run([datavo, "pack", source, "--root", store, "--dataset", dataset, "--samples-per-shard", "20"],
                   check=True, stdout=subprocess.DEVNULL)
    port_file = os.path.join(workdir, "port")
    log = open(os.path.join(workdir, "serve.log"), "wb")
    server = subprocess.Popen([datavo, "serve", store, "--port", "0", "--port-file", port_file, "--quiet"],
                              stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 15
    while not (os.path.exists(port_file) and os.path.getsize(port_file)):
        if server.poll() is not None or time.monotonic() > deadline:
            sys.exit("12_warm_and_read_cache: datavo serve did not start (see %s)" % log.name)
        time.sleep(0.05)
    with open(port_file) as f:
        return server, "http://127.0.0.1:%s" % f.read().strip()


def read_pass(dataset, key, revision):
    """One pass, in this process: every sample of `dataset`, touching each field. Prints a JSON summary."""
    from datavo_sdk import SampleStream

    start = time.monotonic()
    stream = SampleStream.from_dataset(dataset, keys=[key], revision=revision)
    samples = size = 0
    for sample in stream:
        samples += 1
        size += len(sample[key])  # a zero-copy view into the cached shard
    print(json.dumps({"samples": samples, "bytes": size, "revision": stream.revision,
                      "seconds": round(time.monotonic() - start, 3)}))


def run_pass(dataset, key, revision, env):
    command = [sys.executable, os.path.abspath(__file__), dataset, "--key", key, "--read-pass"]
    if revision is not None:
        command += ["--revision", str(revision)]
    done = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", nargs="?", default="voice_demo_v1/train")
    parser.add_argument("--key", default="audio.wav")
    parser.add_argument("--read-pass", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--revision", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.read_pass:
        return read_pass(args.dataset, args.key, args.revision)

    env = dict(os.environ)
    workdir = server = None
    try:
        if env.get("DATAVO_SERVER"):
            url = env["DATAVO_SERVER"]
            print("server: %s (DATAVO_SERVER); your shard cache" % url)
        else:
            workdir = tempfile.mkdtemp(prefix="datavo-example-12.")
            server, url = serve_own_dataset(datavo_command(), workdir, args.dataset)
            # This process (its warm()) and the read passes' processes use the same server and cache.
            os.environ.update(DATAVO_SERVER=url, DATAVO_SHARD_CACHE_DIR=os.path.join(workdir, "cache"),
                              DATAVO_MANIFEST_CACHE_DIR=os.path.join(workdir, "manifests"))
            os.environ.pop("DATAVO_SHARD_CACHE_CONFIG", None)
            env = dict(os.environ)
            print("server: %s (datavo serve, a dataset of its own); cache: %s" % (url, env["DATAVO_SHARD_CACHE_DIR"]))

        from datavo_sdk import warm

        before = requests(url)
        report = warm(args.dataset, keys=[args.key])
        print("warmed %d shards of %s revision %d: %d from the origin, %.1f MB, in %.2f s"
              % (report.shards, report.dataset, report.revision, report.origin_shards, report.size_bytes / 1e6,
                 report.seconds))
        warmed = requests(url)
        first = run_pass(args.dataset, args.key, None, env)
        after_first = requests(url)
        second = run_pass(args.dataset, args.key, first["revision"], env)
        after_second = requests(url)

        rows = [("warm() (this process)", None, delta(before, warmed)),
                ("read pass 1 (new process)", first, delta(warmed, after_first)),
                ("read pass 2 (new process)", second, delta(after_first, after_second))]
        print("\n%-28s %8s %10s %9s %8s %7s" % ("step", "samples", "seconds", "manifest", "ticket", "shard"))
        for name, result, counts in rows:
            print("%-28s %8s %10s %9d %8d %7d" % (name, result["samples"] if result else "-",
                                                 result["seconds"] if result else "-", counts["manifest"],
                                                 counts["ticket"], counts["shard"]))
        reads_fetched = rows[1][2]["shard"] + rows[2][2]["shard"] + rows[1][2]["ticket"] + rows[2][2]["ticket"]
        second_total = sum(rows[2][2].values())
        ok = reads_fetched == 0 and second_total == 0 and first["samples"] == second["samples"] > 0
        print("\n%s: the reads made %d shard/ticket requests; the second pass made %d server requests in all"
              % ("ok" if ok else "FAILED", reads_fetched, second_total))
        return 0 if ok else 1
    finally:
        if server is not None:
            server.terminate()
            server.wait(10)
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
