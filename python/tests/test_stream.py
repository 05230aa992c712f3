"""SampleStream.from_dataset against a real `datavo serve`: samples, zero-copy fields and their
lifetime, pickling, warm passes without shard requests, sharding and shuffling, and error mapping."""
import gc
import json
import os
import pickle
import shutil
import socket
import subprocess
import threading

import pytest

from conftest import DATASET, SAMPLES, SHARDS, make_source
from datavo_sdk import DatavoError, Sample, SampleStream, ShardCacheHierarchy, ShardCacheTier, errors


def ids(stream):
    return [s.id for s in stream]


def test_iterates_every_sample_as_a_dict_with_zero_copy_fields(env, origin):
    ds = SampleStream.from_dataset(DATASET, keys=["audio.wav", "transcript.txt"])
    assert (ds.num_shards, ds.num_samples, ds.keys) == (SHARDS, SAMPLES, ["audio.wav", "transcript.txt"])
    source = os.path.join(os.path.dirname(origin.store), "src")
    seen = []
    for sample in ds:
        assert isinstance(sample, Sample) and isinstance(sample, dict)
        assert sample["__key__"] == sample.id
        assert set(sample) == {"__key__", "audio.wav", "transcript.txt"}
        wav = sample["audio.wav"]
        assert isinstance(wav, memoryview) and wav.readonly and wav.format == "B"
        with open(os.path.join(source, sample.id + ".audio.wav"), "rb") as f:
            assert wav == f.read()
        assert bytes(sample["transcript.txt"]).startswith(b"utterance ")
        seen.append(sample.id)
    assert seen == ["utt_%04d" % i for i in range(SAMPLES)]


def test_fields_share_one_buffer_per_shard_and_cannot_be_written(env):
    stream = iter(SampleStream.from_dataset(DATASET, keys=["audio.wav", "transcript.txt"]))
    first, second = next(stream), next(stream)
    assert first["audio.wav"].obj is first["transcript.txt"].obj is second["audio.wav"].obj  # one mapped shard
    with pytest.raises(TypeError):
        first["audio.wav"][0] = 0


def test_field_views_behave_as_slices_of_the_shard(env, origin):
    source = os.path.join(os.path.dirname(origin.store), "src")
    stream = iter(SampleStream.from_dataset(DATASET, keys=["audio.wav", "transcript.txt"]))
    for _ in range(3):
        sample = next(stream)
        with open(os.path.join(source, sample.id + ".transcript.txt"), "rb") as f:
            expected = f.read()
        view = sample["transcript.txt"]
        assert (len(view), view.nbytes, view.shape, view.ndim, view.itemsize) == (len(expected),) * 2 + (
            (len(expected),), 1, 1)
        assert view.tobytes() == expected and view[:9] == expected[:9] and view[-1] == expected[-1]
        assert hash(view) == hash(expected) and bytes(view[2:5]) == expected[2:5]
        assert memoryview(view).tobytes() == expected and view.c_contiguous
        with pytest.raises(IndexError):
            view[len(expected)]


def test_copy_gives_bytes(env):
    sample = next(iter(SampleStream.from_dataset(DATASET, keys=["audio.wav"], copy=True)))
    assert type(sample["audio.wav"]) is bytes and sample["audio.wav"][:4] == b"RIFF"


def test_use_after_release_raises_never_crashes(env):
    stream = iter(SampleStream.from_dataset(DATASET, keys=["audio.wav"]))
    sample = next(stream)
    view = sample["audio.wav"]
    assert len(view) > 44
    sample.release()
    for use in (lambda: len(view), lambda: view[0], lambda: bytes(view), lambda: view.tobytes()):
        with pytest.raises(ValueError, match="released"):
            use()
    with pytest.raises(ValueError):
        len(sample["audio.wav"])
    sample.release()  # idempotent
    assert "released" in repr(sample)
    with next(stream) as other:
        kept = other["audio.wav"]
    with pytest.raises(ValueError):
        kept[0]


def test_a_view_outlives_the_stream_and_the_cache_entry(env):
    stream = iter(SampleStream.from_dataset(DATASET, keys=["audio.wav"], prefetch=0))
    view = next(stream)["audio.wav"]  # the sample itself is gone; the view keeps the shard mapped
    expected = bytes(view)
    stream.close()
    del stream
    gc.collect()
    shutil.rmtree(os.environ["DATAVO_SHARD_CACHE_DIR"])  # evicted, deleted
    assert bytes(view) == expected and view[:4] == b"RIFF"


def test_samples_pickle_with_bytes_fields(env):
    sample = next(iter(SampleStream.from_dataset(DATASET, keys=["audio.wav", "transcript.txt"])))
    copy = pickle.loads(pickle.dumps(sample))
    assert isinstance(copy, Sample) and copy.id == sample.id
    assert type(copy["audio.wav"]) is bytes and copy["audio.wav"] == bytes(sample["audio.wav"])
    assert copy.to_bytes() == sample.to_bytes()
    sample.release()
    assert copy["transcript.txt"].startswith(b"utterance ")  # independent of the original


def test_second_pass_makes_no_shard_or_ticket_request(env, origin):
    before = origin.requests()
    assert len(ids(SampleStream.from_dataset(DATASET, keys=["audio.wav"]))) == SAMPLES
    cold = {k: origin.requests().get(k, 0) - before.get(k, 0) for k in ("manifest", "ticket", "shard")}
    assert cold == {"manifest": 1, "ticket": SHARDS, "shard": SHARDS}
    before = origin.requests()
    stream = SampleStream.from_dataset(DATASET, keys=["audio.wav"])
    passes = [iter(stream) for _ in range(2)]
    assert [len(list(p)) for p in passes] == [SAMPLES, SAMPLES]
    warm = {k: origin.requests().get(k, 0) - before.get(k, 0) for k in ("manifest", "ticket", "shard")}
    assert warm == {"manifest": 1, "ticket": 0, "shard": 0}  # one conditional manifest (304), then the pinned one
    stats = passes[1].stats()
    assert stats["samples"] == SAMPLES and stats["origin_fetches"] == 0 and stats["tiers"][0]["hits"] == SHARDS


def test_explicit_cache_and_config_path(env, tmp_path):
    custom = ShardCacheHierarchy([ShardCacheTier(str(tmp_path / "fast"), name="fast"),
                                  ShardCacheTier(str(tmp_path / "slow"), name="slow")])
    assert len(ids(SampleStream.from_dataset(DATASET, keys=["audio.wav"], cache=custom))) == SAMPLES
    assert [i.entries for i in custom.cache_info()] == [SHARDS, SHARDS]
    config = tmp_path / "shards.yaml"
    config.write_text("tiers:\n  - name: yaml\n    path: %s\n" % (tmp_path / "yaml"))
    stream = iter(SampleStream.from_dataset(DATASET, keys=["audio.wav"], cache_config_path=str(config)))
    assert len(list(stream)) == SAMPLES and stream.stats()["tiers"][0]["tier"] == "yaml"


def test_revision_is_pinned_by_from_dataset(env, origin, datavo_bin, tmp_path):
    ds = SampleStream.from_dataset(DATASET, keys=["audio.wav"])
    assert ds.revision >= 1
    pinned = SampleStream.from_dataset(DATASET, keys=["audio.wav"], revision=ds.revision)
    assert pinned.revision == ds.revision
    with pytest.raises(FileNotFoundError):
        SampleStream.from_dataset(DATASET, keys=["audio.wav"], revision=ds.revision + 1000)


def test_rank_split_is_disjoint_and_complete(env):
    parts = [ids(SampleStream.from_dataset(DATASET, keys=["audio.wav"], rank=r, world_size=3)) for r in range(3)]
    union = sorted(i for p in parts for i in p)
    assert union == sorted(set(union)) and len(union) == SAMPLES


def test_rank_from_the_environment(env, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    ds = SampleStream.from_dataset(DATASET, keys=["audio.wav"])
    assert ds.consumer() == (1, 2, 0, 1)
    assert len(ids(ds)) == SAMPLES // 2


def test_shuffle_is_deterministic_per_seed_and_epoch(env):
    ds = SampleStream.from_dataset(DATASET, keys=["audio.wav"], shuffle=True, seed=7)
    epoch0, epoch0_again = ids(ds), ids(ds)
    ds.set_epoch(1)
    epoch1 = ids(ds)
    other = SampleStream.from_dataset(DATASET, keys=["audio.wav"], shuffle=True, seed=7, epoch=1)
    assert epoch0 == epoch0_again and ids(other) == epoch1
    assert epoch0 != epoch1 and sorted(epoch0) == sorted(epoch1) == sorted(ids(SampleStream.from_dataset(
        DATASET, keys=["audio.wav"])))
    assert ids(SampleStream.from_dataset(DATASET, keys=["audio.wav"])) != epoch0  # manifest order differs


def test_the_shuffle_buffer_mixes_the_samples_of_shards_once_per_epoch(env):
    in_order = ids(SampleStream.from_dataset(DATASET, keys=["audio.wav"]))
    ds = SampleStream.from_dataset(DATASET, keys=["audio.wav"], seed=7, shuffle_buffer=50)
    stream = iter(ds)
    first = [s.id for s in stream]
    stats = stream.stats()
    assert (stats["samples"], stats["max_shuffle_buffered"], stats["shuffle_buffered"]) == (SAMPLES, 50, 0)
    assert sorted(first) == in_order and first != in_order
    assert ids(ds) == first  # one seed and epoch, one order
    ds.set_epoch(1)
    assert ids(ds) != first
    # Neighbours come from different shards: the first 20 samples (one shard's worth in order) span several.
    assert len({in_order.index(i) // (SAMPLES // SHARDS) for i in first[:20]}) >= 2
    with pytest.raises(ValueError, match="shuffle_buffer"):
        SampleStream.from_dataset(DATASET, keys=["audio.wav"], shuffle_buffer=-1)


def test_order_hints_and_the_prefetch_window_reach_the_stream(env, monkeypatch):
    # A hinted pass places every shard twice (landed, then read); the figures say so, and hints off places none.
    stream = iter(SampleStream.from_dataset(DATASET, keys=["audio.wav"], shuffle=True, seed=3))
    assert len([s.id for s in stream]) == SAMPLES
    stats = stream.stats()
    assert stats["hints_placed"] == 2 * SHARDS
    assert stats["max_prefetched"] <= 8 and stats["shard_wait_after_first_seconds"] <= stats["shard_wait_seconds"]
    plain = iter(SampleStream.from_dataset(DATASET, keys=["audio.wav"], order_hints=False, prefetch=2))
    assert len([s.id for s in plain]) == SAMPLES
    assert plain.stats()["hints_placed"] == 0 and plain.stats()["max_prefetched"] <= 2
    with pytest.raises(ValueError, match="prefetch_budget"):
        SampleStream.from_dataset(DATASET, keys=["audio.wav"], prefetch_budget=0.75)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "3")
    with pytest.raises(ValueError, match="LOCAL_WORLD_SIZE"):
        SampleStream.from_dataset(DATASET, keys=["audio.wav"], rank=0, world_size=2)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    assert len(ids(SampleStream.from_dataset(DATASET, keys=["audio.wav"], rank=1, world_size=2))) == SAMPLES // 2


def test_missing_dataset_or_key_is_file_not_found(env):
    with pytest.raises(FileNotFoundError) as raised:
        SampleStream.from_dataset("no_such_dataset/train", keys=["audio.wav"])
    assert isinstance(raised.value, DatavoError) and raised.value.code == "not_found"
    with pytest.raises(FileNotFoundError) as raised:
        SampleStream.from_dataset(DATASET, keys=["video.mp4"])
    assert "video.mp4" in str(raised.value) and "audio.wav" in str(raised.value)


def test_bad_arguments_are_value_errors(env, monkeypatch):
    with pytest.raises(ValueError, match="dataset"):
        SampleStream.from_dataset("not a dataset name", keys=["audio.wav"])
    with pytest.raises(ValueError):
        SampleStream.from_dataset(DATASET, keys=[])
    with pytest.raises(ValueError, match="rank"):
        SampleStream.from_dataset(DATASET, keys=["audio.wav"], rank=2, world_size=2)
    with pytest.raises(TypeError):
        SampleStream.from_dataset(DATASET)
    monkeypatch.delenv("DATAVO_SERVER")
    with pytest.raises(ValueError, match="DATAVO_SERVER"):
        SampleStream.from_dataset(DATASET, keys=["audio.wav"])


def test_bad_config_names_file_and_line(env, tmp_path):
    config = tmp_path / "shards.yaml"
    config.write_text("tiers:\n  - path: /tmp/x\n    type: ftp\n")
    with pytest.raises(ValueError) as raised:
        SampleStream.from_dataset(DATASET, keys=["audio.wav"], cache_config_path=str(config))
    assert "%s:3: tiers[0].type" % config in str(raised.value)


def test_wrong_token_is_permission_error(env, session_dir, datavo_bin, tmp_path, monkeypatch):
    from conftest import Origin, pack

    source, store = tmp_path / "src", tmp_path / "store"
    make_source(str(source), 4)
    pack(datavo_bin, str(source), str(store), dataset="secret/train", per_shard=2)
    token_file = tmp_path / "token"
    token_file.write_text("right-token\n")
    server = Origin(datavo_bin, str(store), str(tmp_path / "serve.log"), extra=("--token-file", str(token_file)))
    try:
        monkeypatch.setenv("DATAVO_TOKEN", "wrong-token")
        with pytest.raises(PermissionError) as raised:
            SampleStream.from_dataset("secret/train", keys=["audio.wav"], server=server.url)
        assert isinstance(raised.value, errors.PermissionDeniedError)
        ds = SampleStream.from_dataset("secret/train", keys=["audio.wav"], server=server.url, token="right-token")
        assert len(ids(ds)) == 4
    finally:
        server.stop()


def test_a_server_that_never_answers_is_a_timeout_error(env, monkeypatch):
    # A loopback socket that accepts connections and never sends a byte: every attempt stalls.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    accepted = []
    stop = threading.Event()

    def accept():
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                pass

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    monkeypatch.setenv("DATAVO_STALL_TIMEOUT", "1")
    try:
        with pytest.raises(TimeoutError) as raised:
            SampleStream.from_dataset(DATASET, keys=["audio.wav"], server="http://127.0.0.1:%d" % listener.getsockname()[1])
        assert isinstance(raised.value, errors.DatavoTimeoutError) and raised.value.code == "timeout"
    finally:
        stop.set()
        thread.join()
        for conn in accepted:
            conn.close()
        listener.close()


def test_one_iterator_per_thread_is_enforced_not_crashing(env):
    # Two threads on one iterator: the second is refused while the first refills (never a data race).
    stream = iter(SampleStream.from_dataset(DATASET, keys=["audio.wav"]))
    failures, counts = [], []

    def drain():
        n = 0
        try:
            for _ in stream:
                n += 1
        except ValueError as e:
            failures.append(e)
        counts.append(n)

    threads = [threading.Thread(target=drain) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(counts) <= SAMPLES
    assert all("two threads" in str(e) for e in failures)


def test_info_lines_follow_the_datavo_loggers_level(env, caplog):
    import logging

    caplog.set_level(logging.INFO, logger="datavo")
    ds = SampleStream.from_dataset(DATASET, keys=["audio.wav"])
    messages = [r.getMessage() for r in caplog.records if r.name == "datavo" and r.levelno == logging.INFO]
    assert any(m.startswith("reading %s revision %d" % (DATASET, ds.revision)) for m in messages), messages
    caplog.clear()
    caplog.set_level(logging.WARNING, logger="datavo")
    SampleStream.from_dataset(DATASET, keys=["audio.wav"])
    assert not [r for r in caplog.records if r.name == "datavo" and r.levelno < logging.WARNING]


def test_the_cli_and_the_sdk_resolve_a_dataset_alike(env, datavo_bin):
    """`datavo read`, `datavo warm` and the SDK go through one resolution (resolve_dataset in the C++ library): the
    same refusal of a key the dataset lacks, word for word, and the same shards of the same revision."""
    cli = subprocess.run([datavo_bin, "--json", "read", DATASET, "--key", "video.mp4"], capture_output=True, text=True)
    assert cli.returncode == 2, cli.stderr
    cli_error = json.loads(cli.stdout)["error"]
    with pytest.raises(FileNotFoundError) as raised:
        SampleStream.from_dataset(DATASET, keys=["video.mp4"])
    # One code in both front ends (reported_code in the C++ library), the CLI's exit code still 2 (bad input).
    assert cli_error["code"] == "not_found" and raised.value.code == "not_found"
    assert str(raised.value) == cli_error["message"]

    plan = subprocess.run([datavo_bin, "--json", "warm", DATASET, "--key", "audio.wav", "--dry-run"],
                          capture_output=True, text=True)
    assert plan.returncode == 0, plan.stderr
    plan = json.loads(plan.stdout)
    stream = SampleStream.from_dataset(DATASET, keys=["audio.wav"])
    assert plan["revision"] == stream.revision
    it = iter(stream)
    assert [s["shard_index"] for s in plan["shard_list"]] == it.shard_indices
    it.close()


def test_stream_true_reads_the_same_samples_from_the_origin_and_writes_no_shard(env, origin):
    # The cached read first, in a cache of its own, for the reference bytes.
    cached = {s.id: (bytes(s["audio.wav"]), bytes(s["transcript.txt"]))
              for s in SampleStream.from_dataset(DATASET, keys=["audio.wav", "transcript.txt"])}
    shutil.rmtree(str(env / "cache"))
    before = origin.requests()
    stream = SampleStream.from_dataset(DATASET, keys=["audio.wav", "transcript.txt"], stream=True,
                                       stream_window=8 << 20)
    passed = iter(stream)
    streamed = {}
    held = []
    for sample in passed:
        wav = sample["audio.wav"]
        assert isinstance(wav, memoryview) and wav.readonly
        streamed[sample.id] = (bytes(wav), bytes(sample["transcript.txt"]))
        held.append(wav)  # a streamed sample owns its bytes: its views stay valid as the window moves on
    assert streamed == cached and len(streamed) == SAMPLES
    assert [bytes(v) for v in held] == [cached[i][0] for i in sorted(cached)]
    stats = passed.stats()
    assert stats["streamed_shards"] == SHARDS and stats["origin_fetches"] == 0
    assert 0 < stats["max_stream_buffered"] <= 8 << 20 and stats["streamed_bytes"] > 0
    assert origin.requests().get("shard", 0) - before.get("shard", 0) == SHARDS
    cache_dir = env / "cache"
    written = [p for p in cache_dir.rglob("*") if p.is_file() and (p.suffix == ".tar" or ".staging" in p.parts)] \
        if cache_dir.exists() else []
    assert written == []


def test_stream_window_below_two_chunks_is_a_value_error(env):
    with pytest.raises(ValueError, match="stream_window must hold at least 2 chunks"):
        SampleStream.from_dataset(DATASET, keys=["audio.wav"], stream=True, stream_window=4096)
