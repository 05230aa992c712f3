"""The module's surface: the spec's seven names, tiers and their arguments, the hierarchy's
get_or_fetch and cache_info, errors, and logging through `logging`."""
import dataclasses
import datetime
import hashlib
import inspect
import io
import logging
import os
import pickle
import shutil
import socket
import subprocess
import sys
import tarfile

import pytest

import datavo_sdk
from datavo_sdk import (
    AzureBlobShardCacheTier,
    DatavoError,
    GcsShardCacheTier,
    S3ShardCacheTier,
    SampleStream,
    ShardCacheHierarchy,
    ShardCacheTier,
    get_default_shard_cache,
)
from datavo_sdk import errors

SPEC_NAMES = [
    "SampleStream",
    "ShardCacheHierarchy",
    "ShardCacheTier",
    "S3ShardCacheTier",
    "GcsShardCacheTier",
    "AzureBlobShardCacheTier",
    "get_default_shard_cache",
]


def a_hash(text):
    return hashlib.sha256(text.encode()).hexdigest()


def tar_bytes(members):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def test_exports_exactly_the_spec_names_plus_the_documented_extras():
    assert set(SPEC_NAMES) <= set(datavo_sdk.__all__)
    operations = {"warm", "WarmReport", "WarmShare", "WarmTier", "WarmTierUploads", "WarmFailure", "UploadSummary", "LsReport", "CacheEntry",
                  "TierLsTotal", "RmReport", "RemovedEntry", "RmTier", "GcReport", "TierGc", "VerifyReport",
                  "TierVerify", "TierNotVerified", "TierObjectVerify", "BadObject", "CheckReport", "TierCheck",
                  "CheckStep", "TierFailure"}  # python/README.md, "Operations"
    extras = {"DatavoError", "Sample", "Batch", "SampleBatches", "CacheInfo", "TierStats"}
    assert set(datavo_sdk.__all__) - set(SPEC_NAMES) == extras | operations
    for name in datavo_sdk.__all__:
        assert getattr(datavo_sdk, name) is not None
    assert datavo_sdk.__version__.count(".") == 2


def test_signatures_are_the_spec_ones():
    folder = inspect.signature(ShardCacheTier)
    assert list(folder.parameters)[:3] == ["path", "max_bytes", "name"]
    assert folder.parameters["max_bytes"].default is None and folder.parameters["name"].default is None
    assert {"max_age", "read_only"} <= set(folder.parameters)
    assert {"bucket", "region", "name", "prefix", "endpoint_url"} <= set(inspect.signature(S3ShardCacheTier).parameters)
    assert {"bucket", "project", "name", "prefix", "endpoint_url"} <= set(
        inspect.signature(GcsShardCacheTier).parameters
    )
    assert {"container_url", "name", "sas_token", "managed_identity_client_id", "prefix"} <= set(
        inspect.signature(AzureBlobShardCacheTier).parameters
    )
    stream = inspect.signature(SampleStream.from_dataset)
    assert list(stream.parameters)[:4] == ["name", "keys", "cache", "cache_config_path"]


def test_folder_tier_positional_and_keywords(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("CACHE_ROOT", str(tmp_path / "root"))
    positional = ShardCacheTier("/tmp/fast", 10 * 1024**3, "fast")
    keywords = ShardCacheTier(path="/scratch/datavo/shards", max_bytes=1_099_511_627_776, name="scratch")
    assert (positional.name, positional.max_bytes, positional.supports_direct_read) == ("fast", 10 * 1024**3, True)
    assert (keywords.name, keywords.max_bytes, keywords.type) == ("scratch", 1 << 40, "folder")
    # ~ and $VAR are expanded; the name defaults to the path; no max_bytes (or 0) is unbounded; sizes as in YAML.
    home = ShardCacheTier("~/cache", max_bytes="200GB")
    assert home.location == str(tmp_path / "cache") and home.name == home.location and home.max_bytes == 200 << 30
    assert ShardCacheTier("$CACHE_ROOT/x", max_bytes=0).max_bytes is None
    assert ShardCacheTier(tmp_path / "p").location == str(tmp_path / "p")  # os.PathLike
    # shards.yaml's other folder fields.
    extra = ShardCacheTier("/tmp/ro", read_only=True, max_age="30d", durability="none", verify="sampled",
                           verify_sample_every=10, lru_resolution="1m")
    assert extra.read_only is True
    assert ShardCacheTier("/tmp/age", max_age=3600).read_only is False
    # Constructing does no I/O: nothing was created.
    assert not os.path.exists(tmp_path / "cache") and not os.path.exists("/scratch/datavo/shards")


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        (dict(path="/tmp/x", max_bytes="ten"), "ShardCacheTier.max_bytes: invalid size"),
        (dict(path="relative/dir"), "ShardCacheTier.path: \"relative/dir\" is not an absolute path"),
        (dict(path="$DATAVO_UNSET_VARIABLE/x"), "ShardCacheTier.path:"),
        (dict(path="/tmp/x", max_age="0s"), "ShardCacheTier.max_age: must be positive"),
        (dict(path="/tmp/x", verify="always"), "ShardCacheTier.verify: unknown verify \"always\""),
        (dict(path="/tmp/x", max_bytes=-1), "ShardCacheTier.max_bytes"),
    ],
)
def test_bad_tier_arguments_raise_value_error_naming_the_argument(kwargs, fragment, monkeypatch):
    monkeypatch.delenv("DATAVO_UNSET_VARIABLE", raising=False)
    with pytest.raises(ValueError) as raised:
        ShardCacheTier(**kwargs)
    assert fragment in str(raised.value)
    assert isinstance(raised.value, errors.ConfigError) and isinstance(raised.value, DatavoError)
    assert raised.value.code == "config"


@pytest.mark.parametrize("cls", [ShardCacheTier, S3ShardCacheTier, GcsShardCacheTier, AzureBlobShardCacheTier])
def test_every_shards_yaml_field_is_a_keyword_of_its_tier_class(cls):
    # The C++ registry's field list of the type (include/datavo/tier_registry.hpp, tier_fields), walked here, so
    # that a field added to shards.yaml and not to the class fails this test.
    fields = datavo_sdk._datavo.tier_fields(cls._type)
    assert "name" in fields and "max_bytes" in fields
    parameters = list(inspect.signature(cls.__init__).parameters)[1:]
    assert sorted(parameters) == sorted(fields)


def test_cloud_tiers_take_a_lease_duration_like_shards_yaml():
    for duration in ("10s", 10, datetime.timedelta(seconds=10)):
        tier = S3ShardCacheTier("bucket", endpoint_url="http://127.0.0.1:9", lease_duration=duration)
        assert tier.name == "bucket"
    with pytest.raises(errors.ConfigError, match="S3ShardCacheTier.lease_duration: must be at least 3s"):
        S3ShardCacheTier("bucket", endpoint_url="http://127.0.0.1:9", lease_duration="2s")
    GcsShardCacheTier("bucket", endpoint_url="http://127.0.0.1:9", lease_duration="1m")
    AzureBlobShardCacheTier("http://127.0.0.1:9/account/container", lease_duration=90)


def test_tier_stats_has_the_c_plus_plus_counters_in_order():
    assert [f.name for f in dataclasses.fields(datavo_sdk.TierStats)] == datavo_sdk._datavo.tier_stat_names()


def test_unknown_keyword_is_a_type_error():
    with pytest.raises(TypeError):
        ShardCacheTier("/tmp/x", bucket="b")


def test_tiers_pickle_by_their_arguments():
    tier = ShardCacheTier("/tmp/fast", max_bytes="1GB", name="fast")
    copy = pickle.loads(pickle.dumps(tier))
    assert (copy.name, copy.max_bytes, copy.location) == ("fast", 1 << 30, "/tmp/fast")


def test_hierarchy_needs_a_folder_tier():
    with pytest.raises(ValueError) as raised:
        ShardCacheHierarchy([])
    assert "at least one tier" in str(raised.value)
    with pytest.raises(TypeError):
        ShardCacheHierarchy(["/tmp/x"])


def test_get_or_fetch_miss_hit_and_promotion(tmp_path):
    fast = ShardCacheTier(str(tmp_path / "fast"), max_bytes=10 << 20, name="fast")
    slow = ShardCacheTier(str(tmp_path / "slow"), name="slow")
    shard = tar_bytes({"a.txt": b"alpha", "b.txt": b"beta"})
    calls = []

    def fetcher(f):
        calls.append(f)
        f.write(shard)

    h = a_hash("miss-hit-promote")
    # Slow alone: a miss fetches once and installs.
    slow_only = ShardCacheHierarchy([slow])
    path = slow_only.get_or_fetch(h, fetcher)
    assert isinstance(path, str) and path.startswith(str(tmp_path / "slow")) and path.endswith(h + ".tar")
    assert len(calls) == 1
    # fast + slow: a hit on the slower tier is promoted, and the topmost copy is returned; no fetch.
    both = ShardCacheHierarchy([fast, slow])
    assert [t.name for t in both.tiers] == ["fast", "slow"]
    promoted = both.get_or_fetch(h, fetcher)
    assert promoted.startswith(str(tmp_path / "fast")) and len(calls) == 1
    # A hit on the top: no fetch either. The consumer's read path is one tarfile.open(local_path).
    again = both.get_or_fetch(h, fetcher)
    assert again == promoted and len(calls) == 1
    with tarfile.open(again) as tf:
        assert tf.extractfile("b.txt").read() == b"beta"
    info = {i.name: i for i in both.cache_info()}
    assert info["fast"].stats.promotions == 1 and info["fast"].stats.hits >= 1 and info["fast"].entries == 1
    assert info["slow"].stats.hits >= 1 and info["slow"].type == "folder"
    assert info["fast"].max_bytes == 10 << 20 and info["fast"].used_bytes >= len(shard)
    assert 0.0 <= info["fast"].stats.hit_rate <= 1.0


def test_full_miss_installs_into_every_tier(tmp_path):
    tiers = [ShardCacheTier(str(tmp_path / n), name=n) for n in ("a", "b")]
    h = a_hash("populate")
    path = ShardCacheHierarchy(tiers).get_or_fetch(h, lambda f: f.write(b"x" * 1000))
    assert path.startswith(str(tmp_path / "a"))
    assert [i.entries for i in ShardCacheHierarchy(tiers).cache_info()] == [1, 1]


def test_fetcher_gets_a_binary_file_object_and_can_hand_over_a_path(tmp_path):
    cache = ShardCacheHierarchy([ShardCacheTier(str(tmp_path / "c"))])
    seen = {}

    def by_copy(f):
        seen.update(writable=f.writable(), readable=f.readable(), mode=f.mode, closed=f.closed)
        shutil.copyfileobj(io.BytesIO(b"0123456789" * 1000), f)
        seen["tell"] = f.tell()
        f.write(memoryview(b"tail"))
        f.write(bytearray(b"!"))

    path = cache.get_or_fetch(a_hash("copy"), by_copy)
    assert seen == dict(writable=True, readable=False, mode="wb", closed=False, tell=10000)
    assert open(path, "rb").read() == b"0123456789" * 1000 + b"tail!"

    downloaded = tmp_path / "downloaded.tar"
    downloaded.write_bytes(b"from a tool that writes a file")
    path = cache.get_or_fetch(a_hash("path"), lambda f: f.write_file(str(downloaded)))
    assert open(path, "rb").read() == b"from a tool that writes a file"

    with pytest.raises(ValueError, match="contiguous"):
        cache.get_or_fetch(a_hash("strided"), lambda f: f.write(memoryview(b"abcdef")[::2]))

    def retry(f):
        f.write(b"garbage")
        f.restart()
        f.write(b"good")

    assert open(cache.get_or_fetch(a_hash("restart"), retry), "rb").read() == b"good"


def test_the_staging_file_is_closed_after_the_fetcher_returns(tmp_path):
    cache = ShardCacheHierarchy([ShardCacheTier(str(tmp_path / "c"))])
    kept = []
    cache.get_or_fetch(a_hash("kept"), lambda f: (kept.append(f), f.write(b"x")))
    assert kept[0].closed
    with pytest.raises(ValueError, match="closed staging file"):
        kept[0].write(b"late")


def test_fetcher_exception_propagates_and_nothing_is_installed(tmp_path):
    cache = ShardCacheHierarchy([ShardCacheTier(str(tmp_path / "c"), name="c")])

    class Boom(Exception):
        pass

    def failing(f):
        f.write(b"partial bytes")
        raise Boom("origin unreachable")

    h = a_hash("boom")
    with pytest.raises(Boom, match="origin unreachable") as raised:
        cache.get_or_fetch(h, failing)
    assert any(frame.name == "failing" for frame in raised.traceback)  # the fetcher's own traceback
    assert cache.cache_info()[0].entries == 0
    assert not any(p.name.endswith(".tar") for p in (tmp_path / "c").rglob("*"))
    # The next call fetches again and succeeds.
    assert cache.get_or_fetch(h, lambda f: f.write(b"ok"))


def test_fetcher_expectation_is_enforced(tmp_path):
    cache = ShardCacheHierarchy([ShardCacheTier(str(tmp_path / "c"))])
    with pytest.raises(errors.IntegrityError):
        cache.get_or_fetch(a_hash("size"), lambda f: (f.write(b"abc"), {"size": 4})[1])
    with pytest.raises(errors.IntegrityError):
        cache.get_or_fetch(a_hash("sha"), lambda f: (f.write(b"abc"), {"sha256": "0" * 64})[1])
    with pytest.raises(ValueError, match="'sha512'"):
        cache.get_or_fetch(a_hash("key"), lambda f: (f.write(b"abc"), {"sha512": "0"})[1])
    with pytest.raises(ValueError, match="64 hex"):
        cache.get_or_fetch(a_hash("hex"), lambda f: (f.write(b"abc"), {"sha256": "xyz"})[1])
    good = {"size": 3, "sha256": hashlib.sha256(b"abc").hexdigest()}
    assert cache.get_or_fetch(a_hash("good"), lambda f: (f.write(b"abc"), good)[1])
    assert cache.cache_info()[0].entries == 1


@pytest.mark.parametrize(
    "answer, error, message",
    [
        ({"size": "one"}, TypeError, "'size' must be an int .*not str 'one'"),
        ({"size": 3.0}, TypeError, "'size' must be an int .*not float 3.0"),
        ({"size": True}, TypeError, "'size' must be an int .*not bool True"),
        ({"size": -1}, ValueError, "'size' must be 0 or more"),
        ({"sha256": 5}, TypeError, "'sha256' must be a str .*not int 5"),
    ],
)
def test_a_fetchers_bad_answer_names_the_field(tmp_path, answer, error, message):
    cache = ShardCacheHierarchy([ShardCacheTier(str(tmp_path / "c"))])
    with pytest.raises(error, match=message):
        cache.get_or_fetch(a_hash("bad"), lambda f: (f.write(b"abc"), answer)[1])
    assert cache.cache_info()[0].entries == 0  # nothing installed


def test_two_tiers_of_one_name_are_refused_as_in_shards_yaml(tmp_path):
    with pytest.raises(errors.ConfigError, match='duplicate tier name "x"'):
        ShardCacheHierarchy([ShardCacheTier(str(tmp_path / "a"), name="x"), ShardCacheTier(str(tmp_path / "b"), name="x")])


@pytest.mark.parametrize(
    "bad, char",
    [("G" + "0" * 63, "'G'"), ("0" * 10 + "A" + "0" * 53, "'A'"), ("0" * 63 + " ", "' '"), ("0" * 63 + "é", "'é'")],
)
def test_bad_content_hash_is_a_value_error_naming_the_character(tmp_path, bad, char):
    cache = ShardCacheHierarchy([ShardCacheTier(str(tmp_path / "c"))])
    with pytest.raises(ValueError) as raised:
        cache.get_or_fetch(bad, lambda f: None)
    assert "character " + char in str(raised.value)
    assert isinstance(raised.value, errors.InvalidArgumentError)


def test_short_content_hash_is_a_value_error(tmp_path):
    cache = ShardCacheHierarchy([ShardCacheTier(str(tmp_path / "c"))])
    with pytest.raises(ValueError, match="64 lowercase hex characters"):
        cache.get_or_fetch("abc", lambda f: None)
    with pytest.raises(TypeError):
        cache.get_or_fetch(a_hash("x"), "not callable")


def test_capacity_skip_is_a_warning_on_the_datavo_logger(tmp_path, caplog):
    tiny = ShardCacheTier(str(tmp_path / "tiny"), max_bytes=100, name="tiny")
    big = ShardCacheTier(str(tmp_path / "big"), name="big")
    caplog.set_level(logging.WARNING, logger="datavo")
    path = ShardCacheHierarchy([tiny, big]).get_or_fetch(a_hash("too big"), lambda f: f.write(b"y" * 5000))
    assert path.startswith(str(tmp_path / "big"))
    records = [r for r in caplog.records if r.name == "datavo"]
    assert records and all(r.levelno == logging.WARNING for r in records)
    assert any("tiny" in r.getMessage() for r in records), [r.getMessage() for r in records]


def test_no_tier_accepting_raises(tmp_path):
    cache = ShardCacheHierarchy([ShardCacheTier(str(tmp_path / "tiny"), max_bytes=10)])
    with pytest.raises(DatavoError) as raised:
        cache.get_or_fetch(a_hash("capacity"), lambda f: f.write(b"z" * 100))
    assert raised.value.code in ("capacity",)


def test_get_default_shard_cache_follows_the_resolution_order(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("DATAVO_SHARD_CACHE_CONFIG", raising=False)
    monkeypatch.delenv("DATAVO_SHARD_CACHE_DIR", raising=False)
    if os.path.exists("/etc/datavo/shards.yaml"):
        pytest.fail("/etc/datavo/shards.yaml exists on this machine; the resolution-order test needs it absent")
    default = get_default_shard_cache()
    assert [(t.name, t.location, t.max_bytes) for t in default.tiers] == [
        ("default", str(tmp_path / "home/.cache/altavo/datavo/shards"), 50 << 30)
    ]
    monkeypatch.setenv("DATAVO_SHARD_CACHE_DIR", str(tmp_path / "dir"))
    assert get_default_shard_cache().tiers[0].location == str(tmp_path / "dir")
    user = tmp_path / "home/.config/datavo/shards.yaml"
    user.parent.mkdir(parents=True)
    user.write_text("tiers:\n  - name: user\n    path: /tmp/user-tier\n")
    assert get_default_shard_cache().tiers[0].name == "user"
    explicit = tmp_path / "explicit.yaml"
    explicit.write_text("tiers:\n  - name: explicit\n    path: /tmp/e\n    max_bytes: 1GB\n")
    monkeypatch.setenv("DATAVO_SHARD_CACHE_CONFIG", str(user))
    assert get_default_shard_cache(str(explicit)).tiers[0].name == "explicit"  # the argument beats the variable
    assert get_default_shard_cache().tiers[0].name == "user"
    # A hierarchy from a config pickles as "the hierarchy of that config".
    again = pickle.loads(pickle.dumps(get_default_shard_cache(str(explicit))))
    assert [t.name for t in again.tiers] == ["explicit"]


def test_bad_config_is_a_value_error_naming_file_and_line(tmp_path):
    config = tmp_path / "shards.yaml"
    config.write_text("tiers:\n  - name: a\n    path: /tmp/a\n    max_bytes: lots\n")
    with pytest.raises(ValueError) as raised:
        get_default_shard_cache(str(config))
    assert "%s:4: tiers[0].max_bytes" % config in str(raised.value)
    with pytest.raises(ValueError, match="missing.yaml"):
        get_default_shard_cache(str(tmp_path / "missing.yaml"))


def test_error_classes_cover_every_code_and_the_builtins():
    assert set(errors.BY_CODE) == {
        "invalid_argument", "config", "io", "permission_denied", "no_space", "not_found", "capacity", "integrity",
        "remote", "timeout", "conflict", "unsupported", "internal", "cancelled", "unreachable",
    }
    assert issubclass(errors.BY_CODE["unreachable"], ConnectionError)
    assert issubclass(errors.BY_CODE["unreachable"], errors.RemoteError)
    assert not issubclass(errors.RemoteError, ConnectionError)  # a 503 or a reset stream did reach the server
    assert issubclass(errors.BY_CODE["not_found"], FileNotFoundError)
    assert issubclass(errors.BY_CODE["permission_denied"], PermissionError)
    assert issubclass(errors.BY_CODE["timeout"], TimeoutError)
    assert issubclass(errors.BY_CODE["invalid_argument"], ValueError)
    assert issubclass(errors.BY_CODE["config"], ValueError)
    assert all(issubclass(cls, DatavoError) for cls in errors.BY_CODE.values())


def test_the_errors_module_is_importable_by_its_documented_name():
    # python/README.md names datavo_sdk.errors; `from datavo_sdk.errors import X` must work, not only the attribute.
    code = "from datavo_sdk.errors import IntegrityError, DatavoError; print(issubclass(IntegrityError, DatavoError))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True"
    assert sorted(errors.__all__) == sorted(
        name for name, value in vars(errors).items() if isinstance(value, type) and issubclass(value, DatavoError))


def test_an_origin_that_cannot_be_reached_is_a_connection_error(tmp_path):
    # A port with no listener: connection refused on every attempt. The caller can branch on the builtin.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(ConnectionError) as raised:
        SampleStream.from_dataset("voice/train", keys=["audio.wav"], server="http://127.0.0.1:%d" % port,
                                  cache=ShardCacheHierarchy([ShardCacheTier(str(tmp_path / "c"))]))
    assert isinstance(raised.value, errors.UnreachableError) and isinstance(raised.value, errors.RemoteError)
    assert raised.value.code == "remote"
    assert "127.0.0.1:%d" % port in str(raised.value)
