"""get_or_fetch through each cloud tier against its local emulator (tests/support/emulators.sh): a full miss on
machine A installs the shard locally and uploads it; machine B (a fresh folder tier, same bucket) is then served
from the bucket without calling its fetcher, and reads a local file.

Endpoints come from the harness's exports (MOTO_S3_ENDPOINT or S3RVER_*, GCS_EMULATOR_ENDPOINT,
AZURITE_BLOB_ENDPOINT ...) when they are set; otherwise each module fixture starts its emulator with
`tests/support/emulators.sh up NAME` (npm install cached in $DATAVO_EMULATOR_DIR) and stops it afterwards. An
emulator that cannot be had is a skip, except under DATAVO_REQUIRE_EMULATORS=1 (scripts/test.sh sets it), where it
is a failure. These tests need the cloud tiers' C++ backends: until those land, the tier factories answer
`unsupported` and these tests fail.
"""
import base64
import datetime
import hashlib
import hmac
import io
import os
import shlex
import subprocess
import tarfile
import urllib.request
import uuid

import pytest

from conftest import DATASET, REPO, SAMPLES, SHARDS
from datavo_sdk import (
    AzureBlobShardCacheTier,
    GcsShardCacheTier,
    S3ShardCacheTier,
    SampleStream,
    ShardCacheHierarchy,
    ShardCacheTier,
)

HARNESS = os.path.join(REPO, "tests", "support", "emulators.sh")


def unavailable(why):
    if os.environ.get("DATAVO_REQUIRE_EMULATORS") == "1":
        pytest.fail("DATAVO_REQUIRE_EMULATORS=1: " + why)
    pytest.skip(why)


def emulator(name, variable, tmp_path_factory):
    """The environment of emulator `name` (a dict); starts it when `variable` is not already exported."""
    if os.environ.get(variable):
        return dict(os.environ), None
    run_dir = str(tmp_path_factory.mktemp("emulators-" + name))
    env = dict(os.environ, DATAVO_EMULATOR_RUN_DIR=run_dir)
    env.setdefault("DATAVO_EMULATOR_DIR", os.path.join(os.path.expanduser("~"), ".cache", "datavo", "emulators"))
    try:
        up = subprocess.run(["bash", HARNESS, "up", name], env=env, capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as e:
        unavailable("cannot start %s with %s: %s" % (name, HARNESS, e))
    if up.returncode != 0:
        unavailable("%s up %s failed: %s" % (HARNESS, name, up.stderr.strip()[-2000:]))
    for line in up.stdout.splitlines():
        words = shlex.split(line)
        if len(words) >= 2 and words[0] == "export":
            for assignment in words[1:]:
                key, _, value = assignment.partition("=")
                env[key] = value
    if not env.get(variable):
        unavailable("%s up %s did not export %s" % (HARNESS, name, variable))
    return env, (lambda: subprocess.run(["bash", HARNESS, "down", name], env=env, capture_output=True, timeout=120))


@pytest.fixture(scope="module")
def emulators(tmp_path_factory):
    started = []
    envs = {}

    def get(name, variable):
        if name not in envs:
            envs[name], stop = emulator(name, variable, tmp_path_factory)
            if stop:
                started.append(stop)
        return envs[name]

    yield get
    for stop in started:
        stop()


def shard():
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tf:
        for name, data in (("utt_0001.audio.wav", os.urandom(70000)), ("utt_0001.transcript.txt", b"hello\n")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def roundtrip(tmp_path, make_cloud_tier):
    """Machine A misses everywhere and fetches; machine B is served by the bucket. Returns B's cache_info."""
    data = shard()
    content_hash = hashlib.sha256(uuid.uuid4().bytes).hexdigest()
    a = ShardCacheHierarchy([ShardCacheTier(str(tmp_path / "a"), name="a"), make_cloud_tier()])
    path_a = a.get_or_fetch(content_hash, lambda f: f.write(data))
    assert path_a.startswith(str(tmp_path / "a")) and open(path_a, "rb").read() == data

    def must_not_fetch(f):
        raise AssertionError("machine B fetched from the origin although the bucket holds the shard")

    b = ShardCacheHierarchy([ShardCacheTier(str(tmp_path / "b"), name="b"), make_cloud_tier()])
    path_b = b.get_or_fetch(content_hash, must_not_fetch)
    assert path_b.startswith(str(tmp_path / "b")) and open(path_b, "rb").read() == data
    with tarfile.open(path_b) as tf:
        assert tf.extractfile("utt_0001.transcript.txt").read() == b"hello\n"
    info = b.cache_info()
    assert info[1].stats.hits >= 1 and info[0].entries == 1
    return info


def test_s3_tier_against_moto_or_s3rver(emulators, tmp_path, monkeypatch):
    env = emulators("moto", "MOTO_S3_ENDPOINT") if os.environ.get("DATAVO_S3_EMULATOR", "moto") == "moto" else None
    if env is not None:
        endpoint, bucket = env["MOTO_S3_ENDPOINT"], "datavo-sdk-%s" % uuid.uuid4().hex[:12]
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
        # moto (default mode) accepts an unsigned CreateBucket.
        urllib.request.urlopen(urllib.request.Request(endpoint + "/" + bucket, method="PUT"), timeout=10).read()
        single_flight = True
    else:
        env = emulators("s3rver", "S3RVER_ENDPOINT")
        endpoint, bucket = env["S3RVER_ENDPOINT"], env["S3RVER_BUCKET"]
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", env["S3RVER_ACCESS_KEY_ID"])
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", env["S3RVER_SECRET_ACCESS_KEY"])
        single_flight = False  # s3rver ignores conditional writes
    roundtrip(tmp_path, lambda: S3ShardCacheTier(bucket=bucket, region="us-east-1", name="region", prefix="sdk-test",
                                                 endpoint_url=endpoint, addressing_style="path", upload="sync",
                                                 single_flight=single_flight))


def test_stream_true_reads_a_buckets_shards_from_the_bucket_and_writes_no_local_copy(emulators, env, origin,
                                                                                     monkeypatch):
    # Issue 19: a shard that the region's bucket holds (and no folder tier) is streamed from the bucket through the
    # ticket's chunk digests: a hit of the bucket, no shard request to the origin, nothing written locally.
    endpoint = emulators("moto", "MOTO_S3_ENDPOINT")["MOTO_S3_ENDPOINT"]
    bucket = "datavo-sdk-%s" % uuid.uuid4().hex[:12]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    urllib.request.urlopen(urllib.request.Request(endpoint + "/" + bucket, method="PUT"), timeout=10).read()

    def machine(name):
        return ShardCacheHierarchy([ShardCacheTier(str(env / name), name=name),
                                    S3ShardCacheTier(bucket=bucket, region="us-east-1", name="region",
                                                     endpoint_url=endpoint, addressing_style="path", upload="sync")])

    keys = ["audio.wav", "transcript.txt"]
    reference = {s.id: (bytes(s["audio.wav"]), bytes(s["transcript.txt"]))
                 for s in SampleStream.from_dataset(DATASET, keys=keys, cache=machine("a"))}
    assert len(reference) == SAMPLES
    before = origin.requests()
    passed = iter(SampleStream.from_dataset(DATASET, keys=keys, cache=machine("b"), stream=True,
                                            stream_window=8 << 20))
    streamed = {s.id: (bytes(s["audio.wav"]), bytes(s["transcript.txt"])) for s in passed}
    assert streamed == reference
    stats = passed.stats()
    assert stats["streamed_shards"] == SHARDS and stats["origin_fetches"] == 0
    assert [(t["tier"], t["hits"]) for t in stats["tiers"]] == [("b", 0), ("region", SHARDS)]
    assert origin.requests().get("shard", 0) == before.get("shard", 0), "no shard request to the origin"
    written = [p for p in (env / "b").rglob("*") if p.is_file() and (p.suffix == ".tar" or ".staging" in p.parts)] \
        if (env / "b").exists() else []
    assert written == []


def test_gcs_tier_against_the_gcs_emulator(emulators, tmp_path, monkeypatch):
    env = emulators("gcs", "GCS_EMULATOR_ENDPOINT")
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", env.get("STORAGE_EMULATOR_HOST", env["GCS_EMULATOR_ENDPOINT"]))
    bucket = "datavo-sdk-%s" % uuid.uuid4().hex[:12]
    # The emulator ignores preconditions, so the cross-VM lease cannot be trusted there.
    roundtrip(tmp_path, lambda: GcsShardCacheTier(bucket=bucket, name="region", prefix="sdk-test",
                                                  endpoint_url=env["GCS_EMULATOR_ENDPOINT"], upload="sync",
                                                  single_flight=False))


def azurite_create_container(endpoint, account, key, container):
    """PUT ?restype=container, signed with SharedKey (path-style: the account appears twice in the resource)."""
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%a, %d %b %Y %H:%M:%S GMT")
    version = "2021-12-02"
    content_type = "application/octet-stream"  # urllib sends one with any body; it is part of what is signed
    fields = ["PUT", "", "", "", "", content_type] + [""] * 6
    string_to_sign = "\n".join(fields) + "\n" + "x-ms-date:%s\nx-ms-version:%s\n" % (date, version) + \
        "/%s/%s/%s\nrestype:container" % (account, account, container)
    signature = base64.b64encode(hmac.new(base64.b64decode(key), string_to_sign.encode(), hashlib.sha256).digest())
    request = urllib.request.Request(
        "%s/%s?restype=container" % (endpoint, container), method="PUT", data=b"",
        headers={"x-ms-date": date, "x-ms-version": version, "Content-Type": content_type,
                 "Authorization": "SharedKey %s:%s" % (account, signature.decode())})
    urllib.request.urlopen(request, timeout=10).read()


def test_azure_tier_against_azurite(emulators, tmp_path, monkeypatch):
    env = emulators("azurite", "AZURITE_BLOB_ENDPOINT")
    account, key = env["AZURITE_ACCOUNT_NAME"], env["AZURITE_ACCOUNT_KEY"]
    container = "datavo-sdk-%s" % uuid.uuid4().hex[:12]
    azurite_create_container(env["AZURITE_BLOB_ENDPOINT"], account, key, container)
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT", account)
    monkeypatch.setenv("AZURE_STORAGE_KEY", key)
    roundtrip(tmp_path, lambda: AzureBlobShardCacheTier(container_url=env["AZURITE_BLOB_ENDPOINT"] + "/" + container,
                                                        name="region", prefix="sdk-test", upload="sync"))
