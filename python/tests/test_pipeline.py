"""The SampleStream iterator's reader thread (SamplePipeline, src/client/sample_pipeline.cpp): a C++ producer thread
fills the next batch of samples while Python converts and consumes the current one. The samples and their order are the
C++ stream's; an error comes after the samples before it, and stays; close() (from another thread too), dropping
the iterator, interpreter exit and fork are safe while the producer waits on a slow shard download; the GIL is free
while Python waits for a batch; the thread starts at the first next(), never when the iterator is made."""
import gc
import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from conftest import DATASET, PER_SHARD, SHARDS
from datavo_sdk import DatavoError, SampleStream

# A slow link: a shard of the test dataset with audio.wav alone is about 26 KB, so at 1000 bytes/s it takes about
# 25 s, far longer than PROMPT. The proxy sends it in slices of rate/10 bytes, so a cancelled download notices
# within about 0.1 s.
SLOW = "slow rate=1000"
PROMPT = 5.0  # seconds: "at once", on a loaded 2-core machine
BATCH = 64  # SamplePipeline's batch (k_default_batch_size)


def expected_ids(it):
    """What the C++ SampleStream yields: the manifest's samples of each shard it reads, in its shard order (it checks
    every sample's id and position against the manifest). Shard i of the test dataset holds utt_(10i) to utt_(10i+9)."""
    return ["utt_%04d" % (index * PER_SHARD + j) for index in it.shard_indices for j in range(PER_SHARD)]


def warm_through(proxy, shards):
    """Caches shards 0..shards-1 as read through the proxy (the cache's entries are per server), each alone."""
    for rank in range(shards):
        n = sum(1 for _ in SampleStream.from_dataset(DATASET, keys=["audio.wav"], server=proxy.url, rank=rank,
                                                     world_size=SHARDS))
        assert n == PER_SHARD


def wait_for_download(proxy, timeout=20):
    """Waits until a shard download is in progress through the proxy (answered, its body not finished)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(e["route"] == "shard" and e["status"] == 200 and not e["done"] for e in proxy.stats()["log"]):
            return
        time.sleep(0.05)
    pytest.fail("no shard download started through the proxy")


def task_count():
    return len(os.listdir("/proc/self/task"))


def task_names():
    return sorted(open("/proc/self/task/%s/comm" % t).read().strip() for t in os.listdir("/proc/self/task"))


@pytest.mark.parametrize("prefetch", [0, 2])
@pytest.mark.parametrize("copy", [False, True])
def test_samples_and_order_are_the_cpp_streams(env, prefetch, copy):
    for options in ({}, {"shuffle": True, "seed": 5}, {"shuffle": True, "seed": 5, "epoch": 3, "rank": 1,
                                                       "world_size": 3}):
        it = iter(SampleStream.from_dataset(DATASET, keys=["audio.wav", "transcript.txt"], prefetch=prefetch,
                                            copy=copy, **options))
        got = []
        for sample in it:
            assert bytes(sample["transcript.txt"]) == b"utterance %d\n" % int(sample.id[4:])
            assert bytes(sample["audio.wav"][:4]) == b"RIFF"
            got.append(sample.id)
            if len(got) % 50 == 0:
                time.sleep(0.02)  # the producer runs ahead, fills its batch and waits for room
        assert got == expected_ids(it), options
        assert len(got) > BATCH or options.get("world_size"), "the pass spans several batches"
        assert it.stats()["samples"] == len(got)
        assert next(it, None) is None and next(it, None) is None  # the end stays the end


@pytest.mark.parametrize("prefetch", [0, 2])
def test_an_error_mid_stream_comes_after_the_samples_before_it_and_stays(proxy, prefetch):
    # Shards 0-2 are cached; then every shard download fails (a permanent 404): the stream yields the 30 cached
    # samples, then raises for shard 3, then again on every later next().
    warm_through(proxy, 3)
    proxy.set_mode("status404")
    it = iter(SampleStream.from_dataset(DATASET, keys=["audio.wav"], server=proxy.url, prefetch=prefetch))
    got = []
    with pytest.raises(DatavoError) as raised:
        for sample in it:
            got.append(sample.id)
    assert got == ["utt_%04d" % i for i in range(3 * PER_SHARD)]
    assert "shard 3 of %s" % DATASET in str(raised.value)
    for _ in range(2):
        with pytest.raises(type(raised.value)) as again:
            next(it)
        assert str(again.value) == str(raised.value)
    assert it.stats()["samples"] == 3 * PER_SHARD


@pytest.mark.parametrize("size", [3, 4])
@pytest.mark.parametrize("drop_last", [False, True])
def test_batches_before_an_error_come_whole_and_in_order_then_the_error_stays(proxy, size, drop_last):
    # As above, 30 samples then the error. batches(n) takes several batches per hand-over from the reader thread
    # (its hand-overs grow n, 2n, 4n, ...): with n=3 the error comes in a hand-over of 9 samples (three batches), with
    # n=4 in one of 2 (a short batch, dropped with drop_last).
    warm_through(proxy, 3)
    proxy.set_mode("status404")
    it = iter(SampleStream.from_dataset(DATASET, keys=["audio.wav"], server=proxy.url).batches(size,
                                                                                                  drop_last=drop_last))
    sizes, ids = [], []
    with pytest.raises(DatavoError) as raised:
        for batch in it:
            sizes.append(batch.num_samples)
            ids.extend(batch.ids)
    whole = 3 * PER_SHARD // size
    short = 3 * PER_SHARD % size
    assert sizes == [size] * whole + ([short] if short and not drop_last else [])
    assert ids == ["utt_%04d" % i for i in range(sum(sizes))]
    assert "shard 3 of %s" % DATASET in str(raised.value)
    with pytest.raises(type(raised.value)):
        next(it)


def test_the_producer_starts_at_the_first_next_and_close_joins_it(env):
    # prefetch=0 and no reading while fetching (which fetches each shard on a thread of its own): the stream has no
    # thread, so that the count below is the producer's alone.
    ds = SampleStream.from_dataset(DATASET, keys=["audio.wav"], prefetch=0, read_while_fetching=False)
    base = task_count()
    it = iter(ds)
    assert task_count() == base, "a thread started when the iterator was made (before a DataLoader's fork)"
    next(it)
    assert task_count() == base + 1, task_names()  # the producer: batch 1 handed over, batch 2 filled, waiting for room
    it.close()
    assert task_count() == base
    it = iter(ds)
    assert sum(1 for _ in it) == 10 * SHARDS
    deadline = time.monotonic() + PROMPT  # at the end the producer returns by itself (just after handing it over)
    while task_count() != base and time.monotonic() < deadline:
        time.sleep(0.01)
    assert task_count() == base, task_names()


@pytest.mark.parametrize("prefetch", [0, 2])
def test_close_from_another_thread_while_the_producer_waits_on_a_slow_fetch(proxy, prefetch):
    # prefetch=0: the producer itself is downloading; 2: it waits for the prefetcher's download.
    proxy.set_mode(SLOW)
    it = iter(SampleStream.from_dataset(DATASET, keys=["audio.wav"], server=proxy.url, prefetch=prefetch))
    outcome = {}

    def drain():
        try:
            outcome["samples"] = sum(1 for _ in it)
        except BaseException as e:  # reported below
            outcome["error"] = e

    reader = threading.Thread(target=drain)
    reader.start()
    wait_for_download(proxy)
    time.sleep(0.2)
    assert reader.is_alive()
    assert it.stats()["samples"] == 0  # stats() from another thread while the producer reads
    start = time.monotonic()
    it.close()
    reader.join(PROMPT)
    took = time.monotonic() - start
    assert not reader.is_alive(), "the reading thread still waits %.1f s after close()" % took
    assert took < PROMPT
    assert outcome == {"samples": 0}  # the pass just ends
    with pytest.raises(ValueError, match="closed"):
        it.stats()


@pytest.mark.parametrize("prefetch", [0, 2])
@pytest.mark.parametrize("how", ["close", "del"])
def test_dropping_an_unfinished_iterator_while_the_producer_waits_on_a_slow_fetch(proxy, prefetch, how):
    warm_through(proxy, 7)  # 70 samples: the first batch (64) comes from the cache
    proxy.set_mode(SLOW)
    it = iter(SampleStream.from_dataset(DATASET, keys=["audio.wav"], server=proxy.url, prefetch=prefetch))
    first = next(it)
    assert first.id == "utt_0000"
    wait_for_download(proxy)  # shard 7: the producer, filling batch 1, waits for it (or downloads it itself)
    time.sleep(0.2)
    start = time.monotonic()
    if how == "close":
        it.close()
    else:
        del it
        gc.collect()
    took = time.monotonic() - start
    assert took < PROMPT, "%s took %.1f s" % (how, took)
    assert bytes(first["audio.wav"][:4]) == b"RIFF"  # a sample outlives its stream


@pytest.mark.parametrize("keep", ["global", "leaked"])
def test_interpreter_exit_while_the_producer_waits_on_a_slow_fetch(proxy, keep):
    warm_through(proxy, 7)
    proxy.set_mode(SLOW)
    code = textwrap.dedent("""
        import ctypes, sys, time
        from datavo_sdk import SampleStream
        it = iter(SampleStream.from_dataset(%r, keys=["audio.wav"], server=%r))
        first = next(it)
        if %r == "leaked":  # never destroyed: only the atexit hook stops the producer
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(it))
        cycle = [it]
        cycle.append(cycle)
        time.sleep(0.5)  # the producer waits for shard 7, which downloads slowly
        print("exiting", flush=True)
    """) % (DATASET, proxy.url, keep)
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    try:
        line = process.stdout.readline()
        start = time.monotonic()
        process.wait(PROMPT * 3)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        pytest.fail("the interpreter did not exit: %s" % process.stderr.read()[-2000:])
    took = time.monotonic() - start
    stderr = process.stderr.read()
    assert line.strip() == "exiting", stderr[-2000:]
    assert process.returncode == 0, stderr[-2000:]
    assert took < PROMPT, "exit took %.1f s" % took


@pytest.mark.parametrize("prefetch", [0, 2])
def test_a_child_forked_mid_iteration_refuses_the_iterator_and_exits(env, prefetch):
    code = textwrap.dedent("""
        import os, sys, time
        from datavo_sdk import SampleStream
        it = iter(SampleStream.from_dataset(%r, keys=["audio.wav"], prefetch=%d))
        first = [next(it) for _ in range(3)]  # the producer runs (or has run) in this process
        pid = os.fork()
        if pid == 0:
            try:
                next(it)
                code = 3
            except RuntimeError as e:
                code = 0 if "fork" in str(e) else 4
            it.close()  # leaks what the parent's threads use; never joins a thread that is not here
            del it
            sys.exit(code)  # a normal exit: the atexit hook must skip the parent's producer
        deadline = time.monotonic() + 30
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, 9)
                print("child hung")
                sys.exit(1)
            time.sleep(0.05)
        print(os.waitstatus_to_exitcode(status), 3 + sum(1 for _ in it))  # the parent reads on, unaffected
    """) % (DATASET, prefetch)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=90)
    assert done.returncode == 0 and done.stdout.split() == ["0", str(10 * SHARDS)], (done.stdout, done.stderr[-2000:])


def test_the_gil_is_free_while_next_waits_for_the_producer(proxy):
    proxy.set_mode("slow rate=20000")  # one shard of about 26 KB: over a second
    it = iter(SampleStream.from_dataset(DATASET, keys=["audio.wav"], server=proxy.url, rank=0, world_size=SHARDS))
    ticks = [0]
    stop = threading.Event()

    def ticker():  # pure Python: it runs only while the main thread does not hold the GIL
        while not stop.is_set():
            ticks[0] += 1
            time.sleep(0.001)

    thread = threading.Thread(target=ticker)
    thread.start()
    start = time.monotonic()
    first = next(it)  # waits for the producer, which waits for the download
    waited = time.monotonic() - start
    stop.set()
    thread.join()
    assert first.id == "utt_0000" and sum(1 for _ in it) == PER_SHARD - 1
    assert waited >= 1.0, "the shard was not slow: %.2f s" % waited
    assert ticks[0] > 200 * waited, "the ticker ran %d times in %.2f s" % (ticks[0], waited)


def test_stats_give_each_tiers_reads_the_origins_bytes_and_the_wait_for_shards(env, tmp_path):
    # A cold pass reads every shard from the origin (and waits for each: prefetch=0), a warm pass from the tier.
    config = tmp_path / "shards.yaml"
    config.write_text("tiers:\n  - name: local\n    path: %s\n" % (tmp_path / "cache"))
    cold = iter(SampleStream.from_dataset(DATASET, keys=["audio.wav"], prefetch=0, cache_config_path=str(config)))
    assert sum(1 for _ in cold) == SHARDS * PER_SHARD
    stats = cold.stats()
    assert stats["origin_fetches"] == SHARDS and stats["origin_bytes"] > 0
    assert [(t["tier"], t["hits"], t["misses"], t["served_bytes"]) for t in stats["tiers"]] == [("local", 0, SHARDS, 0)]
    assert stats["shard_wait_seconds"] > 0.0
    warm = iter(SampleStream.from_dataset(DATASET, keys=["audio.wav"], cache_config_path=str(config)))
    assert sum(1 for _ in warm) == SHARDS * PER_SHARD
    stats_warm = warm.stats()
    assert stats_warm["origin_fetches"] == 0 and stats_warm["origin_bytes"] == 0
    assert stats_warm["tiers"][0]["hits"] == SHARDS
    assert stats_warm["tiers"][0]["served_bytes"] == stats["origin_bytes"]
    assert isinstance(stats_warm["shard_wait_seconds"], float)
