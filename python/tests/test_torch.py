"""PyTorch: SampleStream is an IterableDataset; DataLoader with 0, 2 and 4 workers and 2 simulated
ranks reads every sample exactly once per epoch; set_epoch reshuffles deterministically; no torch, still imports."""
import collections
import os
import textwrap

import pytest

from conftest import DATASET, SAMPLES, run_python
from datavo_sdk import Sample, SampleStream

torch = pytest.importorskip("torch") if os.environ.get("DATAVO_REQUIRE_TORCH") != "1" else __import__("torch")
from torch.utils.data import DataLoader, IterableDataset  # noqa: E402

WORLD = 2


def epoch_ids(ds, workers, rank, epoch=0, shuffle_buffer=0):
    """The sample ids rank `rank` of WORLD reads in `epoch` through a DataLoader with `workers` workers."""
    ds = SampleStream.from_dataset(DATASET, keys=["audio.wav"], rank=rank, world_size=WORLD, shuffle=True, seed=3,
                                   shuffle_buffer=shuffle_buffer, cache_config_path=ds)
    ds.set_epoch(epoch)
    loader = DataLoader(ds, batch_size=None, num_workers=workers)
    out = []
    for sample in loader:
        assert isinstance(sample, Sample)
        # Under a DataLoader fields are bytes (collate would turn a memoryview into a list of ints).
        assert isinstance(sample["audio.wav"], bytes)
        assert bytes(sample["audio.wav"][:4]) == b"RIFF"
        out.append(sample.id)
    return out


@pytest.fixture
def config(env, tmp_path):
    path = tmp_path / "shards.yaml"
    path.write_text("tiers:\n  - name: local\n    path: %s\n" % (tmp_path / "cache"))
    return str(path)


def test_sample_stream_is_an_iterable_dataset(env):
    assert isinstance(SampleStream.from_dataset(DATASET, keys=["audio.wav"]), IterableDataset)


@pytest.mark.parametrize("workers", [0, 2, 4])
def test_every_sample_exactly_once_per_epoch_over_workers_and_ranks(config, workers):
    per_rank = [epoch_ids(config, workers, rank) for rank in range(WORLD)]
    union = collections.Counter(i for ids in per_rank for i in ids)
    assert sorted(union) == ["utt_%04d" % i for i in range(SAMPLES)]
    assert set(union.values()) == {1}, [i for i, n in union.items() if n > 1]
    assert set(per_rank[0]).isdisjoint(per_rank[1])


def test_set_epoch_reshuffles_deterministically(config):
    first = [epoch_ids(config, 2, rank, epoch=0) for rank in range(WORLD)]
    second = [epoch_ids(config, 2, rank, epoch=1) for rank in range(WORLD)]
    again = [epoch_ids(config, 2, rank, epoch=1) for rank in range(WORLD)]
    assert second == again  # same (seed, epoch): same order, worker interleaving included
    assert first != second
    for epoch in (first, second):
        assert sorted(i for ids in epoch for i in ids) == ["utt_%04d" % i for i in range(SAMPLES)]


@pytest.mark.parametrize("workers", [0, 2])
def test_the_shuffle_buffer_keeps_every_sample_once_per_epoch_over_workers_and_ranks(config, workers):
    buffered = [epoch_ids(config, workers, rank, shuffle_buffer=30) for rank in range(WORLD)]
    assert buffered == [epoch_ids(config, workers, rank, shuffle_buffer=30) for rank in range(WORLD)]
    assert sorted(i for ids in buffered for i in ids) == ["utt_%04d" % i for i in range(SAMPLES)]
    unbuffered = [epoch_ids(config, workers, rank) for rank in range(WORLD)]
    for rank in range(WORLD):
        assert sorted(buffered[rank]) == sorted(unbuffered[rank]) and buffered[rank] != unbuffered[rank]
    assert buffered != [epoch_ids(config, workers, rank, epoch=1, shuffle_buffer=30) for rank in range(WORLD)]


def test_default_batching_collates_like_webdataset(config):
    ds = SampleStream.from_dataset(DATASET, keys=["audio.wav", "transcript.txt"], cache_config_path=config)
    for workers in (0, 2):
        batches = list(DataLoader(ds, batch_size=8, num_workers=workers))
        assert sum(len(b["__key__"]) for b in batches) == SAMPLES
        assert all(isinstance(x, bytes) for b in batches for x in b["audio.wav"])


def test_direct_iteration_stays_zero_copy(config):
    ds = SampleStream.from_dataset(DATASET, keys=["audio.wav"], cache_config_path=config)
    assert isinstance(next(iter(ds))["audio.wav"], memoryview)


def test_workers_read_disjoint_shards(config):
    ds = SampleStream.from_dataset(DATASET, keys=["audio.wav"], cache_config_path=config)

    class Tagged(IterableDataset):
        def __iter__(self):
            info = torch.utils.data.get_worker_info()
            for sample in ds:
                yield info.id, sample.id

    by_worker = collections.defaultdict(set)
    for worker, sample_id in DataLoader(Tagged(), batch_size=None, num_workers=4):
        by_worker[int(worker)].add(sample_id)
    assert len(by_worker) == 4
    sets = list(by_worker.values())
    assert all(a.isdisjoint(b) for i, a in enumerate(sets) for b in sets[i + 1:])
    assert sum(len(s) for s in sets) == SAMPLES


def test_rank_from_an_initialised_process_group(env, tmp_path):
    # A real (gloo, world of 1) process group: SampleStream takes rank and world size from it.
    code = textwrap.dedent(
        """
        import os, torch.distributed as dist
        from datavo_sdk import SampleStream
        dist.init_process_group("gloo", init_method="file://%s", rank=0, world_size=1)
        ds = SampleStream.from_dataset(%r, keys=["audio.wav"])
        print(ds.consumer(), sum(1 for _ in ds))
        dist.destroy_process_group()
        """
        % (tmp_path / "pg", DATASET)
    )
    done = run_python(code, env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-1] == str(SAMPLES) and "(0, 1, 0, 1)" in done.stdout


def test_imports_without_torch(env):
    code = textwrap.dedent(
        """
        import sys
        class NoTorch:
            def find_spec(self, name, path=None, target=None):
                if name == "torch" or name.startswith("torch."):
                    raise ImportError("torch is blocked for this test")
        sys.meta_path.insert(0, NoTorch())
        import datavo_sdk
        from datavo_sdk import SampleStream
        assert not any(c.__module__.startswith("torch") for c in SampleStream.__mro__), SampleStream.__mro__
        assert "torch" not in sys.modules
        print(sum(1 for _ in SampleStream.from_dataset(%r, keys=["audio.wav"])))
        """
        % DATASET
    )
    done = run_python(code, env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(SAMPLES)


def test_the_sdk_never_imports_torch_and_becomes_torch_aware_when_the_job_does(env):
    # torch is installed here (DATAVO_REQUIRE_TORCH=1 in CI). Nothing of datavo_sdk imports it; once the job imports
    # torch, SampleStream is an IterableDataset, streams made before included, and a DataLoader takes them.
    code = textwrap.dedent(
        """
        import sys
        import datavo_sdk
        from datavo_sdk import SampleStream, get_default_shard_cache
        early = SampleStream.from_dataset(%r, keys=["audio.wav"])
        n = sum(1 for _ in early)
        print("torch loaded by the sdk:", "torch" in sys.modules)
        from torch.utils.data import DataLoader, IterableDataset
        print("iterable dataset:", isinstance(early, IterableDataset), isinstance(SampleStream.from_dataset(
            %r, keys=["audio.wav"]), IterableDataset))
        print("epoch shared:", early._epoch_cell is not None and early._epoch_cell.is_shared())
        print("through a DataLoader:", n, sum(1 for _ in DataLoader(early, batch_size=None, num_workers=2)))
        """
        % (DATASET, DATASET)
    )
    done = run_python(code, env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "torch loaded by the sdk: False",
        "iterable dataset: True True",
        "epoch shared: True",
        "through a DataLoader: %d %d" % (SAMPLES, SAMPLES),
    ]


def test_len_is_this_consumers_share_and_matches_what_it_reads(config):
    total = 0
    for rank in range(WORLD):
        ds = SampleStream.from_dataset(DATASET, keys=["audio.wav"], rank=rank, world_size=WORLD, shuffle=True, seed=3,
                                       cache_config_path=config)
        assert len(ds) == len(epoch_ids(config, 0, rank))  # no worker: the rank's share
        loader = DataLoader(ds, batch_size=None, num_workers=2)
        assert len(loader) == len(ds)  # the DataLoader asks the dataset; its 2 workers read the rank's share together
        assert sum(1 for _ in loader) == len(ds)
        total += len(ds)
    assert total == SAMPLES

    class PerWorker(IterableDataset):
        def __iter__(self):
            yield len(ds), sum(1 for _ in ds)  # inside a worker: that worker's share

    for told, read in DataLoader(PerWorker(), batch_size=None, num_workers=2):
        assert int(told) == int(read)


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_set_epoch_reaches_persistent_workers(config, context):
    # Workers that persist across epochs read the epoch set in the main process (shared memory), so each epoch has
    # the order that fresh workers would read for it, never the first epoch's again.
    ds = SampleStream.from_dataset(DATASET, keys=["audio.wav"], shuffle=True, seed=3, cache_config_path=config)
    loader = DataLoader(ds, batch_size=None, num_workers=2, persistent_workers=True, multiprocessing_context=context)
    orders = []
    for epoch in range(3):
        ds.set_epoch(epoch)
        orders.append([sample.id for sample in loader])
    for epoch, order in enumerate(orders):
        assert sorted(order) == ["utt_%04d" % i for i in range(SAMPLES)]
        fresh = SampleStream.from_dataset(DATASET, keys=["audio.wav"], shuffle=True, seed=3, epoch=epoch,
                                          cache_config_path=config)
        assert order == [sample.id for sample in DataLoader(fresh, batch_size=None, num_workers=2)], epoch
    assert orders[0] != orders[1] and orders[1] != orders[2] and orders[0] != orders[2]
    ds.set_epoch(1)
    assert [sample.id for sample in loader] == orders[1]  # deterministic for one (seed, epoch)
