"""SampleStream: the samples of one key group of a dataset, through the cache hierarchy (C++ datavo::SampleStream).

When torch is importable, SampleStream is a torch.utils.data.IterableDataset, so that
``DataLoader(SampleStream.from_dataset(...), num_workers=N)`` works as is: each DataLoader worker, and each rank of
a torch.distributed job, reads a disjoint set of shards (the C++ stream's split,
``position % (world_size * num_workers) == rank * num_workers + worker``), and together they read every sample
exactly once per epoch. ``set_epoch(n)`` reshuffles deterministically (with ``shuffle=True``).
"""

import atexit
import os
import sys

from . import _datavo, _logging
from ._sample import Sample
from ._tiers import ShardCacheHierarchy

try:  # torch is optional: without it SampleStream is a plain iterable
    import torch.utils.data as _torch_data
except ImportError:  # pragma: no cover - exercised by the no-torch test in a subprocess
    _torch_data = None

_Base = _torch_data.IterableDataset if _torch_data is not None else object

# A pass reads its C++ stream on a thread of its own (started by the first next()); those still running at exit are
# stopped and joined before the interpreter shuts down.
atexit.register(_datavo._stop_pipelines)

__all__ = ["SampleStream"]


def _distributed_rank():
    """(rank, world_size): an initialised torch.distributed process group, else $RANK / $WORLD_SIZE, else (0, 1)."""
    if _torch_data is not None:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    rank, world = os.environ.get("RANK"), os.environ.get("WORLD_SIZE")
    if rank is not None and world is not None:
        return int(rank), int(world)
    return 0, 1


def _worker():
    """(worker, num_workers) of the DataLoader worker this runs in, else (0, 1)."""
    if _torch_data is not None:
        info = _torch_data.get_worker_info()
        if info is not None:
            return info.id, info.num_workers
    return 0, 1


def _driven_by_dataloader():
    """Whether the caller of SampleStream.__iter__ is a torch DataLoader's fetcher (in the main process or in a
    worker): torch.utils.data._utils.fetch._IterableDatasetFetcher calls iter(dataset) itself."""
    if _torch_data is None:
        return False
    frame = sys._getframe(2)  # 0: this function, 1: __iter__, 2: whoever called iter() on the stream
    return frame is not None and frame.f_code.co_filename.replace(os.sep, "/").endswith(
        "torch/utils/data/_utils/fetch.py"
    )


class SampleStream(_Base):
    """Iterate the samples of ``dataset`` ("<dataset>/<split>") for the key group ``keys``.

    Use :meth:`from_dataset`. Each ``iter()`` starts a pass over this consumer's shards (a new C++ stream with its
    own prefetcher), yielding :class:`datavo_sdk.Sample` objects. The manifest is resolved once, by from_dataset,
    and every pass (every worker, every epoch) reads that revision.
    """

    def __init__(
        self,
        dataset,
        keys,
        cache=None,
        cache_config_path=None,
        *,
        revision=None,
        shuffle=False,
        seed=0,
        epoch=0,
        prefetch=2,
        copy=None,
        server=None,
        token=None,
        instance=None,
        rank=None,
        world_size=None,
    ):
        if isinstance(keys, str):
            keys = [keys]
        if cache is not None and not isinstance(cache, ShardCacheHierarchy):
            raise TypeError("cache must be a ShardCacheHierarchy, not %s" % type(cache).__name__)
        if (rank is None) != (world_size is None):
            raise ValueError("give rank and world_size together (or neither, to take them from torch.distributed)")
        self.dataset = dataset
        self.keys = sorted(set(keys or []))
        self.cache = cache
        self.cache_config_path = os.fspath(cache_config_path) if cache_config_path is not None else None
        self.shuffle = bool(shuffle)
        self.seed = int(seed)
        self.epoch = int(epoch)
        self.prefetch = int(prefetch)
        self.copy = None if copy is None else bool(copy)
        self.server = server
        self.token = token
        self.instance = instance
        self._rank = rank
        self._world_size = world_size
        self.revision = revision
        # Resolves the manifest now (one request at most), so that a missing dataset or key, an unreachable server
        # or a bad option raises here. prefetch=0: this probe starts no thread and fetches no shard.
        probe = _datavo.NativeStream(self._args(rank or 0, world_size or 1, 0, 1, prefetch=0))
        self.revision = probe.revision
        self.num_shards = probe.shard_count
        self.num_samples = probe.sample_count
        probe.close()

    @classmethod
    def from_dataset(cls, name, keys=None, cache=None, cache_config_path=None, **options):
        """A stream over dataset ``name`` ("<dataset>/<split>"), reading the key group ``keys``.

        ``cache`` is a ShardCacheHierarchy; without one the hierarchy comes from ``cache_config_path``, else the
        resolution order of get_default_shard_cache. The server is ``server=`` or $DATAVO_SERVER (token:
        ``token=`` or $DATAVO_TOKEN). Options: ``revision`` (default: the latest, resolved now), ``shuffle`` and
        ``seed`` (a deterministic per-epoch shard order; see set_epoch), ``prefetch`` (shards fetched ahead,
        default 2; 0: none), ``copy`` (True: fields are bytes; False: zero-copy memoryviews; default: memoryviews,
        except when a torch DataLoader drives the iteration, whose collate and worker pipes would turn a memoryview
        into a list of ints or copy it anyway, so there fields are bytes, as WebDataset's are; a dataset of your
        own that wraps the stream and feeds a DataLoader passes copy=True), ``rank`` and
        ``world_size`` (default: torch.distributed, else $RANK / $WORLD_SIZE), ``instance``.

        Raises FileNotFoundError for a missing dataset or key, ValueError for bad arguments or configuration,
        PermissionError, TimeoutError, and DatavoError for the rest.
        """
        if keys is None:
            raise TypeError("from_dataset() needs keys=[...], the key group to read (e.g. keys=['audio.wav'])")
        return cls(name, keys, cache, cache_config_path, **options)

    def _args(self, rank, world_size, worker, num_workers, prefetch=None):
        _logging.sync_level()
        args = _datavo.StreamArgs()
        args.dataset = self.dataset
        args.keys = self.keys
        args.revision = self.revision
        args.cache = self.cache._native if self.cache is not None else None
        args.cache_config_path = self.cache_config_path
        args.server = self.server
        args.token = self.token
        args.instance = self.instance
        args.rank, args.world_size = rank, world_size
        args.worker, args.num_workers = worker, num_workers
        args.shuffle = self.shuffle
        args.seed = self.seed
        args.epoch = self.epoch
        args.prefetch = self.prefetch if prefetch is None else prefetch
        args.copy = bool(self.copy)
        return args

    def set_epoch(self, epoch):
        """Sets the epoch of the next passes: with shuffle=True each epoch has its own shard order, the same on every
        machine for one (seed, epoch). Call it before iterating (in every rank), as with DistributedSampler."""
        self.epoch = int(epoch)

    def consumer(self):
        """(rank, world_size, worker, num_workers) that the next iter() reads as."""
        rank, world = (self._rank, self._world_size) if self._rank is not None else _distributed_rank()
        worker, workers = _worker()
        return rank, world, worker, workers

    def __iter__(self):
        """A pass over this consumer's shards: an iterator of Sample with ``close()`` and ``stats()``.

        From its first ``next()`` on, a C++ thread of the iterator reads the stream up to two batches of 64 samples
        ahead of Python (never holding the GIL), so that the C++ side's work overlaps the Python loop's; ``stats()``
        counts what that thread has read. Use the iterator from one thread at a time, in the process that called
        ``iter()`` (a DataLoader worker calls it itself); ``close()`` (or dropping the iterator) stops and joins
        the thread, cancelling a shard download in progress."""
        args = self._args(*self.consumer())
        if self.copy is None:
            args.copy = _driven_by_dataloader()
        return _datavo.NativeStream(args)

    def __repr__(self):
        return "SampleStream(%r, keys=%r, revision=%r, shards=%r, samples=%r)" % (
            self.dataset,
            self.keys,
            self.revision,
            self.num_shards,
            self.num_samples,
        )


# The extension builds Sample objects itself; it is imported here so that datavo_sdk registers it.
_ = Sample
