"""The cache's operations from Python: warm() against a real `datavo serve` (directly and through the fault proxy):
its typed report, the requests it makes, the same figures as `datavo warm --json`, its progress bar, its errors and
Ctrl-C."""
import _thread
import contextlib
import datetime
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid

import pytest

from conftest import DATASET, REPO, SAMPLES, SHARDS
from datavo_sdk import (DatavoError, S3ShardCacheTier, SampleStream, ShardCacheHierarchy, ShardCacheTier, UploadSummary,
                        WarmReport, WarmShare, WarmTier, WarmTierUploads, errors, warm)


def test_warm_fetches_every_shard_once_and_a_second_warm_only_hits(env, origin):
    before = origin.requests()
    report = warm(DATASET, ["audio.wav"], progress=False)
    after = origin.requests()
    assert isinstance(report, WarmReport) and report.error is None and report.partial is None
    assert (report.dataset, report.keys, report.shards, report.failed) == (DATASET, ["audio.wav"], SHARDS, 0)
    assert report.origin_shards == SHARDS and report.origin_bytes == report.size_bytes > 0
    assert report.tiers == [WarmTier(tier="default", hits=0, promoted_into=0, cached=SHARDS, held=SHARDS)]
    assert report.uploads is None and report.failures == [] and report.not_cached == 0 and report.seconds > 0
    assert after["ticket"] - before.get("ticket", 0) == after["shard"] - before.get("shard", 0) == SHARDS

    again = warm(DATASET, "audio.wav", progress=False, revision=report.revision)
    assert again.origin_shards == 0 and again.tiers[0].hits == SHARDS and again.size_bytes == report.size_bytes
    assert origin.requests()["shard"] == after["shard"]
    # What was warmed is what a stream reads: no shard request.
    assert sum(1 for _ in SampleStream.from_dataset(DATASET, keys=["audio.wav"])) == SAMPLES
    assert origin.requests()["shard"] == after["shard"]


def test_warm_with_a_share_reports_it_and_refuses_a_bad_one(env, origin):
    """`share="I/N"` is `datavo warm --share` (docs/hierarchy.md, "During an outage"): with no bucket nothing is
    deferred, and the report says so; a malformed share, or an index not below the count, is refused."""
    report = warm(DATASET, "audio.wav", progress=False, share="1/3", share_wait=5)
    assert report.share == WarmShare(index=1, count=3, deferred=0, from_region=0, fetched_after_wait=0,
                                     waited_seconds=report.share.waited_seconds)
    assert report.origin_shards == SHARDS, "without a bucket every shard is this VM's to fetch"
    assert warm(DATASET, "audio.wav", progress=False).share is None
    for bad in ("3/3", "1", "x/3"):
        with pytest.raises(ValueError, match="share '%s'" % bad):
            warm(DATASET, "audio.wav", progress=False, share=bad)
    with pytest.raises(ValueError, match="share_wait"):
        warm(DATASET, "audio.wav", progress=False, share="0/2", share_wait=0)


def test_warm_reports_what_the_cli_reports(env, datavo_bin):
    report = warm(DATASET, ["audio.wav", "transcript.txt"], progress=False)
    cli = json.loads(subprocess.run([datavo_bin, "--json", "warm", DATASET, "--key", "audio.wav", "--key",
                                     "transcript.txt"], capture_output=True, text=True, check=True).stdout)
    assert (cli["dataset"], cli["revision"], cli["keys"], cli["shards"], cli["size_bytes"]) == (
        report.dataset, report.revision, report.keys, report.shards, report.size_bytes)
    # The CLI ran second: every shard a hit, as a second warm() would find them.
    assert [row["hits"] for row in cli["tiers"]] == [SHARDS] and cli["origin"]["shards"] == 0
    assert [row["cached"] for row in cli["tiers"]] == [t.cached for t in report.tiers]


def test_the_cli_warm_sample_stream_and_get_or_fetch_share_one_instance(env, origin, datavo_bin):
    """Issue 16, "one namespace": `datavo warm`, warm() (examples/12_warm_and_read_cache.py's way), SampleStream and
    get_default_shard_cache().get_or_fetch with DATAVO_SERVER all key the shards by the server's instance_id."""
    from datavo_sdk import get_default_shard_cache

    server_id = json.loads(urllib.request.urlopen(origin.url + "/v1/instance", timeout=10).read())["instance_id"]
    subprocess.run([datavo_bin, "warm", DATASET, "--key", "audio.wav"], capture_output=True, text=True, check=True)
    assert warm(DATASET, ["audio.wav"], progress=False).origin_shards == 0, "the example's warm() finds the CLI's"
    shards_before = origin.requests("shard")
    stream = SampleStream.from_dataset(DATASET, keys=["audio.wav"])
    assert sum(1 for _ in stream) == SAMPLES
    assert origin.requests("shard") == shards_before, "SampleStream reads the CLI's copies"
    cache = get_default_shard_cache()
    listed = cache.ls().entry_list
    fetched = []
    for entry in listed:
        path = cache.get_or_fetch(entry.content_hash, lambda f, h=entry.content_hash: fetched.append(h))
        assert os.path.getsize(path) == entry.size_bytes
    assert fetched == [], "get_or_fetch with DATAVO_SERVER finds the same entries: no fetch"
    after = cache.ls().entry_list
    assert len(after) == SHARDS and {e.instance for e in after} == {server_id}, "one copy per shard, one instance"
    instance_dirs = [d for d in os.listdir(env / "cache") if not d.startswith(".") and (env / "cache" / d).is_dir()]
    assert instance_dirs == [server_id]


def test_a_progress_bar_on_a_terminal_unless_turned_off(env, capsys, monkeypatch):
    __import__("tqdm")  # scripts/install-deps.sh installs python3-tqdm; without it, this test fails here
    warm(DATASET, ["audio.wav"], progress=True)
    bar = capsys.readouterr().err
    assert "warm " + DATASET in bar and "%d/%d" % (SHARDS, SHARDS) in bar and "MB from the origin" in bar

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    warm(DATASET, ["transcript.txt"])  # progress=None: a terminal, so a bar
    assert "%d/%d" % (SHARDS, SHARDS) in capsys.readouterr().err
    monkeypatch.setenv("DATAVO_DISABLE_PROGRESS_BARS", "1")
    warm(DATASET, ["transcript.txt"])
    assert capsys.readouterr().err == ""
    monkeypatch.delenv("DATAVO_DISABLE_PROGRESS_BARS")
    warm(DATASET, ["transcript.txt"], progress=False)
    assert capsys.readouterr().err == ""


def test_bad_requests_raise_before_any_fetch(env, origin):
    before = origin.requests()
    with pytest.raises(FileNotFoundError):
        warm("no_such_dataset/train", ["audio.wav"], progress=False)
    with pytest.raises(FileNotFoundError, match="video.mp4"):
        warm(DATASET, ["video.mp4"], progress=False)
    with pytest.raises(ValueError, match="jobs"):
        warm(DATASET, ["audio.wav"], jobs=0, progress=False)
    with pytest.raises(TypeError, match="cache"):
        warm(DATASET, ["audio.wav"], cache="/tmp/cache", progress=False)  # type: ignore[arg-type]
    assert origin.requests().get("shard", 0) == before.get("shard", 0)


def test_shards_that_cannot_be_fetched_raise_with_the_report(env, proxy):
    proxy.set_mode("status404")
    with pytest.raises(errors.RemoteError) as raised:
        warm(DATASET, ["audio.wav"], server=proxy.url, progress=False)
    report = raised.value.report
    assert "%d of %d shards could not be warmed" % (SHARDS, SHARDS) in str(raised.value)
    assert report.failed == SHARDS and len(report.failures) == SHARDS and report.tiers[0].cached == 0
    assert all(isinstance(f.error, DatavoError) and "404" in str(f.error) for f in report.failures)
    assert sorted(f.shard_index for f in report.failures) == list(range(SHARDS))


def test_ctrl_c_stops_the_warm_and_leaves_no_partial_shard(env, proxy):
    # About 10 s per shard through the proxy: a warm that is not stopped takes far longer than the test allows.
    proxy.set_mode("slow rate=4000")
    # Ctrl-C as a terminal delivers it. A process started in the background by a non-interactive shell (a CI runner,
    # nohup) inherits SIGINT ignored, and then Python installs no handler and interrupt_main() does nothing.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(1.0, _thread.interrupt_main)
    timer.start()
    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            warm(DATASET, ["audio.wav"], server=proxy.url, jobs=2, progress=False)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    stopped_after = time.monotonic() - started
    assert stopped_after < 5, "the warm took %.1f s to stop" % stopped_after
    proxy.set_mode("ok")
    # Nothing half-fetched was installed: a warm now fetches every shard, and every one verifies.
    report = warm(DATASET, ["audio.wav"], server=proxy.url, progress=False)
    assert report.origin_shards == SHARDS and report.error is None


def moto_bucket(monkeypatch):
    """(endpoint, bucket): a fresh bucket in the moto server that tests/support/emulators.sh started, with its
    credentials in the environment."""
    endpoint = os.environ.get("MOTO_S3_ENDPOINT")
    if not endpoint:
        if os.environ.get("DATAVO_REQUIRE_EMULATORS") == "1":
            pytest.fail("DATAVO_REQUIRE_EMULATORS=1 but MOTO_S3_ENDPOINT is not set (tests/support/emulators.sh)")
        pytest.skip("no moto: MOTO_S3_ENDPOINT is not set")
    bucket = "datavo-warm-%s" % uuid.uuid4().hex[:12]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    urllib.request.urlopen(urllib.request.Request(endpoint + "/" + bucket, method="PUT"), timeout=10).read()
    return endpoint, bucket


def test_get_or_fetch_used_first_on_a_machine_keys_its_entries_as_warm_does(env, origin, datavo_bin, monkeypatch):
    """Issue 16, "one namespace", the other order: the SDK's get_or_fetch with DATAVO_SERVER runs first on a machine
    (nothing remembered about the server yet), then `datavo warm`, SampleStream and `cache ls`: one instance, the
    server's, and one copy per shard in each tier, the bucket included."""
    from datavo_sdk import get_default_shard_cache

    endpoint, bucket = moto_bucket(monkeypatch)
    server_id = json.loads(urllib.request.urlopen(origin.url + "/v1/instance", timeout=10).read())["instance_id"]
    # The shards' hashes and bytes, learnt elsewhere (another manifest cache and shard cache).
    elsewhere = dict(os.environ, DATAVO_MANIFEST_CACHE_DIR=str(env / "elsewhere-manifests"),
                     DATAVO_SHARD_CACHE_DIR=str(env / "elsewhere"))
    subprocess.run([datavo_bin, "warm", DATASET, "--key", "audio.wav"], env=elsewhere, capture_output=True,
                   text=True, check=True)
    learnt = json.loads(subprocess.run([datavo_bin, "--json", "cache", "ls"], env=elsewhere, capture_output=True,
                                       text=True, check=True).stdout)["entry_list"]
    elsewhere_cache = ShardCacheHierarchy([ShardCacheTier(str(env / "elsewhere"), name="default")])
    sources = {e["content_hash"]: elsewhere_cache.get_or_fetch(e["content_hash"], lambda f: pytest.fail("cached"),
                                                               instance=server_id) for e in learnt}
    assert len(sources) == SHARDS

    config = env / "shards.yaml"
    config.write_text("tiers:\n  - name: local\n    path: %s\n  - name: region\n    type: s3\n    bucket: %s\n"
                      "    region: us-east-1\n    endpoint_url: %s\n    addressing_style: path\n"
                      % (env / "local", bucket, endpoint))
    monkeypatch.setenv("DATAVO_SHARD_CACHE_CONFIG", str(config))
    assert not (env / "manifests").exists(), "nothing is remembered about the server on this machine yet"
    cache = get_default_shard_cache()
    fetched = []
    for content_hash, source in sources.items():
        cache.get_or_fetch(content_hash, lambda f, h=content_hash, s=source: (fetched.append(h), f.write_file(s)))
    assert sorted(fetched) == sorted(sources), "a new machine: every shard fetched once"
    del cache

    shards_before = origin.requests("shard")
    warmed = json.loads(subprocess.run([datavo_bin, "--json", "warm", DATASET, "--key", "audio.wav"],
                                       capture_output=True, text=True, check=True).stdout)
    assert warmed["origin"]["shards"] == 0 and [row["hits"] for row in warmed["tiers"]][0] == SHARDS
    assert sum(1 for _ in SampleStream.from_dataset(DATASET, keys=["audio.wav"])) == SAMPLES
    assert origin.requests("shard") == shards_before, "warm and SampleStream read what get_or_fetch installed"
    listing = json.loads(subprocess.run([datavo_bin, "--json", "cache", "ls"], capture_output=True, text=True,
                                        check=True).stdout)
    assert [(t["tier"], t["entries"]) for t in listing["tiers"]] == [("local", SHARDS), ("region", SHARDS)]
    assert {(e["tier"], e["instance"]) for e in listing["entry_list"]} == {("local", server_id),
                                                                          ("region", server_id)}
    assert sorted(d for d in os.listdir(env / "local") if not d.startswith(".")) == [server_id]


def test_uploads_to_a_remote_tier_are_summarised(env, tmp_path, monkeypatch):
    endpoint, bucket = moto_bucket(monkeypatch)
    cache = ShardCacheHierarchy([
        ShardCacheTier(str(tmp_path / "local"), name="local"),
        S3ShardCacheTier(bucket=bucket, region="us-east-1", name="region", endpoint_url=endpoint,
                         addressing_style="path"),
    ])
    report = warm(DATASET, ["audio.wav"], cache, progress=False)
    assert report.uploads == UploadSummary(uploaded=SHARDS, already_present=0, failed=0, skipped=0, pending=0)
    assert [(t.tier, t.cached, t.held) for t in report.tiers] == [("local", SHARDS, SHARDS), ("region", 0, SHARDS)]
    assert report.tiers[0].uploads is None
    assert report.tiers[1].uploads == WarmTierUploads(uploaded=SHARDS, already_present=0, failed=0, skipped=0,
                                                      failed_reason=None, skipped_reason=None)
    # A second machine (a fresh local tier) is served by the bucket: promotions, no origin fetch.
    other = ShardCacheHierarchy([
        ShardCacheTier(str(tmp_path / "other"), name="local"),
        S3ShardCacheTier(bucket=bucket, region="us-east-1", name="region", endpoint_url=endpoint,
                         addressing_style="path"),
    ])
    second = warm(DATASET, ["audio.wav"], other, progress=False)
    assert second.origin_shards == 0 and second.tiers[0].promoted_into == SHARDS
    assert second.uploads == UploadSummary(uploaded=0, already_present=0, failed=0, skipped=0, pending=0)
    assert second.tiers[1].uploads.already_present == SHARDS and second.tiers[1].held == SHARDS


def test_gc_sweeps_the_lease_a_killed_vm_left_in_a_bucket(env, tmp_path, monkeypatch):
    endpoint, bucket = moto_bucket(monkeypatch)

    def url(key=""):
        return "%s/%s/%s" % (endpoint, bucket, key)

    def keys():
        listing = urllib.request.urlopen(url("?list-type=2"), timeout=10).read().decode()
        return sorted(re.findall(r"<Key>([^<]*)</Key>", listing))

    # A dead VM's lease (its expiry an hour past) and a live VM's (an hour ahead), as the leases' holders write them.
    dead, live = "local/.leases/" + "d" * 64, "local/.leases/" + "e" * 64
    now = int(time.time())
    for key, expires in ((dead, now - 3600), (live, now + 3600)):
        body = ("vm-%s 4242 %d\n" % (key[-1], expires)).encode()
        urllib.request.urlopen(urllib.request.Request(url(key), data=body, method="PUT", headers={
            "Content-Type": "application/octet-stream"}), timeout=10).read()  # not a form, which moto would parse
    time.sleep(4)  # both unwritten for longer than the tier's lease_duration, 3 s: both are read
    cache = ShardCacheHierarchy([
        ShardCacheTier(str(tmp_path / "local"), name="local"),
        S3ShardCacheTier(bucket=bucket, region="us-east-1", name="region", endpoint_url=endpoint,
                         addressing_style="path", lease_duration="3s"),
    ])
    dry = cache.gc(dry_run=True)
    assert dry.error is None and dry.failures == []
    assert [(t.tier, t.expired_leases, t.stale_probes, t.leftovers_removed) for t in dry.tiers] == [
        ("local", 0, 0, 0), ("region", 1, 0, 0)]
    assert keys() == [dead, live]
    swept = cache.gc()
    assert swept.error is None
    assert (swept.tiers[1].expired_leases, swept.tiers[1].leftovers_removed) == (1, 1)
    assert keys() == [live]


@contextlib.contextmanager
def proxy_in_front(tmp_path, endpoint, mode):
    """tests/support/cloud_proxy.py in front of `endpoint`, started with `mode`: yields its URL and a function that
    returns its per-operation request counts. Stopped on the way out."""
    mode_file, port_file = str(tmp_path / "proxy.mode"), str(tmp_path / "proxy.port")
    with open(mode_file, "w") as f:
        f.write(mode + "\n")
    log = open(str(tmp_path / "proxy.log"), "wb")
    proxy = subprocess.Popen([sys.executable, os.path.join(REPO, "tests", "support", "cloud_proxy.py"), "--upstream",
                              endpoint, "--mode-file", mode_file, "--port-file", port_file], stdout=log,
                             stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 15
        while not (os.path.exists(port_file) and os.path.getsize(port_file) > 0):
            assert proxy.poll() is None and time.monotonic() < deadline, "cloud proxy did not start"
            time.sleep(0.05)
        proxy_url = "http://127.0.0.1:%s" % open(port_file).read().strip()

        def ops():
            return json.loads(urllib.request.urlopen(proxy_url + "/_proxy/stats", timeout=10).read())["ops"]

        yield proxy_url, ops
    finally:
        proxy.terminate()
        proxy.wait(10)
        log.close()


def local_over_bucket(tmp_path, bucket, endpoint):
    return ShardCacheHierarchy([
        ShardCacheTier(str(tmp_path / "local"), name="local"),
        S3ShardCacheTier(bucket=bucket, region="us-east-1", name="region", endpoint_url=endpoint,
                         addressing_style="path"),
    ])


def interrupted(call, ops, op):
    """Runs `call` and presses Ctrl-C (as a terminal delivers it: see
    test_ctrl_c_stops_the_warm_and_leaves_no_partial_shard) once the proxy has been asked for `op` (which it holds);
    asserts that the call raised KeyboardInterrupt. The seconds from the interrupt until the call returned."""
    interrupted_at = []

    def interrupt_once_held():
        deadline = time.monotonic() + 30
        while ops().get(op, 0) < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        interrupted_at.append(time.monotonic())
        _thread.interrupt_main()

    # A process started with SIGINT ignored (nohup) would install no handler, and interrupt_main() would do nothing.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    watcher = threading.Thread(target=interrupt_once_held, daemon=True)
    watcher.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            call()
        return time.monotonic() - interrupted_at[0]
    finally:
        watcher.join(60)
        signal.signal(signal.SIGINT, previous)


def test_ctrl_c_stops_a_check_and_leaves_no_probe_in_the_bucket(env, tmp_path, monkeypatch):
    endpoint, bucket = moto_bucket(monkeypatch)
    # The proxy holds the read-back of the check's probe object.
    with proxy_in_front(tmp_path, endpoint, "delay seconds=60 op=Probe:GetObject") as (proxy_url, ops):
        cache = local_over_bucket(tmp_path, bucket, proxy_url)
        stopped_after = interrupted(cache.check, ops, "Probe:GetObject")
        counted = ops()
        assert counted.get("Probe:GetObject") == 1, counted
        # Not after the held read-back (60 s): the check was stopped.
        assert stopped_after < 10, "the check took %.1f s to stop" % stopped_after
        # The probe was stored, and deleted on the way out; no other step was begun.
        assert (counted.get("Probe:PutObject"), counted.get("Probe:DeleteObject")) == (1, 1), counted
        listing = urllib.request.urlopen("%s/%s?list-type=2" % (endpoint, bucket), timeout=10).read().decode()
        assert ".datavo-check/" not in listing


def test_ctrl_c_stops_an_ls_held_in_a_list_request(env, tmp_path, monkeypatch):
    endpoint, bucket = moto_bucket(monkeypatch)
    # The proxy holds the bucket's listing for a minute: an ls that could not be stopped would take that long.
    with proxy_in_front(tmp_path, endpoint, "delay seconds=60 op=ListObjectsV2") as (proxy_url, ops):
        cache = local_over_bucket(tmp_path, bucket, proxy_url)
        stopped_after = interrupted(cache.ls, ops, "ListObjectsV2")
        assert stopped_after < 10, "the ls took %.1f s to stop" % stopped_after
        assert ops().get("ListObjectsV2") == 1, ops()


def warmed_cache(tmp_path, max_bytes=None):
    cache = ShardCacheHierarchy([ShardCacheTier(str(tmp_path / "tier"), max_bytes, name="local")])
    return cache, warm(DATASET, ["audio.wav"], cache, progress=False)


def test_ls_lists_what_warm_recorded_as_the_cli_does_and_rm_removes_a_dataset(env, tmp_path, datavo_bin):
    cache, report = warmed_cache(tmp_path)
    listing = cache.ls()
    assert listing.error is None and listing.failures == [] and listing.instance is None
    assert listing.entries == len(listing.entry_list) == SHARDS and listing.size_bytes == report.size_bytes
    assert [(t.tier, t.entries, t.size_bytes, t.listed) for t in listing.tiers] == [
        ("local", SHARDS, report.size_bytes, True)]
    assert {(e.tier, e.dataset + "/" + e.split, e.revision, tuple(e.keys)) for e in listing.entry_list} == {
        ("local", DATASET, report.revision, ("audio.wav",))}
    assert sorted(e.shard_index for e in listing.entry_list) == list(range(SHARDS))
    assert all(isinstance(e.last_access, datetime.datetime) and len(e.content_hash) == 64 for e in listing.entry_list)
    instance = listing.entry_list[0].instance
    assert len(cache.ls(instance=instance).entry_list) == SHARDS and cache.ls(instance="local").entry_list == []
    config = tmp_path / "shards.yaml"
    config.write_text("tiers:\n  - name: local\n    path: %s\n" % (tmp_path / "tier"))
    cli = json.loads(subprocess.run([datavo_bin, "--json", "--config", str(config), "cache", "ls"],
                                    capture_output=True, text=True, check=True).stdout)
    assert cli["entries"] == listing.entries and cli["size_bytes"] == listing.size_bytes
    assert cli["tiers"] == [{"tier": "local", "entries": SHARDS, "size_bytes": report.size_bytes, "listed": True}]
    assert sorted(e["content_hash"] for e in cli["entry_list"]) == sorted(e.content_hash for e in listing.entry_list)

    missing = cache.rm(["0" * 64], instance=instance)
    assert missing.not_cached == 1 and missing.removed == 0 and isinstance(missing.error, FileNotFoundError)
    with pytest.raises(FileNotFoundError) as raised:
        missing.raise_for_error()
    assert raised.value.report is missing
    one = listing.entry_list[0].content_hash
    first = cache.rm(one, instance=instance)
    assert first.error is None and first.removed == 1
    assert [(e.content_hash, e.reason, e.removed_from) for e in first.entry_list] == [(one, "named", ["local"])]
    rest = cache.rm(dataset=DATASET, instance=instance)
    assert rest.error is None and rest.removed == SHARDS - 1 and {e.reason for e in rest.entry_list} == {"of_dataset"}
    assert cache.ls().entry_list == []
    with pytest.raises(ValueError):
        cache.rm(["not a hash"])
    with pytest.raises(ValueError):
        cache.rm()


def test_rm_leaves_a_shared_tier_alone_unless_it_is_named(env, tmp_path, monkeypatch):
    cache, _ = warmed_cache(tmp_path)
    entries = cache.ls().entry_list
    instance = entries[0].instance
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "unused")
    # The bucket's endpoint is a closed port: any request to it would be a failure in the report.
    with_bucket = ShardCacheHierarchy([
        ShardCacheTier(str(tmp_path / "tier"), name="local"),
        S3ShardCacheTier(bucket="b-1", region="us-east-1", endpoint_url="http://127.0.0.1:9", name="bucket"),
    ])
    default = with_bucket.rm(entries[0].content_hash, instance=instance)
    assert default.error is None and default.removed == 1
    assert [e.removed_from for e in default.entry_list] == [["local"]] and default.entry_list[0].failures == []
    assert default.skipped_tiers == ["bucket"]
    assert [(t.tier, t.type, t.shared, t.touched) for t in default.tiers] == [
        ("local", "folder", False, True), ("bucket", "s3", True, False)]
    named = with_bucket.rm(entries[1].content_hash, instance=instance, tier="local")
    assert named.error is None and named.entry_list[0].removed_from == ["local"] and named.skipped_tiers == ["bucket"]
    with pytest.raises(ValueError, match="no tier named 'nope'"):
        with_bucket.rm(entries[2].content_hash, instance=instance, tier=["nope"])
    with pytest.raises(ValueError, match="tier or all_tiers"):
        with_bucket.rm(entries[2].content_hash, instance=instance, tier="bucket", all_tiers=True)
    assert len(cache.ls().entry_list) == SHARDS - 2


def test_verify_finds_and_quarantines_a_corrupt_entry(env, tmp_path):
    cache, _ = warmed_cache(tmp_path)
    clean = cache.verify()
    assert clean.error is None and [(t.tier, t.checked, t.ok, t.bad) for t in clean.tiers] == [
        ("local", SHARDS, SHARDS, 0)]
    entry = cache.ls().entry_list[0]
    path = cache.get_or_fetch(entry.content_hash, lambda f: pytest.fail("a hit must not fetch"),
                              instance=entry.instance)
    with open(path, "r+b") as f:
        f.seek(700)
        byte = f.read(1)
        f.seek(700)
        f.write(bytes([byte[0] ^ 0xFF]))
    found = cache.verify()
    assert found.tiers[0].bad == 1 and found.unrepaired == 1 and isinstance(found.error, errors.IntegrityError)
    assert found.tiers[0].bad_paths and entry.content_hash in found.tiers[0].bad_paths[0]
    repaired = cache.verify(repair=True)
    assert repaired.tiers[0].quarantined == 1 and repaired.unrepaired == 0 and repaired.error is None
    assert len(cache.ls().entry_list) == SHARDS - 1


def test_gc_and_verify_say_what_they_do_with_a_cloud_tier(env, tmp_path, monkeypatch):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "unused")

    def hierarchy(**bucket_options):
        # The bucket's endpoint is a closed port: a request to it is a failure in the report.
        return ShardCacheHierarchy([
            ShardCacheTier(str(tmp_path / "tier"), name="local"),
            S3ShardCacheTier(bucket="b-1", region="us-east-1", endpoint_url="http://127.0.0.1:9", name="bucket",
                             **bucket_options)])

    # Without max_age no entry is deleted, but the bucket is still listed for the leases and check probes that killed
    # processes left in it: a bucket it cannot reach is the report's failure, naming the tier.
    lifecycle = hierarchy().gc()
    assert [t.tier for t in lifecycle.failures] == ["bucket"] and lifecycle.error is not None
    assert [(t.tier, t.type, t.policy, t.max_age_seconds) for t in lifecycle.tiers] == [
        ("local", "folder", "evict", None), ("bucket", "s3", "lifecycle", None)]
    assert [(t.expired_leases, t.stale_probes, t.leftovers_removed) for t in lifecycle.tiers] == [(0, 0, 0)] * 2
    expiring = hierarchy(max_age="2d").gc(dry_run=True)
    assert [t.tier for t in expiring.failures] == ["bucket"] and expiring.error is not None
    assert [(t.tier, t.policy, t.max_age_seconds) for t in expiring.tiers] == [
        ("local", "evict", None), ("bucket", "expire", 2 * 86400)]
    # verify checks the bucket's objects: one it cannot reach is a row with its error (and the command's failure),
    # not a crash, and the folder tier is verified all the same.
    verified = hierarchy().verify(full=True)
    assert [t.tier for t in verified.tiers] == ["local"] and verified.not_verified == []
    assert verified.depth == "full"
    assert [(t.tier, t.type, t.read_only, t.objects, t.bad) for t in verified.objects] == [
        ("bucket", "s3", False, 0, 0)]
    assert isinstance(verified.objects[0].error, DatavoError)
    assert isinstance(verified.error, DatavoError) and "tier 'bucket' could not be verified" in str(verified.error)


def test_gc_evicts_to_the_budget_and_check_and_stats_describe_the_tiers(env, tmp_path):
    cache, report = warmed_cache(tmp_path)
    nothing = cache.gc()
    assert nothing.error is None and [(t.tier, t.evicted) for t in nothing.tiers] == [("local", 0)]
    assert nothing.tiers[0].entries_bytes == report.size_bytes
    # The same directory with a budget of about two and a half shards: gc evicts the rest (a dry run first, which
    # removes nothing, then the same plan). Whether one or two shards stay depends on the sizes of the most recent
    # ones (they vary) and on the tier's own files, which count against the budget too.
    shard = report.size_bytes // SHARDS
    budget = 2 * shard + shard // 2
    small = ShardCacheHierarchy([ShardCacheTier(str(tmp_path / "tier"), budget, name="local")])
    dry = small.gc(dry_run=True)
    assert dry.dry_run and SHARDS - 2 <= dry.tiers[0].evicted <= SHARDS - 1, dry
    assert len(small.ls().entry_list) == SHARDS
    done = small.gc()
    assert done.tiers[0].evicted == dry.tiers[0].evicted and done.tiers[0].freed_bytes > 0
    assert len(small.ls().entry_list) == SHARDS - done.tiers[0].evicted
    assert done.tiers[0].used_bytes <= budget

    checked = cache.check()
    assert checked.ok and checked.error is None and checked.tiers[0].ok and checked.tiers[0].writable
    assert {"write", "read"} <= {step.step for step in checked.tiers[0].steps}, checked.tiers[0].steps
    assert all(step.ok for step in checked.tiers[0].steps)

    rows = cache.stats()
    assert [r.name for r in rows] == ["local"] and rows[0].stats.misses >= SHARDS
    assert cache.stats(reset=True)[0].stats.misses == 0


def test_a_cold_pass_shows_a_bar_of_samples_and_a_warm_one_none(env, capsys):
    stream = SampleStream.from_dataset(DATASET, keys=["audio.wav"], progress=True)
    assert sum(1 for _ in stream) == SAMPLES
    bar = capsys.readouterr().err
    assert "read " + DATASET in bar and "%d/%d" % (SAMPLES, SAMPLES) in bar, bar
    assert sum(1 for _ in stream) == SAMPLES  # every shard cached now: no bar
    assert capsys.readouterr().err == ""
    passing = iter(SampleStream.from_dataset(DATASET, keys=["transcript.txt"], progress=False))
    assert sum(1 for _ in passing) == SAMPLES and passing.stats()["origin_fetches"] == SHARDS
    assert capsys.readouterr().err == ""
