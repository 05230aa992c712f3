#!/usr/bin/env python3
"""The main-job benchmarks of docs/BENCHMARKS-main-job.md: fetch, iteration and memory of the origin/client path.

    bench_main_job.py --datavo BIN --iterate BIN [--fetch-model BIN] --work DIR [--reps 5] [--items 1,2,3,4,5,6]
                      [--json OUT]

Usually run through bench/main_job/run_all.sh, which builds the programs, picks DIR on the real disk and removes it.

Items (the numbering of the issue):
  1. cold fetch of one ~256 MiB shard from `datavo serve` on loopback: `datavo warm` and `datavo cache fetch` into a
     fresh cache vs the floor of a verified download, `curl URL | tee FILE | sha256sum` (issue 7, section 5), and vs
     `curl -o /dev/null` and `curl -o FILE` (same disk) of the same ticket URL, with the CPU of the client and of the
     origin for each; with --fetch-model,
     item 1b: fetch_model (libcurl + OpenSSL, no Datavo) with one switch per design choice of Datavo's fetch path;
  2. iterating the samples of that shard, warm in the page cache: SampleIterator over the mmapped cached tar and
     SampleStream over the warm cache (first byte of each field / every byte summed) vs `cat SHARD > /dev/null`;
  3. the same iteration vs Python's tarfile (`for m in tf: tf.extractfile(m).read()`), samples/s;
  4. peak RSS of `datavo warm` over two ~1 GiB shards (/usr/bin/time -v) and of the server (VmHWM);
  5. `datavo read` end to end over a dataset of 4000 samples in 16 shards: cold pass, then warm pass;
  6. a cold `datavo read` of 40 small shards (10 samples each) vs one `curl` fetching the same shards: the cost of a
     ticket and a download per shard on kept-alive connections.

Every comparison is measured in the same run, the variants of one item interleaved and their order rotated from one
repetition to the next, so that the noise of a shared machine falls on all of them alike. Tables give medians of
--reps repetitions (with min-max). Wall times are taken from outside each process (fork to exit) unless a table says
otherwise.

Nothing outside DIR is written: HOME points inside it, every DATAVO_* variable of the caller is dropped, and each
cache is a fresh folder tier named by an explicit --config. The stores are deleted as soon as their item is done;
run_all.sh removes DIR at the end.
"""
import argparse
import json
import os
import re
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import time
import urllib.request

MiB = 1 << 20
KEYS = ["audio.wav", "transcript.txt"]


# --- processes ----------------------------------------------------------------------------------------------------

class Run:
    """One finished process: wall seconds (fork to reap), exit status, output; with rss=True also its peak RSS in
    KiB and its CPU seconds (user + system), from /usr/bin/time."""

    def __init__(self, wall, status, out, err, maxrss_kb=None, cpu=None):
        self.wall, self.status, self.out, self.err = wall, status, out, err
        self.maxrss_kb, self.cpu = maxrss_kb, cpu

    def json(self):
        return json.loads(self.out.strip().splitlines()[-1])


TIME = "/usr/bin/time"


def run(cmd, env, work, stdout_path=None, check=True, rss=False):
    """Runs cmd with stdout/stderr to files (no pipe can fill up), timed from Popen to reaping it.

    rss=True runs it under `/usr/bin/time -f "%U %S %M"` for its CPU time and peak RSS: getrusage/wait4 of a child
    forked from this Python process would count the forked copy of the interpreter in its peak RSS. The wrapper's
    own fork+exec (about a millisecond) is then part of the wall time, so every variant of one comparison is run the
    same way.
    """
    out_path = stdout_path or os.path.join(work, "last.stdout")
    err_path = os.path.join(work, "last.stderr")
    rss_path = os.path.join(work, "last.rss")
    if rss:
        cmd = [TIME, "-f", "%U %S %M", "-o", rss_path] + cmd
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        proc.wait()
        wall = time.perf_counter() - start
    text = "" if stdout_path == os.devnull else open(out_path, errors="replace").read()
    errtext = open(err_path, errors="replace").read()
    if check and proc.returncode != 0:
        raise SystemExit(f"command failed ({proc.returncode}): {' '.join(cmd)}\n{text[-2000:]}\n{errtext[-2000:]}")
    if not rss:
        return Run(wall, proc.returncode, text, errtext)
    user, system, maxrss = open(rss_path).read().split()[-3:]
    return Run(wall, proc.returncode, text, errtext, int(maxrss), float(user) + float(system))


def sync(path=None):
    """Flushes dirty pages so that one measurement's writeback does not land in the next one."""
    subprocess.run(["sync"] + ([path] if path else []), check=True)


def proc_status_kb(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


class Server:
    """`datavo serve STORE` on an ephemeral loopback port."""

    def __init__(self, datavo, store, env, work, name):
        self.port_file = os.path.join(work, name + ".port")
        self.log = open(os.path.join(work, name + ".log"), "wb")
        self.proc = subprocess.Popen([datavo, "serve", store, "--port-file", self.port_file, "--quiet"], env=env,
                                     stdout=self.log, stderr=self.log, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while not os.path.exists(self.port_file):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"datavo serve {store} did not start; see {self.log.name}")
            time.sleep(0.05)
        self.url = "http://127.0.0.1:" + open(self.port_file).read().strip()

    def ticket(self, dataset, revision, shard_index, keys=KEYS):
        name, split = dataset.split("/")
        body = json.dumps({"dataset": name, "split": split, "revision": revision, "shard_index": shard_index,
                           "keys": keys}).encode()
        req = urllib.request.Request(self.url + "/v1/stream-tickets", data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=600) as resp:
            ticket = json.load(resp)
        if not ticket["url"].startswith("http"):
            ticket["url"] = self.url + ticket["url"]
        return ticket

    def hwm_kb(self):
        return proc_status_kb(self.proc.pid, "VmHWM")

    def rss_kb(self):
        return proc_status_kb(self.proc.pid, "VmRSS")

    def cpu_seconds(self):
        """User + system CPU of the server so far (/proc/PID/stat fields 14 and 15, in clock ticks)."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def reset_hwm(self):
        # Writing 5 to clear_refs resets the peak RSS (VmHWM) to the current RSS (proc(5)).
        with open(f"/proc/{self.proc.pid}/clear_refs", "w") as f:
            f.write("5")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


# --- statistics and tables ----------------------------------------------------------------------------------------

def med(values):
    return statistics.median(values)


def spread(values, fmt):
    return f"{fmt(med(values))} ({fmt(min(values))}–{fmt(max(values))})"


def f0(x):
    return f"{x:,.0f}"


def f1(x):
    return f"{x:,.1f}"


def f2(x):
    return f"{x:.2f}"


def f3(x):
    return f"{x:.3f}"


def table(headers, rows):
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def rotated(items, rep):
    k = rep % len(items)
    return items[k:] + items[:k]


# --- the benchmark ----------------------------------------------------------------------------------------------

class Bench:
    def __init__(self, args):
        self.args = args
        self.datavo = os.path.abspath(args.datavo)
        self.iterate = os.path.abspath(args.iterate)
        self.model = os.path.abspath(args.fetch_model) if args.fetch_model else None
        self.work = os.path.abspath(args.work)
        self.here = os.path.dirname(os.path.abspath(__file__))
        self.reps = args.reps
        self.results = {"reps": self.reps}
        self.report = []
        os.makedirs(self.work, exist_ok=True)
        home = os.path.join(self.work, "home")
        os.makedirs(home, exist_ok=True)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("DATAVO_")}
        self.env["HOME"] = home
        self.env["TMPDIR"] = self.work
        self.servers = []

    # helpers ---------------------------------------------------------------------------------------------------

    def path(self, *parts):
        return os.path.join(self.work, *parts)

    def log(self, text):
        print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)

    def emit(self, text):
        self.report.append(text)
        print(text, flush=True)

    def fresh_cache(self, name, durability=None):
        """A fresh folder tier and manifest cache; returns (config path, manifest dir, cache dir)."""
        base = self.path(name)
        shutil.rmtree(base, ignore_errors=True)
        os.makedirs(base)
        cache = os.path.join(base, "cache")
        config = os.path.join(base, "shards.yaml")
        with open(config, "w") as f:
            f.write(f"tiers:\n  - name: bench\n    path: {cache}\n")
            if durability:
                f.write(f"    durability: {durability}\n")
        return config, os.path.join(base, "manifests"), cache

    def client_env(self, server, config, manifests):
        env = dict(self.env)
        env["DATAVO_SERVER"] = server.url
        env["DATAVO_MANIFEST_CACHE_DIR"] = manifests
        env["DATAVO_SHARD_CACHE_CONFIG"] = config
        return env

    def gen(self, out, samples, wav_bytes):
        run([sys.executable, os.path.join(self.here, "gen_samples.py"), out, "--samples", str(samples),
             "--wav-bytes", str(wav_bytes)], self.env, self.work)

    def pack(self, source, store, dataset, per_shard):
        r = run([self.datavo, "--json", "pack", source, "--root", store, "--dataset", dataset,
                 "--samples-per-shard", str(per_shard)], self.env, self.work)
        return r.json()

    def start_server(self, store, name):
        server = Server(self.datavo, store, self.env, self.work, name)
        self.servers.append(server)
        return server

    def cached_tar(self, cache):
        for root, _, files in os.walk(cache):
            if os.path.basename(root).startswith("."):
                continue
            for name in files:
                if name.endswith(".tar"):
                    return os.path.join(root, name)
        raise SystemExit(f"no cached shard under {cache}")

    # machine ---------------------------------------------------------------------------------------------------

    def machine(self):
        model = "?"
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
        mem = proc_mem_total_gib()
        fs = subprocess.run(["findmnt", "-n", "-o", "FSTYPE,SOURCE", "-T", self.work], capture_output=True,
                            text=True).stdout.strip()
        curl = subprocess.run(["curl", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
        commit = subprocess.run(["git", "-C", self.here, "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True).stdout.strip()
        # Other engineers edit the same tree: say whether the product sources built differ from the commit.
        dirty = subprocess.run(["git", "-C", self.here, "status", "--porcelain", "--", "../../src", "../../include",
                                "../../cli"], capture_output=True, text=True).stdout.strip()
        if dirty:
            commit += f" plus uncommitted changes to {len(dirty.splitlines())} files under src/, include/, cli/"
        info = {
            "cpu": model, "cores": os.cpu_count(), "mem_gib": mem, "kernel": platform.release(),
            "work_fs": fs, "curl": curl, "python": platform.python_version(), "commit": commit,
            "loadavg_start": os.getloadavg(),
        }
        self.results["machine"] = info
        self.emit("## Machine\n")
        self.emit(table(["", ""], [
            ["CPU", f"{model}, {info['cores']} cores (`nproc`)"], ["memory", f"{mem:.1f} GiB"],
            ["kernel", info["kernel"]], ["work dir", f"`{self.work}` on {fs}"], ["curl", curl],
            ["python", info["python"]], ["commit", commit],
            ["load average at start", " / ".join(f"{x:.2f}" for x in info["loadavg_start"])],
        ]))
        self.emit("")

    # setup of the ~256 MiB datasets (items 1, 2, 3, 5) ---------------------------------------------------------

    def setup_small(self):
        self.log("generating 4000 samples (64 KiB audio.wav + 100 B transcript.txt)")
        src = self.path("src-small")
        self.gen(src, 4000, 64 * 1024)
        store = self.path("store-small")
        one = self.pack(src, store, "bench/one", 4000)
        many = self.pack(src, store, "bench/many", 250)
        shutil.rmtree(src)
        self.small_store = store
        self.server = self.start_server(store, "serve-small")
        # Materialise every key-group tar once (the first ticket of a shard builds it), then read them into the page
        # cache: every item measures a warm origin, so that only the client side differs between the variants.
        self.one_ticket = self.server.ticket("bench/one", one["revision"], 0)
        self.one_revision = one["revision"]
        self.many_revision = many["revision"]
        for i in range(many["total_shards"]):
            self.server.ticket("bench/many", many["revision"], i)
        for root, _, files in os.walk(os.path.join(store, "tars")):
            for name in files:
                run(["cat", os.path.join(root, name)], self.env, self.work, stdout_path=os.devnull)
        self.log(f"bench/one: 1 shard of {self.one_ticket['size'] / MiB:.1f} MiB; bench/many: "
                 f"{many['total_shards']} shards")

    # item 1 ----------------------------------------------------------------------------------------------------

    # Configurations of fetch_model (item 1b): (label, flags). The fourth was Datavo's first design (libcurl's
    # default 16 KiB buffer, SHA-256 inline on the receiving thread, fdatasync before the commit); the last two are
    # its current one, with and without the fdatasync (`durability: fsync`, the default, and `durability: none`).
    MODELS = [
        ("model: 16 KiB buffer, no hash, no sync (what `curl -o FILE` does)", ["--hash", "none", "--sync", "none"]),
        ("model: 16 KiB, inline SHA-256, no sync", ["--hash", "inline", "--sync", "none"]),
        ("model: 16 KiB, no hash, fdatasync", ["--hash", "none", "--sync", "fdatasync"]),
        ("model: 16 KiB, inline SHA-256, fdatasync (Datavo's design)", ["--hash", "inline", "--sync", "fdatasync"]),
        ("model: 512 KiB buffer, inline SHA-256, fdatasync",
         ["--buffer", str(512 * 1024), "--hash", "inline", "--sync", "fdatasync"]),
        ("model: 512 KiB, SHA-256 on a 2nd thread, sync_file_range every 8 MiB + fdatasync",
         ["--buffer", str(512 * 1024), "--hash", "thread", "--sync", "range"]),
        ("model: 512 KiB, SHA-256 on a 2nd thread, no sync",
         ["--buffer", str(512 * 1024), "--hash", "thread", "--sync", "none"]),
    ]
    NO_SYNC = " (durability: none)"
    # The floor of a verified download (issue 7, section 5): the bytes written to a file and hashed on the way.
    FLOOR = "curl | tee FILE | sha256sum"
    # The same pipeline with OpenSSL's SHA-256, the implementation Datavo uses (coreutils' sha256sum has its own,
    # without the SHA-NI instructions): not the goal's floor, the like-for-like one.
    FLOOR_OPENSSL = "curl | tee FILE | openssl dgst -sha256"
    PIPELINES = {FLOOR: 'curl -sSf "$1" | tee "$2" | sha256sum',
                 FLOOR_OPENSSL: 'curl -sSf "$1" | tee "$2" | openssl dgst -sha256'}

    def item1(self):
        self.log("item 1: cold fetch of one shard, datavo vs curl (and item 1b: fetch_model)")
        size = self.one_ticket["size"]
        sha = self.one_ticket["sha256"]
        out_file = self.path("curl-out.tar")
        store_tar = os.path.join(self.small_store, "tars", self.one_ticket["content_hash"] + ".tar")
        main = ["curl -o /dev/null", "curl -o FILE", self.FLOOR, self.FLOOR_OPENSSL, "datavo warm",
                "datavo cache fetch", "datavo warm" + self.NO_SYNC, "datavo cache fetch" + self.NO_SYNC,
                "openssl dgst -sha256"]
        models = [label for label, _ in self.MODELS]
        variants = main + (models if self.model else [])
        synced = {"curl -o FILE": "curl -o FILE + sync FILE", self.FLOOR: self.FLOOR + " + sync FILE"}
        walls = {v: [] for v in variants + ["sync FILE"] + list(synced.values())}
        rss = {v: [] for v in variants}
        cpu = {v: [] for v in variants}
        origin_cpu = {v: [] for v in variants}
        for rep in range(self.reps):
            for v in rotated(variants, rep):
                ticket = self.server.ticket("bench/one", self.one_revision, 0)
                no_sync = v.endswith(self.NO_SYNC)
                config, manifests, cache = self.fresh_cache("item1-cache", "none" if no_sync else None)
                env = self.client_env(self.server, config, manifests)
                v_cmd = v[:-len(self.NO_SYNC)] if no_sync else v
                if os.path.exists(out_file):
                    os.unlink(out_file)
                sync()
                origin_before = self.server.cpu_seconds()
                if v == "curl -o /dev/null":
                    r = run(["curl", "-sSf", "-o", "/dev/null", ticket["url"]], self.env, self.work, rss=True)
                elif v == "curl -o FILE":
                    r = run(["curl", "-sSf", "-o", out_file, ticket["url"]], self.env, self.work, rss=True)
                    if os.path.getsize(out_file) != size:
                        raise SystemExit("curl wrote a short file")
                elif v in self.PIPELINES:
                    r = run(["bash", "-o", "pipefail", "-c", self.PIPELINES[v], "floor", ticket["url"], out_file],
                            self.env, self.work, rss=True)
                    # sha256sum prints "HEX  -", openssl dgst "SHA2-256(stdin)= HEX".
                    digest = next((t for t in r.out.split() if re.fullmatch(r"[0-9a-f]{64}", t)), "")
                    if os.path.getsize(out_file) != size or digest != sha:
                        raise SystemExit(f"{v}: another file or digest than the ticket's: {r.out!r}")
                elif v_cmd == "datavo warm":
                    r = run([self.datavo, "--config", config, "--json", "warm", "bench/one", "--key", KEYS[0],
                             "--key", KEYS[1]], env, self.work, rss=True)
                    if r.json()["origin"]["size_bytes"] != size:
                        raise SystemExit("datavo warm did not fetch the shard from the origin")
                elif v_cmd == "datavo cache fetch":
                    r = run([self.datavo, "--config", config, "--json", "cache", "fetch", ticket["content_hash"],
                             "--url", ticket["url"], "--sha256", sha, "--size", str(size)], env, self.work, rss=True)
                elif v == "openssl dgst -sha256":
                    r = run(["openssl", "dgst", "-sha256", store_tar], self.env, self.work, rss=True)
                    if r.out.split()[-1] != sha:
                        raise SystemExit("openssl gives another SHA-256 than the ticket")
                else:
                    flags = dict(self.MODELS)[v]
                    r = run([self.model, ticket["url"], out_file] + flags, self.env, self.work, rss=True)
                    j = r.json()
                    if j["bytes"] != size or (j["sha256"] and j["sha256"] != sha):
                        raise SystemExit(f"fetch_model {flags} got other bytes: {j}")
                origin_cpu[v].append(self.server.cpu_seconds() - origin_before)
                if v in synced:
                    # Untimed by the row itself: `sync FILE` afterwards, the durability Datavo's default pays.
                    s = run(["sync", out_file], self.env, self.work)
                    walls[synced[v]].append(r.wall + s.wall)
                    if v == "curl -o FILE":
                        walls["sync FILE"].append(s.wall)
                walls[v].append(r.wall)
                rss[v].append(r.maxrss_kb)
                cpu[v].append(r.cpu)
        shutil.rmtree(self.path("item1-cache"), ignore_errors=True)
        if os.path.exists(out_file):
            os.unlink(out_file)
        mbps = {v: [size / 1e6 / w for w in ws] for v, ws in walls.items() if v != "sync FILE"}
        self.results["item1"] = {"size": size, "walls": walls, "maxrss_kb": rss, "cpu_seconds": cpu,
                                 "origin_cpu_seconds": origin_cpu}
        ref = med(mbps["curl -o FILE"])
        null = med(mbps["curl -o /dev/null"])
        floor = med(mbps[self.FLOOR])

        def paired(v, base):
            # Repetition by repetition: the two runs were minutes apart at most, usually adjacent.
            return med([b / w for b, w in zip(walls[base], walls[v])])

        def row(v, label):
            return [label, spread(walls[v], f3), spread(mbps[v], f0), f2(med(mbps[v]) / floor),
                    f2(paired(v, self.FLOOR)), f2(med(mbps[v]) / ref), f2(paired(v, "curl -o FILE")),
                    f3(med(cpu[v])) if v in cpu else "—", f3(med(origin_cpu[v])) if v in origin_cpu else "—",
                    f1(med(rss[v]) / 1024) if v in rss else "—"]

        headers = ["command", "wall s, median (min–max)", "MB/s, median (min–max)", f"vs `{self.FLOOR}`",
                   "paired", "vs `curl -o FILE`", "paired", "client CPU s", "origin CPU s", "peak RSS MiB"]
        rows = [row(v, f"`{v}`") for v in ["curl -o /dev/null", "curl -o FILE", "curl -o FILE + sync FILE",
                                            self.FLOOR, self.FLOOR + " + sync FILE", self.FLOOR_OPENSSL,
                                            "datavo warm", "datavo cache fetch"]]
        rows += [row(v, f"`{v[:-len(self.NO_SYNC)]}`, `durability: none`")
                 for v in ["datavo warm" + self.NO_SYNC, "datavo cache fetch" + self.NO_SYNC]]
        rows.append(row("openssl dgst -sha256", "reference: `openssl dgst -sha256` of the origin's tar (no fetch)"))
        self.emit(f"## 1. Cold fetch of one {size / MiB:.1f} MiB shard from `datavo serve` on loopback\n")
        self.emit(f"{self.reps} repetitions; the origin's tar is warm in the page cache; each datavo run starts with "
                  "an empty cache (and, for `warm`, an empty manifest cache); `sync` before every run. `datavo warm` "
                  "includes process start, the manifest and ticket requests; curl and `cache fetch` get a fresh "
                  "ticket URL made before the timed run. The floor of a verified download is "
                  f"`{self.PIPELINES[self.FLOOR]}` (bash -o pipefail; the digest and the file's size are checked "
                  "after each run); the same with `openssl dgst -sha256` is beside it. `... + sync FILE` adds "
                  "the time of a `sync FILE` after the command (with the default `durability: fsync`, datavo "
                  "fdatasyncs before it commits; the `durability: none` rows do not). Client CPU s is user + system "
                  "time of the command and its children (`/usr/bin/time`), which the load of a shared machine does "
                  "not inflate; origin CPU s is what `datavo serve` used meanwhile (/proc/PID/stat). The last row is not a "
                  "fetch: it is the cost of the SHA-256 that datavo verifies every download with, alone. \"vs\" "
                  "columns are throughput ratios: of the medians, and \"paired\", the median over the repetitions of "
                  "the ratio within one repetition.\n")
        self.emit(table(headers, rows))
        self.emit("")
        goal = []
        for v, like in (("datavo warm", self.FLOOR + " + sync FILE"), ("datavo cache fetch", self.FLOOR + " + sync FILE"),
                        ("datavo warm" + self.NO_SYNC, self.FLOOR), ("datavo cache fetch" + self.NO_SYNC, self.FLOOR)):
            r = med(mbps[v]) / floor
            goal.append([f"`{v}`", f2(r), f2(paired(v, self.FLOOR)), "**met**" if r >= 0.9 else "**NOT met**",
                         f"{f2(med(mbps[v]) / med(mbps[like]))} (`{like}`)", f2(med(mbps[v]) / ref)])
        self.emit(table(["datavo", f"vs `{self.FLOOR}` (goal ≥ 0.9x)", "paired", "goal",
                         "like for like (same durability)", "vs `curl -o FILE`"], goal))
        self.emit("")
        if self.model:
            self.emit("### 1b. Where a verified, durable download spends its time: `fetch_model` (same run)\n")
            self.emit("`fetch_model` (bench/main_job/fetch_model.cpp) is not Datavo: libcurl + OpenSSL + write(2) "
                      "with one switch per design choice of Datavo's fetch path, downloading the same ticket URL to "
                      "a file on the same disk, interleaved with the rows above.\n")
            rows = [row("curl -o FILE", "`curl -o FILE` (from the table above)"),
                    row(self.FLOOR, f"`{self.FLOOR}` (from the table above)")]
            rows += [row(v, v) for v in models]
            rows.append(row("datavo cache fetch", "`datavo cache fetch` (from the table above)"))
            rows.append(row("datavo cache fetch" + self.NO_SYNC,
                            "`datavo cache fetch`, `durability: none` (from the table above)"))
            self.emit(table(headers, rows))
            self.emit("")

    # items 2 and 3 ---------------------------------------------------------------------------------------------

    def items23(self):
        self.log("items 2 and 3: iterating the warm shard")
        config, manifests, cache = self.fresh_cache("item2-cache")
        env = self.client_env(self.server, config, manifests)
        run([self.datavo, "--config", config, "warm", "bench/one", "--key", KEYS[0], "--key", KEYS[1]], env, self.work)
        tar = self.cached_tar(cache)
        size = os.path.getsize(tar)
        sync()
        keys = ",".join(KEYS)
        rev = str(self.one_revision)
        variants = {
            "cat": ["cat", tar],
            "read": [self.iterate, "read", tar],
            "read-sum": [self.iterate, "read", tar, "sum"],
            "tar-first": [self.iterate, "tar", tar, "first"],
            "tar-sum": [self.iterate, "tar", tar, "sum"],
            "stream-first": [self.iterate, "stream", "bench/one", rev, keys, "first"],
            "stream-sum": [self.iterate, "stream", "bench/one", rev, keys, "sum"],
            "python-tarfile": [sys.executable, os.path.join(self.here, "tarfile_iterate.py"), tar],
        }
        # Two untimed passes of each: the page cache, the manifest cache and the dynamic loader's files are warm.
        for _ in range(2):
            for cmd in variants.values():
                run(cmd, env, self.work, stdout_path=os.devnull if cmd[0] == "cat" else None)
        walls = {v: [] for v in variants}
        inner = {v: [] for v in variants}
        samples = {}
        for rep in range(self.reps):
            for v in rotated(list(variants), rep):
                cmd = variants[v]
                r = run(cmd, env, self.work, stdout_path=os.devnull if v == "cat" else None)
                walls[v].append(r.wall)
                if v != "cat":
                    j = r.json()
                    inner[v].append(j["seconds"])
                    if not v.startswith("read"):
                        samples[v] = j["samples"]
        n = samples["tar-first"]
        if any(s != n for s in samples.values()):
            raise SystemExit(f"the variants disagree on the sample count: {samples}")
        self.results["item2"] = {"shard_bytes": size, "samples": n, "walls": walls, "inner_seconds": inner}
        cat = med(walls["cat"])
        read_inner = med(inner["read"])
        read_sum_inner = med(inner["read-sum"])
        labels = {
            "cat": "`cat SHARD > /dev/null`",
            "read": "in-process `read()` loop, 128 KiB buffer (cat's work, no exec of cat)",
            "read-sum": "in-process `read()` loop, every byte summed (the floor for touching every byte)",
            "tar-first": "SampleIterator over the mmapped cached tar, first byte of each field",
            "tar-sum": "SampleIterator over the mmapped cached tar, every byte summed",
            "stream-first": "SampleStream (pinned revision, warm cache), first byte of each field",
            "stream-sum": "SampleStream (pinned revision, warm cache), every byte summed",
            "python-tarfile": "Python tarfile: `for m in tf: tf.extractfile(m).read()`",
        }
        rows = []
        for v in variants:
            w = walls[v]
            rows.append([labels[v], spread(w, f3), f0(size / 1e6 / med(w)),
                         "—" if v == "cat" or v.startswith("read") else f0(n / med(w)),
                         f2(cat / med(w)), f2(med([c / x for c, x in zip(walls["cat"], w)])),
                         "—" if v == "cat" else f3(med(inner[v])),
                         "—" if v == "cat" else f2(read_inner / med(inner[v])),
                         "—" if v == "cat" else f2(read_sum_inner / med(inner[v]))])
        self.emit(f"## 2 and 3. Iterating the {n} samples of the warm {size / MiB:.1f} MiB shard\n")
        self.emit(f"{self.reps} repetitions, the shard warm in the page cache (two untimed passes of every variant "
                  "first). \"wall\" is the whole process, fork to exit, for every row (so `cat` and the programs pay "
                  "their own start-up); \"in-process\" is the time each program measures itself, from before open/"
                  "mmap to after munmap (for SampleStream: from `from_dataset`, which loads the config and the cached "
                  "manifest, to the end). MB/s is the shard's size over the wall time for every row, so the ratio to "
                  "cat is a throughput ratio.\n")
        self.emit(table(["variant", "wall s, median (min–max)", "shard MB/s", "samples/s",
                         "vs cat (wall)", "vs cat, paired", "in-process s", "vs read() (in-process)",
                         "vs read()+sum (in-process)"], rows))
        self.emit("")
        py = n / med(walls["python-tarfile"])
        py_inner = n / med(inner["python-tarfile"])
        rows = []
        for v in ["tar-first", "tar-sum", "stream-first", "stream-sum"]:
            rows.append([labels[v], f0(n / med(walls[v])), f1(n / med(walls[v]) / py),
                         f1(n / med(inner[v]) / py_inner)])
        # Upper bounds for any reader of these bytes: the whole file at cat's speed, and read() + sum in-process.
        rows.append(["bound: `cat SHARD > /dev/null` (reads the file, no samples)", "—",
                     f1(med(walls["python-tarfile"]) / cat), "—"])
        rows.append(["bound: in-process `read()` + sum of every byte (no samples)", "—",
                     f1(med(walls["python-tarfile"]) / med(walls["read-sum"])),
                     f1(med(inner["python-tarfile"]) / read_sum_inner)])
        self.emit(f"### 3. Against Python's tarfile (same run, same shard): Python reads {f0(py)} samples/s "
                  f"(wall), {f0(py_inner)} samples/s in-process\n")
        self.emit(table(["variant", "samples/s (wall)", "x Python (wall)", "x Python (in-process)"], rows))
        self.emit("")
        shutil.rmtree(self.path("item2-cache"), ignore_errors=True)

    # item 5 ----------------------------------------------------------------------------------------------------

    def item5(self):
        self.log("item 5: datavo read, cold then warm")
        runs = {"cold": [], "warm": [], "warm-sum": [], "fetch": []}
        for rep in range(self.reps):
            config, manifests, cache = self.fresh_cache("item5-cache")
            env = self.client_env(self.server, config, manifests)
            read = [self.datavo, "--config", config, "--json", "read", "bench/many", "--key", KEYS[0], "--key",
                    KEYS[1]]
            sync()
            cold = run(read, env, self.work, rss=True)
            sync()
            warm = run(read, env, self.work, rss=True)
            cj, wj = cold.json(), warm.json()
            if cj["origin"]["shards"] != cj["shards"] or wj["origin"]["shards"] != 0:
                raise SystemExit(f"unexpected origin fetches: cold {cj['origin']}, warm {wj['origin']}")
            runs["cold"].append((cold.wall, cj, cold.maxrss_kb))
            runs["warm"].append((warm.wall, wj, warm.maxrss_kb))
            s = run([self.iterate, "stream", "bench/many", str(self.many_revision), ",".join(KEYS), "sum"], env,
                    self.work, rss=True)
            runs["warm-sum"].append((s.wall, s.json(), s.maxrss_kb))
            # Reference: the same 16 cold fetches through `datavo warm` (4 in parallel, no iteration).
            config, manifests, cache = self.fresh_cache("item5-cache")
            env = self.client_env(self.server, config, manifests)
            sync()
            w = run([self.datavo, "--config", config, "--json", "warm", "bench/many", "--key", KEYS[0], "--key",
                     KEYS[1]], env, self.work, rss=True)
            runs["fetch"].append((w.wall, w.json(), w.maxrss_kb))
        shutil.rmtree(self.path("item5-cache"), ignore_errors=True)
        self.results["item5"] = runs
        first = runs["cold"][0][1]
        rows = []
        for name, label in [("cold", "`datavo read`, cold (empty cache: 16 shards from the origin)"),
                            ("warm", "`datavo read`, warm second pass"),
                            ("warm-sum", "SampleStream, warm, every byte summed (`iterate_shard stream … sum`)"),
                            ("fetch", "reference: `datavo warm` of the same dataset into an empty cache "
                                      "(16 fetches, 4 at a time, no iteration)")]:
            rs = runs[name]
            if name == "fetch":
                sps = [first["samples"] / w for w, _, _ in rs]
                mbs = [first["field_bytes"] / 1e6 / w for w, _, _ in rs]
            elif name == "warm-sum":
                sps = [j["samples"] / j["seconds"] for _, j, _ in rs]
                mbs = [j["bytes"] / 1e6 / j["seconds"] for _, j, _ in rs]
            else:
                sps = [j["samples_per_second"] for _, j, _ in rs]
                mbs = [j["mb_per_second"] for _, j, _ in rs]
            walls = [w for w, _, _ in rs]
            samples = first["samples"]
            rows.append([label, spread(sps, f0), spread(mbs, f0), spread(walls, f3), f0(samples / med(walls)),
                         f1(med([m for _, _, m in rs]) / 1024)])
        self.emit(f"## 5. `datavo read` end to end: {first['samples']} samples in {first['shards']} shards "
                  f"({first['field_bytes'] / MiB:.1f} MiB of fields)\n")
        self.emit(f"{self.reps} repetitions, each with a fresh cache and manifest cache: a cold pass, then the warm "
                  "pass. samples/s and MB/s (decimal, field bytes) are what `datavo --json read` reports (timed from "
                  "its start to its last sample: config, manifest request, shards); \"wall\" is the whole process. "
                  "`datavo read` does not touch the field bytes; the SampleStream row does (its rates are its own "
                  "in-process timing). The last row fetches without iterating; its rates are the dataset over its "
                  "wall time.\n")
        self.emit(table(["pass", "samples/s (tool)", "MB/s (tool)", "wall s", "samples/s (wall)", "peak RSS MiB"],
                        rows))
        self.emit("")

    # item 4 ----------------------------------------------------------------------------------------------------

    def item4(self):
        self.log("item 4: peak RSS of datavo warm over two ~1 GiB shards")
        src = self.path("src-big")
        self.gen(src, 32, 64 * MiB)
        store = self.path("store-big")
        big = self.pack(src, store, "bench/big", 16)
        shutil.rmtree(src)
        server = self.start_server(store, "serve-big")
        idle = server.rss_kb()
        time_v = TIME
        if not os.access(time_v, os.X_OK):
            raise SystemExit("/usr/bin/time is missing: apt-get install -y time")

        def warm(label):
            config, manifests, cache = self.fresh_cache("item4-cache")
            env = self.client_env(server, config, manifests)
            sync()
            tv = self.path("time-v.txt")
            r = run([time_v, "-v", "-o", tv, self.datavo, "--config", config, "--json", "warm", "bench/big", "--key",
                     KEYS[0], "--key", KEYS[1]], env, self.work)
            j = r.json()
            fields = parse_time_v(open(tv).read())
            shutil.rmtree(self.path("item4-cache"))
            sync()
            self.log(f"  {label}: {j['size_bytes'] / MiB:.0f} MiB in {r.wall:.2f} s, client max RSS "
                     f"{fields['Maximum resident set size (kbytes)']} KiB")
            return {"wall": r.wall, "bytes": j["size_bytes"], "origin_shards": j["origin"]["shards"],
                    "maxrss_kb": int(fields["Maximum resident set size (kbytes)"]),
                    "elapsed": fields["Elapsed (wall clock) time (h:mm:ss or m:ss)"]}

        # The first ticket of a shard makes the server materialise its key-group tar before it answers: time that
        # request for shard 0; the first warm then materialises shard 1 the same way, inside its ticket request.
        server.reset_hwm()
        started = time.perf_counter()
        server.ticket("bench/big", big["revision"], 0)
        first_ticket = time.perf_counter() - started
        first = warm("first warm (the server materialises shard 1's tar)")
        first["server_hwm_kb"] = server.hwm_kb()
        first["first_ticket_seconds"] = first_ticket
        reps = []
        for rep in range(self.reps):
            server.reset_hwm()
            r = warm(f"rep {rep + 1}")
            r["server_hwm_kb"] = server.hwm_kb()
            reps.append(r)
        server.stop()
        self.servers.remove(server)
        shutil.rmtree(store)
        self.results["item4"] = {"shards": big["total_shards"], "first": first, "reps": reps, "server_idle_kb": idle}
        walls = [r["wall"] for r in reps]
        shard_mib = reps[0]["bytes"] / big["total_shards"] / MiB
        client = [r["maxrss_kb"] / 1024 for r in reps]
        srv = [r["server_hwm_kb"] / 1024 for r in reps]
        mbs = [r["bytes"] / 1e6 / r["wall"] for r in reps]
        self.emit(f"## 4. Peak RSS of `datavo warm` over {big['total_shards']} shards of {shard_mib:.0f} MiB\n")
        self.emit(f"`/usr/bin/time -v datavo warm` (default `--jobs 4`, so both shards download at once) into a fresh "
                  f"cache, {self.reps} repetitions. Before them, separately reported: the first ticket request of "
                  "shard 0, which makes the server materialise that shard's key-group tar before it answers, then a "
                  "first warm, during which it materialises shard 1's. Server: `VmHWM` of the `datavo serve` "
                  "process, reset before each run through `/proc/PID/clear_refs`.\n")
        self.emit(table(["", "median (min–max)", "goal"], [
            ["`datavo warm` peak RSS (MiB), time -v \"Maximum resident set size\"", spread(client, f1), "< 64 MiB"],
            ["`datavo serve` peak RSS while serving (MiB)", spread(srv, f1), "—"],
            ["`datavo warm` wall time (s)", spread(walls, f2), "—"],
            ["`datavo warm` throughput (MB/s, wall)", spread(mbs, f0), "—"],
            ["first warm: `datavo warm` peak RSS (MiB)", f1(first["maxrss_kb"] / 1024), "< 64 MiB"],
            ["first ticket request of shard 0 (the server materialises its tar first) (s)",
             f2(first["first_ticket_seconds"]), "—"],
            ["first warm (the server materialises shard 1's tar in its ticket request) (s)", f2(first["wall"]), "—"],
            ["`datavo serve` peak RSS over both materialisations and the first warm (MiB)",
             f1(first["server_hwm_kb"] / 1024), "—"],
            ["`datavo serve` RSS when idle after start (MiB)", f1(idle / 1024), "—"],
        ]))
        self.emit("")

    # item 6 ----------------------------------------------------------------------------------------------------

    # The floor of item 6: every shard's ticket URL fetched by one curl process (one kept-alive connection, as
    # Datavo's client keeps one) and hashed.
    SMALL_FLOOR = "curl URL1 … URL40 | sha256sum"

    def item6(self):
        self.log("item 6: cold datavo read of 40 small shards")
        samples = 400
        src = self.path("src-small-shards")
        self.gen(src, samples, 64 * 1024)
        store = self.path("store-small-shards")
        small = self.pack(src, store, "bench/small", 10)
        shutil.rmtree(src)
        server = self.start_server(store, "serve-small-shards")
        # A warm origin, as in the other items: every key-group tar built and in the page cache.
        tickets = [server.ticket("bench/small", small["revision"], i) for i in range(small["total_shards"])]
        run(["cat"] + [os.path.join(store, "tars", t["content_hash"] + ".tar") for t in tickets], self.env,
            self.work, stdout_path=os.devnull)
        variants = ["datavo read", self.SMALL_FLOOR]
        runs = {v: [] for v in variants}
        for rep in range(self.reps):
            for v in rotated(variants, rep):
                sync()
                if v == "datavo read":
                    config, manifests, cache = self.fresh_cache("item6-cache")
                    env = self.client_env(server, config, manifests)
                    r = run([self.datavo, "--config", config, "--json", "read", "bench/small", "--key", KEYS[0],
                             "--key", KEYS[1]], env, self.work, rss=True)
                    j = r.json()
                    if j["origin"]["shards"] != small["total_shards"]:
                        raise SystemExit(f"item 6: expected {small['total_shards']} origin fetches: {j['origin']}")
                    runs[v].append((r.wall, j["samples"], r.maxrss_kb))
                else:
                    urls = [server.ticket("bench/small", small["revision"], i)["url"] for i in range(len(tickets))]
                    r = run(["bash", "-o", "pipefail", "-c", 'curl -sSf "$@" | sha256sum', "floor"] + urls, self.env,
                            self.work, rss=True)
                    runs[v].append((r.wall, samples, r.maxrss_kb))
        server.stop()
        self.servers.remove(server)
        shutil.rmtree(store)
        shutil.rmtree(self.path("item6-cache"), ignore_errors=True)
        self.results["item6"] = {"shards": small["total_shards"], "shard_bytes": [t["size"] for t in tickets],
                                 "runs": runs}
        floor = med([w for w, _, _ in runs[self.SMALL_FLOOR]])
        shard_kib = med([t["size"] for t in tickets]) / 1024
        rows = []
        for v, label in [("datavo read", "`datavo read`, cold (40 tickets, 40 shard downloads)"),
                         (self.SMALL_FLOOR, "floor: `curl URL1 … URL40 | sha256sum` (tickets asked beforehand)")]:
            walls = [w for w, _, _ in runs[v]]
            rows.append([label, spread(walls, f3), f0(samples / med(walls)), f2(floor / med(walls)),
                         f1(med([m for _, _, m in runs[v]]) / 1024)])
        self.emit(f"## 6. `datavo read` of many small shards, cold: {small['total_shards']} shards of "
                  f"{shard_kib:.0f} KiB\n")
        self.emit(f"{self.reps} repetitions, each `datavo read` with a fresh cache and manifest cache. A small answer "
                  "costs a ticket request and a download per shard, on kept-alive connections; the floor fetches the "
                  "same shards' bytes (tickets asked beforehand, untimed) in one curl process. Wall time from outside "
                  "each process.\n")
        self.emit(table(["variant", "wall s", "samples/s (wall)", "x floor", "peak RSS MiB"], rows))
        self.emit("")

    def finish(self):
        for server in list(self.servers):
            server.stop()
        self.results["machine"]["loadavg_end"] = os.getloadavg()
        self.emit("Load average at the end: " + " / ".join(f"{x:.2f}" for x in os.getloadavg()) + "\n")


def proc_mem_total_gib():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / (1 << 20)
    return 0.0


def parse_time_v(text):
    fields = {}
    for line in text.splitlines():
        if ":" in line:
            key, _, value = line.strip().rpartition(": ")
            fields[key.strip()] = value.strip()
    return fields


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datavo", required=True)
    parser.add_argument("--iterate", required=True, help="the iterate_shard program (build.sh)")
    parser.add_argument("--fetch-model", help="the fetch_model program (build.sh); item 1b runs only with it")
    parser.add_argument("--work", required=True, help="a scratch directory on the real disk (≈ 7 GiB free)")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--items", default="1,2,3,4,5,6", help="which items to run (2 and 3 run together)")
    parser.add_argument("--json", help="write every raw measurement here")
    args = parser.parse_args()
    items = set(args.items.split(","))
    # A TERM (run_all.sh's trap, a CI timeout) unwinds like ^C, so that `finally` stops the servers started here.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    started = time.monotonic()
    bench = Bench(args)
    try:
        bench.machine()
        if items & {"1", "2", "3", "5"}:
            bench.setup_small()
        if "1" in items:
            bench.item1()
        if items & {"2", "3"}:
            bench.items23()
        if "5" in items:
            bench.item5()
        if items & {"1", "2", "3", "5"}:
            bench.server.stop()
            bench.servers.remove(bench.server)
            shutil.rmtree(bench.small_store)
        if "4" in items:
            bench.item4()
        if "6" in items:
            bench.item6()
    finally:
        bench.finish()
        if args.json:
            with open(args.json, "w") as f:
                json.dump(bench.results, f, indent=1, default=str)
    bench.log(f"done in {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
