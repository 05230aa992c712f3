"""SampleStream.batches(): the batch path against a real `datavo serve`. Every sample once, in the stream's order;
fixed-size fields as one 2-D array (a zero-copy view of the shard when the tar lays them out at one stride, a copy
across shards, writable with copy=True), the rest as lists; `fixed` and its errors; without NumPy; pickling; and a
torch DataLoader over the batches."""
import os
import pickle
import subprocess
import sys

import numpy
import pytest

from conftest import DATASET, Origin, pack
from datavo_sdk import Batch, SampleBatches, SampleStream

TOKENS = "tokens_v1/train"
TOKEN_SAMPLES = 100
TOKEN_PER_SHARD = 30  # shards of 30, 30, 30 and 10 samples: batches of 16 cross shard boundaries
TOKEN_BYTES = 300  # not a multiple of 512: the tar pads each member, so fields lie 300 bytes apart only in a copy


def token_fields(i):
    tokens = bytes((i * 7 + j) % 251 for j in range(TOKEN_BYTES))
    label = i.to_bytes(4, "little")
    text = ("sample %d" % i + "!" * (i % 5)).encode()
    return {"tokens.bin": tokens, "label.cls": label, "text.txt": text}


@pytest.fixture(scope="module")
def tokens_origin(session_dir, datavo_bin):
    """tokens_v1/train: 100 samples with two fixed-size keys (tokens.bin, label.cls) and one of varying size."""
    root = os.path.join(session_dir, "tokens")
    source = os.path.join(root, "src")
    os.makedirs(source)
    for i in range(TOKEN_SAMPLES):
        for key, value in token_fields(i).items():
            with open(os.path.join(source, "s%04d.%s" % (i, key)), "wb") as f:
                f.write(value)
    pack(datavo_bin, source, os.path.join(root, "store"), dataset=TOKENS, per_shard=TOKEN_PER_SHARD)
    server = Origin(datavo_bin, os.path.join(root, "store"), os.path.join(root, "serve.log"))
    yield server
    server.stop()


@pytest.fixture
def tokens(env, tokens_origin, monkeypatch):
    monkeypatch.setenv("DATAVO_SERVER", tokens_origin.url)
    return SampleStream.from_dataset(TOKENS, keys=["tokens.bin", "label.cls", "text.txt"])


def test_every_sample_once_in_order_with_fixed_fields_stacked(tokens):
    batches = tokens.batches(16)
    assert isinstance(batches, SampleBatches) and len(batches) == 7  # 6 of 16 and one of 4
    seen = []
    for batch in batches:
        assert isinstance(batch, Batch) and isinstance(batch, dict)
        assert set(batch) == {"__key__", "tokens.bin", "label.cls", "text.txt"}
        n = batch.num_samples
        assert batch.ids == batch["__key__"] and n == (16 if len(seen) < 96 else 4)
        tokens_array, labels = batch["tokens.bin"], batch["label.cls"]
        assert isinstance(tokens_array, numpy.ndarray) and tokens_array.dtype == numpy.uint8
        assert tokens_array.shape == (n, TOKEN_BYTES) and labels.shape == (n, 4)
        assert isinstance(batch["text.txt"], list) and len(batch["text.txt"]) == n
        for row, sample_id in enumerate(batch.ids):
            expected = token_fields(int(sample_id[1:]))
            assert tokens_array[row].tobytes() == expected["tokens.bin"]
            assert int.from_bytes(labels[row].tobytes(), "little") == int(sample_id[1:])
            assert isinstance(batch["text.txt"][row], memoryview) and batch["text.txt"][row] == expected["text.txt"]
        seen.extend(batch.ids)
    assert seen == ["s%04d" % i for i in range(TOKEN_SAMPLES)]
    assert len(tokens.batches(16, drop_last=True)) == 6
    assert sum(b.num_samples for b in tokens.batches(16, drop_last=True)) == 96


@pytest.mark.parametrize("size", [1, 3, 16, 64, 100, 1500, 2**40])
def test_batches_of_any_size_are_whole_and_in_order_over_hand_overs_of_several(tokens, size):
    # The reader thread hands over several batches at once (size, 2*size, 4*size, ... samples, up to about 1,024):
    # every batch still holds `size` samples but the last, in the stream's order, its arrays matching its ids. A
    # huge size is a bound (the reader thread once reserved room for that many samples, and aborted the process).
    sizes, ids = [], []
    for batch in tokens.batches(size):
        sizes.append(batch.num_samples)
        ids.extend(batch.ids)
        labels = batch["label.cls"]
        assert [int.from_bytes(row.tobytes(), "little") for row in labels] == [int(i[1:]) for i in batch.ids]
    whole, short = divmod(TOKEN_SAMPLES, size)
    assert sizes == [size] * whole + ([short] if short else [])
    assert ids == ["s%04d" % i for i in range(TOKEN_SAMPLES)]
    assert [b.num_samples for b in tokens.batches(size, drop_last=True)] == [size] * whole


def test_arrays_are_views_of_the_shard_within_one_and_copies_across(tokens):
    batches = list(tokens.batches(16))
    inside, across = batches[0]["tokens.bin"], batches[1]["tokens.bin"]  # samples 0-15; 16-31 cross into shard 2
    assert not inside.flags.owndata and not inside.flags.writeable
    assert inside.strides[0] > TOKEN_BYTES and not inside.flags.c_contiguous  # header + padding between rows
    assert across.flags.c_contiguous and across.strides == (TOKEN_BYTES, 1) and not across.flags.writeable
    with pytest.raises(ValueError):
        inside[0, 0] = 1
    for array in (inside, across):
        with pytest.raises(ValueError):
            array.flags.writeable = True  # the array's base (the shard's buffer, or the copy's) refuses it too
    copied = next(iter(SampleStream.from_dataset(TOKENS, keys=["tokens.bin"], copy=True).batches(16)))
    assert copied["tokens.bin"].flags.writeable and copied["tokens.bin"].flags.c_contiguous
    copied["tokens.bin"][0, 0] = 1  # the caller's own memory
    assert isinstance(next(iter(tokens.batches(4, fixed=())))["text.txt"][0], memoryview)


def test_a_view_outlives_its_batch_and_the_stream(tokens):
    iterator = iter(tokens.batches(8))
    array = next(iterator)["tokens.bin"]
    iterator.close()
    del iterator
    assert array[3].tobytes() == token_fields(3)["tokens.bin"]


def test_fixed_names_the_keys_to_stack_and_refuses_what_cannot_be(tokens, origin):
    batch = next(iter(tokens.batches(8, fixed=["tokens.bin"])))
    assert isinstance(batch["tokens.bin"], numpy.ndarray) and isinstance(batch["label.cls"], list)
    voice = SampleStream.from_dataset(DATASET, keys=["audio.wav", "transcript.txt"], server=origin.url)
    auto = next(iter(voice.batches(8)))
    assert isinstance(auto["audio.wav"], list)  # sizes differ within the batch: "auto" does not stack them
    with pytest.raises(ValueError, match=r"fixed key 'audio.wav' has fields of different sizes.*'utt_0000'.*'utt_0001'"):
        next(iter(voice.batches(8, fixed=["audio.wav"])))
    with pytest.raises(ValueError, match="fixed names 'nope', which the stream does not read"):
        tokens.batches(8, fixed=["nope"])
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="batch_size must be an int of 1 or more"):
            tokens.batches(bad)
    with pytest.raises(ValueError, match="fixed must be 'auto' or a sequence of keys"):
        tokens.batches(8, fixed="tokens.bin")


def test_batches_follow_the_streams_order_and_share_for_shuffles_epochs_and_ranks(env, tokens_origin, monkeypatch):
    monkeypatch.setenv("DATAVO_SERVER", tokens_origin.url)
    for rank in (0, 1):
        stream = SampleStream.from_dataset(TOKENS, keys=["label.cls"], shuffle=True, seed=5, shuffle_buffer=20,
                                           rank=rank, world_size=2)
        for epoch in (0, 1):
            stream.set_epoch(epoch)
            expected = [s.id for s in stream]
            got = [i for b in stream.batches(7) for i in b.ids]
            assert got == expected and len(got) == len(stream)
            labels = numpy.concatenate([b["label.cls"] for b in stream.batches(7)])
            assert [int.from_bytes(row.tobytes(), "little") for row in labels] == [int(i[1:]) for i in expected]


def test_stats_and_close_of_a_batch_pass(tokens):
    iterator = iter(tokens.batches(10))
    next(iterator)
    assert iterator.stats()["samples"] >= 10
    iterator.close()
    with pytest.raises(StopIteration):
        next(iterator)


def test_batches_pickle_with_arrays_kept_and_views_copied(tokens):
    batch = next(iter(tokens.batches(5)))
    again = pickle.loads(pickle.dumps(batch))
    assert isinstance(again, Batch) and again.ids == batch.ids
    assert numpy.array_equal(again["tokens.bin"], batch["tokens.bin"])
    assert again["text.txt"] == [v.tobytes() for v in batch["text.txt"]]
    assert repr(again) == "Batch(5 samples, {label.cls: array 5x4, text.txt: 5 fields, tokens.bin: array 5x300})"


def test_without_numpy_arrays_are_two_dimensional_memoryviews(env, tokens_origin):
    code = r"""
import pickle, sys
sys.modules["numpy"] = None  # NumPy not importable
from datavo_sdk import SampleStream
batch = next(iter(SampleStream.from_dataset("%s", keys=["tokens.bin", "label.cls"]).batches(16)))
view = batch["tokens.bin"]
assert isinstance(view, memoryview) and view.shape == (16, %d) and view.readonly, (type(view), view.shape)
assert view.tobytes()[:%d] == bytes((0 * 7 + j) %% 251 for j in range(%d))
again = pickle.loads(pickle.dumps(batch))
assert again["tokens.bin"].shape == (16, %d) and again["tokens.bin"].tobytes() == view.tobytes()
print("ok", view.strides)
""" % (TOKENS, TOKEN_BYTES, TOKEN_BYTES, TOKEN_BYTES, TOKEN_BYTES)
    environment = dict(os.environ, DATAVO_SERVER=tokens_origin.url)
    done = subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok (")


def test_a_dataloader_over_batches_gets_tensors_from_every_worker_once(tokens):
    import torch
    from torch.utils.data import DataLoader

    batches = tokens.batches(8)
    assert isinstance(batches, torch.utils.data.IterableDataset)
    ids = []
    for batch in DataLoader(batches, batch_size=None, num_workers=2):
        assert isinstance(batch["tokens.bin"], torch.Tensor) and batch["tokens.bin"].dtype == torch.uint8
        assert batch["tokens.bin"].shape[1] == TOKEN_BYTES and batch["tokens.bin"].shape[0] == len(batch["__key__"])
        for row, sample_id in enumerate(batch["__key__"]):
            assert bytes(batch["tokens.bin"][row].tolist()) == token_fields(int(sample_id[1:]))["tokens.bin"]
        assert all(isinstance(t, bytes) for t in batch["text.txt"])  # driven by a DataLoader: copies
        ids.extend(batch["__key__"])
    assert sorted(ids) == ["s%04d" % i for i in range(TOKEN_SAMPLES)]
