"""The GIL is released during blocking calls: two Python threads, each reading a slow shard, take about
the time of one; a pure-Python thread keeps running meanwhile; a fetcher runs in the calling thread and other
threads run while a hierarchy call waits."""
import hashlib
import os
import threading
import time

import pytest

from conftest import DATASET, SHARDS
from datavo_sdk import SampleStream, ShardCacheHierarchy, ShardCacheTier

STALL_SECONDS = 2


def read_one_shard(proxy_url, rank, results):
    # world_size == SHARDS: each rank reads exactly one shard.
    start = time.monotonic()
    n = sum(1 for _ in SampleStream.from_dataset(DATASET, keys=["audio.wav"], server=proxy_url, rank=rank,
                                                 world_size=SHARDS, prefetch=0))
    results[rank] = (n, time.monotonic() - start)


def test_two_threads_reading_slow_shards_take_the_time_of_one(proxy, tmp_path, monkeypatch):
    monkeypatch.setenv("DATAVO_SHARD_CACHE_DIR", str(tmp_path / "cache-one"))
    proxy.set_mode("stall count=1 seconds=%d" % STALL_SECONDS)
    one = {}
    start = time.monotonic()
    read_one_shard(proxy.url, 0, one)
    single = time.monotonic() - start
    assert single >= STALL_SECONDS, "the shard was not slow: %.2f s" % single

    monkeypatch.setenv("DATAVO_SHARD_CACHE_DIR", str(tmp_path / "cache-two"))
    proxy.set_mode("stall count=2 seconds=%d" % STALL_SECONDS)
    ticks = [0]
    stop = threading.Event()

    def ticker():  # pure Python: it only runs while no thread holds the GIL for long
        while not stop.is_set():
            ticks[0] += 1
            time.sleep(0.001)

    results = {}
    threads = [threading.Thread(target=read_one_shard, args=(proxy.url, rank, results)) for rank in (1, 2)]
    tick_thread = threading.Thread(target=ticker)
    tick_thread.start()
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    both = time.monotonic() - start
    stop.set()
    tick_thread.join()
    print("one slow shard: %.2f s; two, in two threads: %.2f s; ticker ran %d times" % (single, both, ticks[0]))
    assert all(n == 10 for n, _ in results.values()) and len(results) == 2
    assert all(t >= STALL_SECONDS for _, t in results.values()), results  # both really were slow
    assert both < 1.5 * single, "two threads took %.2f s, one took %.2f s: the reads were serialised" % (both, single)
    # While both threads blocked in next(), the ticker ran roughly every millisecond (sleep granularity permitting).
    assert ticks[0] > 200 * STALL_SECONDS


def test_a_fetch_lets_other_threads_run(env, tmp_path):
    """While get_or_fetch waits for another thread's fetch of the same shard (single flight), the GIL is free: the
    waiting call does not stop the fetching thread's Python fetcher from running."""
    cache = ShardCacheHierarchy([ShardCacheTier(str(tmp_path / "c"))])
    h = hashlib.sha256(b"single flight").hexdigest()
    calls = []
    in_fetch = threading.Event()

    def slow_fetcher(f):
        calls.append(threading.current_thread().name)
        in_fetch.set()
        for _ in range(20):  # Python work interleaved with sleeps: needs the GIL again and again
            f.write(b"x" * 1000)
            time.sleep(0.02)

    paths = {}
    first = threading.Thread(target=lambda: paths.setdefault("first", cache.get_or_fetch(h, slow_fetcher)),
                             name="first")
    first.start()
    assert in_fetch.wait(10)
    second = threading.Thread(target=lambda: paths.setdefault("second", cache.get_or_fetch(h, slow_fetcher)),
                              name="second")
    second.start()
    first.join(20)
    second.join(20)
    assert not first.is_alive() and not second.is_alive(), "deadlock: a waiter held the GIL"
    assert calls == ["first"] and paths["first"] == paths["second"]
