#!/usr/bin/env python3
"""F14: the soak run. Zipf-distributed reads from several long-lived reader processes through one folder tier
whose max_bytes holds a third of the shards, against a loopback origin (tests/support/http_fault_server.py), with
random SIGKILLs of the readers (each restarted at once), for --minutes (30 by default; CI runs 2, through
tests/e2e/test_soak.sh).

Measured, and checked against bounds (exit 1 when one is broken, so that CI fails):
  - wrong bytes: every read hashes the bytes it was served (bench/soak_reader.cpp)          bound: 0
  - quota overshoot: the committed entries' bytes above max_bytes, sampled every 20 ms      bound: 1 shard
  - fd growth: each reader's open descriptors, counted by itself between two reads, after its
    100th read against after its last                                                       bound: 0
  - staging-file growth: files in .staging/ at the end, after every reader has stopped,
    beyond those of readers killed in the last seconds                                       bound: 0 growth
  - hit ratio: the readers' hits over their reads, beside an LRU simulation of the same
    access trace (the same budget, low watermark 0.9)                                       bound: >= LRU - 0.15
Pure stdlib; python3 as CI has it.

Usage: bench/soak.py --datavo-reader BIN [--minutes 30] [--readers 4] [--shards 60] [--shard-kib 256]
                     [--kill-mean-s 2] [--seed 1] [--work DIR] [--json FILE]
"""
import argparse
import collections
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SERVER = os.path.join(HERE, "..", "tests", "support", "http_fault_server.py")
LOW_WATERMARK = 0.9


def start_origin(root, log):
    port_file = os.path.join(os.path.dirname(root), "origin.port")
    proc = subprocess.Popen([sys.executable, SERVER, "--root", root, "--port-file", port_file],
                            stdout=log, stderr=log)
    deadline = time.time() + 15
    while time.time() < deadline:
        if os.path.exists(port_file) and os.path.getsize(port_file) > 0:
            return proc, int(open(port_file).read().strip())
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("soak: the origin did not start")


def fd_count(pid):
    try:
        return len(os.listdir("/proc/%d/fd" % pid))
    except OSError:
        return None


def entries_bytes(tier):
    total = 0
    local = os.path.join(tier, "local")
    try:
        with os.scandir(local) as it:
            for e in it:
                if e.name.endswith(".tar"):
                    try:
                        total += e.stat(follow_symlinks=False).st_size
                    except OSError:
                        pass
    except OSError:
        pass
    return total


def staging_names(tier):
    try:
        return sorted(os.listdir(os.path.join(tier, ".staging")))
    except OSError:
        return []


def lru_hit_ratio(trace, sizes, budget):
    """The hit ratio of an LRU cache of `budget` bytes (evicting to LOW_WATERMARK * budget) over `trace`."""
    cache = collections.OrderedDict()
    used = hits = 0
    for index in trace:
        if index in cache:
            hits += 1
            cache.move_to_end(index)
            continue
        cache[index] = True
        used += sizes[index]
        if used > budget:
            while used > LOW_WATERMARK * budget and len(cache) > 1:
                victim, _ = cache.popitem(last=False)
                used -= sizes[victim]
    return hits / len(trace) if trace else 0.0


class Reader:
    def __init__(self, slot, args, paths, rng):
        self.slot, self.args, self.paths, self.rng = slot, args, paths, rng
        self.proc = None
        self.started = 0.0
        self.samples = []
        self.lifetimes = []  # (fds early in life, fds late in life, seconds lived, how it ended)

    def start(self):
        seed = self.rng.randrange(1 << 30)
        self.proc = subprocess.Popen(
            [self.args.datavo_reader, "--config", self.paths["config"], "--manifest", self.paths["manifest"],
             "--trace", os.path.join(self.paths["work"], "trace.%d" % self.slot), "--seed", str(seed),
             "--zipf-s", str(self.args.zipf_s)],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(self.paths["work"], "reader.%d.err" % self.slot), "a"),
            env=dict(os.environ, DATAVO_LOG_LEVEL=self.args.reader_log_level))
        self.started = time.monotonic()
        self.samples = []

    def sample(self):
        if self.proc is None or self.proc.poll() is not None:
            return
        n = fd_count(self.proc.pid)
        if n is None:
            return
        if time.monotonic() - self.started >= 2.0:
            self.samples.append(n)

    def floors(self):
        # A read in flight holds a few descriptors (sockets, the lock, the staging file, the entry) for a moment;
        # a leak raises the floor. The floor of the first quarter of the samples against that of the last.
        if len(self.samples) < 8:
            return None, None
        quarter = len(self.samples) // 4
        return min(self.samples[:quarter]), min(self.samples[-quarter:])

    def end(self, how):
        if self.proc is None:
            return
        if how == "kill":
            self.proc.send_signal(signal.SIGKILL)
        else:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        early, late = self.floors()
        self.lifetimes.append((early, late, time.monotonic() - self.started, how))
        self.proc = None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datavo-reader", required=True, help="the datavo_soak_reader binary")
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--readers", type=int, default=4)
    parser.add_argument("--shards", type=int, default=60)
    parser.add_argument("--shard-kib", type=int, default=256)
    parser.add_argument("--capacity-fraction", type=float, default=1 / 3, help="max_bytes / the shards' total")
    parser.add_argument("--zipf-s", type=float, default=1.0)
    parser.add_argument("--kill-mean-s", type=float, default=2.0, help="mean time between two SIGKILLs")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--reader-log-level", default="error", help="DATAVO_LOG_LEVEL of the readers (their stderr is kept in the work directory)")
    parser.add_argument("--work", help="working directory (default: a fresh temporary one, removed at the end)")
    parser.add_argument("--json", help="write the figures to this file as JSON")
    args = parser.parse_args(argv)

    rng = random.Random(args.seed)
    work = args.work or tempfile.mkdtemp(prefix="datavo-soak.", dir=os.environ.get("TMPDIR", "/var/tmp"))
    os.makedirs(work, exist_ok=True)
    www, tier = os.path.join(work, "www"), os.path.join(work, "tier")
    os.makedirs(www, exist_ok=True)
    shard_bytes = args.shard_kib * 1024
    budget = int(args.shards * shard_bytes * args.capacity_fraction)
    log = open(os.path.join(work, "origin.log"), "w")
    origin, port = start_origin(www, log)
    readers = []
    try:
        sizes, lines = [], []
        for i in range(args.shards):
            data = rng.randbytes(shard_bytes)
            with open(os.path.join(www, "s%d.bin" % i), "wb") as f:
                f.write(data)
            h = hashlib.sha256(("soak/%d/%d" % (args.seed, i)).encode()).hexdigest()
            lines.append("%s %s %d http://127.0.0.1:%d/s%d.bin\n" % (h, hashlib.sha256(data).hexdigest(),
                                                                    shard_bytes, port, i))
            sizes.append(shard_bytes)
        paths = {"work": work, "manifest": os.path.join(work, "manifest"), "config": os.path.join(work, "shards.yaml")}
        with open(paths["manifest"], "w") as f:
            f.writelines(lines)
        with open(paths["config"], "w") as f:
            f.write("tiers:\n  - name: soak\n    path: %s\n    max_bytes: %d\n" % (tier, budget))
        print("# soak: %d readers, %d shards of %d KiB (%.1f MiB) over a tier of %.1f MiB (%.2fx), Zipf s=%.2f, "
              "a SIGKILL every %.1f s on average, %.1f minutes"
              % (args.readers, args.shards, args.shard_kib, args.shards * shard_bytes / 2**20, budget / 2**20,
                 args.shards * shard_bytes / budget, args.zipf_s, args.kill_mean_s, args.minutes), flush=True)

        readers = [Reader(slot, args, paths, rng) for slot in range(args.readers)]
        for r in readers:
            r.start()
        overshoot = 0
        max_staging = 0
        kills = 0
        stop = threading.Event()

        def monitor():
            nonlocal overshoot, max_staging
            while not stop.is_set():
                overshoot = max(overshoot, entries_bytes(tier) - budget)
                max_staging = max(max_staging, len(staging_names(tier)))
                for r in readers:
                    r.sample()
                time.sleep(0.02)

        watcher = threading.Thread(target=monitor, daemon=True)
        watcher.start()
        end = time.monotonic() + args.minutes * 60
        next_kill = time.monotonic() + rng.expovariate(1 / args.kill_mean_s)
        last_kill = 0.0
        while time.monotonic() < end:
            time.sleep(0.01)
            for r in readers:
                if r.proc is not None and r.proc.poll() is not None:  # died on its own: a crash
                    early, late = r.floors()
                    r.lifetimes.append((early, late, time.monotonic() - r.started, "exit %d" % r.proc.returncode))
                    r.proc = None
                    r.start()
            if time.monotonic() >= next_kill:
                victim = rng.choice(readers)
                victim.end("kill")
                victim.start()
                kills += 1
                last_kill = time.monotonic()
                next_kill = last_kill + rng.expovariate(1 / args.kill_mean_s)
        for r in readers:
            r.end("term")
        stop.set()
        watcher.join()
        final_overshoot = entries_bytes(tier) - budget
        leftover = staging_names(tier)

        # The trace: every finished read of every reader, in time order.
        records = []
        for slot in range(args.readers):
            try:
                with open(os.path.join(work, "trace.%d" % slot)) as f:
                    for line in f:
                        parts = line.split()
                        if len(parts) == 6:
                            records.append((int(parts[0]), int(parts[1]), parts[2], parts[3], int(parts[4]),
                                            int(parts[5])))
            except OSError:
                pass
        records.sort()
        served = [r for r in records if r[2] != "error"]
        errors = len(records) - len(served)
        wrong = sum(1 for r in served if r[3] != "ok")
        hits = sum(1 for r in served if r[2] == "hit")
        measured = hits / len(served) if served else 0.0
        simulated = lru_hit_ratio([r[1] for r in served], sizes, budget)
        crashes = [lt for r in readers for lt in r.lifetimes if lt[3].startswith("exit")]
        # Each reader process counts its descriptors between two reads: the count after its first 100 reads (libcurl's
        # connection cache is set up by then) against its last.
        by_pid = collections.defaultdict(list)
        for rec in records:
            by_pid[rec[4]].append(rec[5])
        growth = [fds[-1] - fds[100] for fds in by_pid.values() if len(fds) > 200]
        fd_growth = max(growth) if growth else 0
        # Staging files left by readers killed mid-download are a dead writer's partial download: kept for the
        # next fetch of that shard to continue. Growth is what is left beyond one per reader.
        staging_growth = max(0, len(leftover) - args.readers)

        figures = {
            "minutes": args.minutes, "readers": args.readers, "shards": args.shards, "shard_bytes": shard_bytes,
            "max_bytes": budget, "reads": len(served), "read_errors": errors, "kills": kills,
            "crashes": len(crashes), "wrong_bytes_reads": wrong,
            "quota_overshoot_bytes": max(0, overshoot), "quota_overshoot_shards": max(0, overshoot) / shard_bytes,
            "final_overshoot_bytes": max(0, final_overshoot), "fd_growth": fd_growth,
            "reader_lifetimes_measured": len(growth), "max_staging_files": max_staging,
            "staging_left": len(leftover), "staging_growth": staging_growth,
            "hit_ratio": measured, "lru_hit_ratio": simulated,
        }
        print("# soak: %d reads (%d errors), %d SIGKILLs, %d crashes, %d reads with wrong bytes"
              % (len(served), errors, kills, len(crashes), wrong))
        print("# soak: quota overshoot %d bytes (%.2f shards) at most, %d bytes at the end; max_bytes %d"
              % (max(0, overshoot), max(0, overshoot) / shard_bytes, max(0, final_overshoot), budget))
        print("# soak: fd growth %d over %d reader lifetimes; staging files: at most %d at once, %d left at the end"
              % (fd_growth, len(growth), max_staging, len(leftover)))
        print("# soak: hit ratio %.3f, an LRU simulation of the same trace %.3f (%.2fx)"
              % (measured, simulated, measured / simulated if simulated else 0.0))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(figures, f, indent=1)

        broken = []
        if wrong:
            broken.append("%d reads served wrong bytes" % wrong)
        if crashes:
            broken.append("%d readers died on their own: %s" % (len(crashes), [c[3] for c in crashes][:5]))
        if overshoot > shard_bytes:
            broken.append("quota overshoot %d bytes > 1 shard (%d)" % (overshoot, shard_bytes))
        if final_overshoot > 0:
            broken.append("the tier ends %d bytes over max_bytes" % final_overshoot)
        if fd_growth > 0:
            broken.append("a reader's descriptors grew by %d" % fd_growth)
        if staging_growth > 0:
            broken.append("%d staging files left at the end (%s...)" % (len(leftover), leftover[:3]))
        if not served or errors > len(served) // 100:
            broken.append("%d of %d reads failed" % (errors, len(records)))
        if measured < simulated - 0.15:
            broken.append("hit ratio %.3f is far below the LRU simulation's %.3f" % (measured, simulated))
        for b in broken:
            print("FAIL - soak: " + b)
        print("soak: %s" % ("all bounds held" if not broken else "%d bounds broken" % len(broken)))
        return 1 if broken else 0
    finally:
        for r in readers:
            if r.proc is not None:
                r.proc.kill()
                r.proc.wait()
        origin.terminate()
        origin.wait()
        log.close()
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
