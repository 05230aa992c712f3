#!/usr/bin/env python3
"""The Azure Blob and GCS transfer benchmarks of docs/BENCHMARKS-cloud.md, run by bench/cloud/run_benchmarks.sh
(which builds the programs and starts Azurite and the GCS emulator).

For each emulator, REPS rounds; in each round every variant runs once, in a shuffled order, so that the ratios come
from the same run under the same machine load:
  azurite: download of a SIZE blob (written by the Azure tier, so it carries Datavo's metadata) through the Azure
    tier (bench_cloud_transfer --tier azure_blob: defaults, concurrency 1, and part_size = SIZE: one GET),
    @azure/storage-blob's downloadToFile and downloadToBuffer (bench/cloud/sdk_transfer.js) and curl with a SAS URL
    (the floor); upload of the same file through the Azure tier (defaults: Put Block + Put Block List; and
    part_size = SIZE: one Put Blob), uploadFile (its defaults: one Put Blob up to 256 MiB; and 16 MiB blocks, 8 at
    once) and curl (one Put Blob).
  gcs: download of a SIZE object (written by @google-cloud/storage with Datavo's metadata) through the GCS tier
    (defaults, concurrency 1, and part_size 512 MiB: one GET), file.download, TransferManager.downloadFileInChunks
    and curl of the media URL; upload of a file of GCS_UPLOAD_MIB (default SIZE) through the GCS tier (part_size
    512 MiB: one resumable session and one PUT of the whole file; the emulator finalises a resumable upload on its
    first chunk, so the default part_size cannot upload more than one chunk to it), bucket.upload (its default,
    resumable in one PUT; and resumable: false, one multipart request, only up to 128 MiB: the emulator refuses
    multipart bodies above 130 MiB) and curl (uploadType=media, the file as the body with no Content-Type).
Measured per run: wall seconds (in-process for Datavo and the SDKs: the client made and connected before the clock;
whole process for curl), the client's CPU (in-process, and user + system of the whole process from
RUSAGE_CHILDREN), and the emulator's CPU (utime + stime of its PID from /proc/PID/stat, before and after the run).
Prints Markdown tables of medians (with min-max) and the ratios; writes every run to --json.
"""

import argparse
import hashlib
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TICKS = os.sysconf("SC_CLK_TCK")


def server_cpu(pid):
    """utime + stime of PID (every thread), in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # fields 14 and 15 of proc(5), counted from field 3


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(argv, env):
    """Runs argv; returns (wall seconds, user + system seconds of the process, stdout)."""
    c0, t0 = children_cpu(), time.monotonic()
    proc = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # reaped: in RUSAGE_CHILDREN
    wall, cpu = time.monotonic() - t0, children_cpu() - c0
    if proc.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(argv[:3]), proc.returncode, proc.stderr.decode()[-2000:]))
    return wall, cpu, proc.stdout.decode()


def sha256_hex(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def make_file(path, mib):
    with open(path, "wb") as f:
        for _ in range(mib):
            f.write(os.urandom(1 << 20))


def hash_of(text):
    return hashlib.sha256(text.encode()).hexdigest()


class Bench:
    def __init__(self, args):
        self.args = args
        self.results = []
        self.out_file = os.path.join(args.work, "out.bin")

    def ours(self, tier, op, endpoint, bucket, h, path, *extra):
        return [self.args.bench_bin, op, "--tier", tier, "--endpoint", endpoint, "--bucket", bucket, "--hash", h,
                "--file", path] + list(extra)

    def sdk(self, *argv):
        return [self.args.node, os.path.join(HERE, "sdk_transfer.js")] + list(argv)

    def measure(self, emulator, pid, variants, env, size_of):
        """variants: {label: (argv_or_callable(rep), cleanup(rep) or None)}."""
        for rep in range(self.args.reps):
            order = list(variants)
            random.shuffle(order)
            for label in order:
                make_argv, cleanup = variants[label]
                argv = make_argv(rep)
                s0 = server_cpu(pid)
                wall, process_cpu, out = run(argv, env)
                s1 = server_cpu(pid)
                got = json.loads(out) if out.strip().startswith("{") else {}
                size = got.get("bytes", size_of(label))
                if label.startswith("download") and os.path.getsize(self.out_file) != size:
                    raise RuntimeError("%s: %d bytes written, %d expected" % (label, os.path.getsize(self.out_file), size))
                record = {"emulator": emulator, "variant": label, "rep": rep, "bytes": size,
                          "seconds": got.get("seconds", wall), "wall_seconds": wall,
                          "cpu_seconds": got.get("cpu_seconds", process_cpu), "process_cpu_seconds": process_cpu,
                          "server_cpu_seconds": s1 - s0, "in_process": "seconds" in got,
                          "settings": {k: got[k] for k in ("mode", "concurrency", "part_size") if k in got}}
                self.results.append(record)
                print("# %-7s %-62s rep %d: %7.1f MB/s, client %.2f CPU s/GB, emulator %.2f CPU s/GB" % (
                    emulator, label, rep, size / 1e6 / record["seconds"], record["cpu_seconds"] / (size / 1e9),
                    record["server_cpu_seconds"] / (size / 1e9)), file=sys.stderr, flush=True)
                if os.path.exists(self.out_file):
                    os.unlink(self.out_file)
                if cleanup:
                    cleanup(rep)

    def azurite(self, source, size):
        a = self.args
        env = dict(os.environ, AZURE_STORAGE_CONNECTION_STRING=os.environ["AZURITE_CONNECTION_STRING"])
        endpoint, container = os.environ["AZURITE_BLOB_ENDPOINT"], "bench"
        tool = [a.node, os.path.join(ROOT, "tests", "support", "azure_tool.js")]
        run(tool + ["create", container], env)
        sas = run(tool + ["sas", container], env)[2].strip()
        url = lambda name: "%s/%s/%s?%s" % (endpoint, container, name, sas)
        h = hash_of("bench-download")
        obj = "local/%s.tar" % h
        run(self.ours("azure_blob", "upload", endpoint, container, h, source), env)  # the object, with its metadata
        delete = lambda name: run(["curl", "-sf", "-X", "DELETE", url(name), "-o", "/dev/null"], env)
        up_hash = lambda tag, rep: hash_of("up-azure-%s-%d" % (tag, rep))
        up_obj = lambda tag, rep: "local/%s.tar" % up_hash(tag, rep)
        o = self.out_file
        variants = {
            "download: Azure tier (defaults: concurrency 8, part_size 16 MiB)":
                (lambda rep: self.ours("azure_blob", "download", endpoint, container, h, o), None),
            "download: Azure tier, concurrency 1":
                (lambda rep: self.ours("azure_blob", "download", endpoint, container, h, o, "--concurrency", "1"),
                 None),
            "download: Azure tier, part_size = size (one GET)":
                (lambda rep: self.ours("azure_blob", "download", endpoint, container, h, o, "--part-size", str(size)),
                 None),
            "download: SDK downloadToFile (default: one GET)":
                (lambda rep: self.sdk("azure", "download", "--container", container, "--name", obj, "--file", o),
                 None),
            "download: SDK downloadToBuffer (16 MiB, 8 at once) + write":
                (lambda rep: self.sdk("azure", "download", "--container", container, "--name", obj, "--file", o,
                                      "--mode", "buffer"), None),
            "download: curl GET (SAS URL; floor)":
                (lambda rep: ["curl", "-sf", "-o", o, url(obj)], None),
            "upload: Azure tier (defaults: 16 MiB blocks, 8 at once)":
                (lambda rep: self.ours("azure_blob", "upload", endpoint, container, up_hash("tier", rep), source),
                 lambda rep: delete(up_obj("tier", rep))),
            "upload: Azure tier, part_size = size (one Put Blob)":
                (lambda rep: self.ours("azure_blob", "upload", endpoint, container, up_hash("one", rep), source,
                                       "--part-size", str(size)),
                 lambda rep: delete(up_obj("one", rep))),
            "upload: SDK uploadFile (default: one Put Blob)":
                (lambda rep: self.sdk("azure", "upload", "--container", container, "--name", "sdk-up/%d" % rep,
                                      "--file", source), lambda rep: delete("sdk-up/%d" % rep)),
            "upload: SDK uploadFile (16 MiB blocks, 8 at once)":
                (lambda rep: self.sdk("azure", "upload", "--container", container, "--name", "sdk-blocks/%d" % rep,
                                      "--file", source, "--mode", "blocks"), lambda rep: delete("sdk-blocks/%d" % rep)),
            "upload: curl PUT (one Put Blob, SAS URL; floor)":
                (lambda rep: ["curl", "-sf", "-o", "/dev/null", "-T", source, "-H", "x-ms-blob-type: BlockBlob",
                              url("curl-up/%d" % rep)], lambda rep: delete("curl-up/%d" % rep)),
        }
        self.measure("azurite", a.azurite_pid, variants, env, lambda label: size)
        delete(obj)
        return list(variants)

    def gcs(self, source, size, upload_source, upload_size):
        a = self.args
        env = dict(os.environ)
        endpoint, bucket = os.environ["GCS_EMULATOR_ENDPOINT"], "bench"
        tool = [a.node, os.path.join(ROOT, "tests", "support", "gcs_tool.js")]
        h = hash_of("bench-download")
        obj = "local/%s.tar" % h
        # The GCS tier cannot write SIZE here (above): the SDK writes the object, with the tier's metadata.
        run(tool + ["put", bucket, obj, source, "--resumable", "--meta", "datavo-sha256=" + sha256_hex(source),
                    "--meta", "datavo-size=%d" % size], env)
        quoted = lambda name: urllib.parse.quote(name, safe="")
        delete = lambda name: run(["curl", "-sf", "-X", "DELETE", "-o", "/dev/null",
                                   "%s/storage/v1/b/%s/o/%s" % (endpoint, bucket, quoted(name))], env)
        up_hash = lambda rep: hash_of("up-gcs-%d" % rep)
        o = self.out_file
        up = "upload %d MiB" % (upload_size >> 20)
        variants = {
            "download: GCS tier (defaults: concurrency 8, part_size 16 MiB)":
                (lambda rep: self.ours("gcs", "download", endpoint, bucket, h, o), None),
            "download: GCS tier, concurrency 1":
                (lambda rep: self.ours("gcs", "download", endpoint, bucket, h, o, "--concurrency", "1"), None),
            "download: GCS tier, part_size 512 MiB (one GET)":
                (lambda rep: self.ours("gcs", "download", endpoint, bucket, h, o, "--part-size", str(512 << 20)),
                 None),
            "download: SDK file.download (default: one GET, CRC32C)":
                (lambda rep: self.sdk("gcs", "download", "--bucket", bucket, "--name", obj, "--file", o), None),
            "download: SDK TransferManager.downloadFileInChunks (32 MiB, 5)":
                (lambda rep: self.sdk("gcs", "download", "--bucket", bucket, "--name", obj, "--file", o,
                                      "--mode", "chunks"), None),
            "download: curl GET (media URL; floor)":
                (lambda rep: ["curl", "-sf", "-o", o, "%s/download/storage/v1/b/%s/o/%s?alt=media" % (
                    endpoint, bucket, quoted(obj))], None),
            up + ": GCS tier, part_size 512 MiB (one resumable session, one PUT)":
                (lambda rep: self.ours("gcs", "upload", endpoint, bucket, up_hash(rep), upload_source,
                                       "--part-size", str(512 << 20)),
                 lambda rep: delete("local/%s.tar" % up_hash(rep))),
            up + ": SDK bucket.upload (default: resumable, one PUT)":
                (lambda rep: self.sdk("gcs", "upload", "--bucket", bucket, "--name", "sdk-up/%d" % rep,
                                      "--file", upload_source), lambda rep: delete("sdk-up/%d" % rep)),
            up + ": curl POST (uploadType=media; floor)":
                (lambda rep: ["curl", "-sf", "-o", "/dev/null", "-X", "POST", "-T", upload_source, "-H", "Expect:",
                              "%s/upload/storage/v1/b/%s/o?uploadType=media&name=curl-up%%2F%d" % (
                                  endpoint, bucket, rep)], lambda rep: delete("curl-up/%d" % rep)),
        }
        if upload_size <= 128 << 20:  # the emulator's multipart cap (above)
            variants[up + ": SDK bucket.upload (resumable: false: multipart)"] = (
                lambda rep: self.sdk("gcs", "upload", "--bucket", bucket, "--name", "sdk-mp/%d" % rep,
                                     "--file", upload_source, "--mode", "multipart"),
                lambda rep: delete("sdk-mp/%d" % rep))
        self.measure("gcs", a.gcs_pid, variants, env,
                     lambda label: upload_size if label.startswith("upload") else size)
        delete(obj)
        return list(variants)


def report(results):
    """Prints the Markdown tables of docs/BENCHMARKS-cloud.md from the runs (the variants in the order they were
    defined, which is the order of the first round's records once sorted back)."""
    tables = {}
    for r in results:
        tables.setdefault(r["emulator"], [])
        if r["variant"] not in tables[r["emulator"]]:
            tables[r["emulator"]].append(r["variant"])
    for variants in tables.values():
        variants.sort(key=lambda v: (not v.startswith("download"), "tier" not in v, v))
    reps = max(r["rep"] for r in results) + 1

    def rows(emulator, variant):
        return [r for r in results if r["emulator"] == emulator and r["variant"] == variant]

    def mbps(r):
        return r["bytes"] / 1e6 / r["seconds"]

    def per_gb(field):
        return lambda r: r[field] / (r["bytes"] / 1e9)

    def med(emulator, variant, f):
        return statistics.median(f(r) for r in rows(emulator, variant))

    print("| emulator | variant | MB/s: median (min-max) of %d | client CPU s/GB (in-process) | client CPU s/GB "
          "(whole process) | emulator CPU s/GB | emulator cores busy |" % reps)
    print("|---|---|---|---|---|---|---|")
    for emulator, variants in tables.items():
        for v in variants:
            speeds = [mbps(r) for r in rows(emulator, v)]
            print("| %s | %s | %.1f (%.1f-%.1f) | %.2f | %.2f | %.2f | %.2f |" % (
                emulator, v, statistics.median(speeds), min(speeds), max(speeds),
                med(emulator, v, per_gb("cpu_seconds")), med(emulator, v, per_gb("process_cpu_seconds")),
                med(emulator, v, per_gb("server_cpu_seconds")),
                med(emulator, v, lambda r: r["server_cpu_seconds"] / r["wall_seconds"])))
    print()
    print("| emulator | ratio of median throughputs, same run | value |")
    print("|---|---|---|")
    for emulator, variants in tables.items():
        ours = [v for v in variants if "tier" in v]
        theirs = [v for v in variants if "SDK" in v or "curl" in v]
        for a in ours:
            for b in theirs:
                if a.split(":")[0] != b.split(":")[0]:
                    continue
                print("| %s | %s / %s | %.2fx |" % (emulator, a.split(": ", 1)[1], b.split(": ", 1)[1],
                                                  med(emulator, a, mbps) / med(emulator, b, mbps)))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--report", metavar="JSON", help="only print the tables of a run's --json file")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--size-mib", type=int, default=256)
    p.add_argument("--gcs-upload-mib", type=int, default=0, help="default: --size-mib")
    p.add_argument("--bench-bin")
    p.add_argument("--node", default="node")
    p.add_argument("--work")
    p.add_argument("--json")
    p.add_argument("--azurite-pid", type=int)
    p.add_argument("--gcs-pid", type=int)
    args = p.parse_args()
    if args.report:
        with open(args.report) as f:
            report(json.load(f))
        return
    if not (args.bench_bin and args.work and args.json):
        p.error("--bench-bin, --work and --json are required (unless --report)")

    os.makedirs(args.work, exist_ok=True)
    args.gcs_upload_mib = args.gcs_upload_mib or args.size_mib
    size, upload_size = args.size_mib << 20, args.gcs_upload_mib << 20
    source = os.path.join(args.work, "source.bin")
    make_file(source, args.size_mib)
    upload_source = os.path.join(args.work, "upload.bin")
    make_file(upload_source, args.gcs_upload_mib)
    bench = Bench(args)
    if args.azurite_pid:
        bench.azurite(source, size)
    if args.gcs_pid:
        bench.gcs(source, size, upload_source, upload_size)
    with open(args.json, "w") as f:
        json.dump(bench.results, f, indent=1)
    report(bench.results)


if __name__ == "__main__":
    main()
