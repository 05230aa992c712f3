"""SampleStream: the samples of one key group of a dataset, through the cache hierarchy (C++ datavo::SampleStream).

Once the job imports torch, SampleStream is a torch.utils.data.IterableDataset (datavo_sdk itself never imports
torch: see _torch.py), so that ``DataLoader(SampleStream.from_dataset(...), num_workers=N)`` works as is: each
DataLoader worker, and each rank of a torch.distributed job, reads a disjoint set of shards (the C++ stream's split,
``position % (world_size * num_workers) == rank * num_workers + worker``), and together they read every sample
exactly once per epoch. ``set_epoch(n)`` reshuffles deterministically (with ``shuffle=True``), and reaches
persistent workers too: the epoch lives in a shared-memory tensor once torch is loaded.
"""

import atexit
import os
import sys
import typing
import weakref

from . import _datavo, _logging, _progress, _torch
from ._sample import Batch, Sample
from ._tiers import ShardCacheHierarchy

# A pass reads its C++ stream on a thread of its own (started by the first next()); those still running at exit are
# stopped and joined before the interpreter shuts down.
atexit.register(_datavo._stop_pipelines)

__all__ = ["SampleStream", "SampleBatches"]

_T = typing.TypeVar("_T")


class _StreamBase(typing.Generic[_T]):
    """SampleStream's base before torch is loaded. Generic, as torch's Dataset is, so that the two have one object
    layout and SampleStream's bases can become (IterableDataset, _StreamBase) in place (_become_iterable_dataset)."""


def _distributed_rank() -> typing.Tuple[int, int]:
    """(rank, world_size): an initialised torch.distributed process group, else $RANK / $WORLD_SIZE, else (0, 1)."""
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        return int(dist.get_rank()), int(dist.get_world_size())
    rank, world = os.environ.get("RANK"), os.environ.get("WORLD_SIZE")
    if rank is not None and world is not None:
        return int(rank), int(world)
    return 0, 1


def _local_world_size(world_size: int) -> typing.Optional[int]:
    """The ranks on this machine, sharing its tiers and the prefetch budget: $LOCAL_WORLD_SIZE (torchrun sets it), else
    None (the C++ side takes world_size). A value that is not a whole number from 1 to world_size is a ValueError."""
    text = os.environ.get("LOCAL_WORLD_SIZE")
    if text is None:
        return None
    if not text.strip().isdigit() or not 1 <= int(text) <= world_size:
        raise ValueError("LOCAL_WORLD_SIZE=%r: not a whole number from 1 to the world size (%d)" % (text, world_size))
    return int(text)


def _worker() -> typing.Tuple[int, int]:
    """(worker, num_workers) of the DataLoader worker this runs in, else (0, 1)."""
    data = _torch.loaded()
    if data is not None:
        info = data.get_worker_info()
        if info is not None:
            return int(info.id), int(info.num_workers)
    return 0, 1


def _driven_by_dataloader() -> bool:
    """Whether the caller of SampleStream.__iter__ is a torch DataLoader's fetcher (in the main process or in a
    worker): torch.utils.data._utils.fetch._IterableDatasetFetcher calls iter(dataset) itself."""
    if _torch.loaded() is None:
        return False
    frame = sys._getframe(2)  # 0: this function, 1: __iter__, 2: whoever called iter() on the stream
    return frame is not None and frame.f_code.co_filename.replace(os.sep, "/").endswith(
        "torch/utils/data/_utils/fetch.py"
    )


class SampleStream(_StreamBase[Sample]):
    """Iterate the samples of ``dataset`` ("<dataset>/<split>") for the key group ``keys``.

    Use :meth:`from_dataset`. Each ``iter()`` starts a pass over this consumer's shards (a new C++ stream with its
    own prefetcher), yielding :class:`datavo_sdk.Sample` objects. The manifest is resolved once, by from_dataset,
    and every pass (every worker, every epoch) reads that revision.
    """

    def __init__(
        self,
        dataset: str,
        keys: typing.Union[str, typing.Sequence[str]],
        cache: typing.Optional[ShardCacheHierarchy] = None,
        cache_config_path: "typing.Union[str, os.PathLike[str], None]" = None,
        *,
        revision: typing.Optional[int] = None,
        shuffle: bool = False,
        seed: int = 0,
        epoch: int = 0,
        prefetch: int = 8,
        prefetch_budget: float = 0.1,
        order_hints: bool = True,
        hint_step_ms: int = 100,
        shuffle_buffer: int = 0,
        read_while_fetching: bool = True,
        stream: bool = False,
        stream_window: int = 16 << 20,
        copy: typing.Optional[bool] = None,
        progress: typing.Optional[bool] = None,
        server: typing.Optional[str] = None,
        token: typing.Optional[str] = None,
        instance: typing.Optional[str] = None,
        rank: typing.Optional[int] = None,
        world_size: typing.Optional[int] = None,
    ) -> None:
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
        self._epoch = int(epoch)
        self._epoch_cell: typing.Any = None  # a shared-memory torch tensor holding the epoch, once torch is loaded
        _live_streams.add(self)
        if _torch.loaded() is not None:
            self._share_epoch()
        self.prefetch = int(prefetch)
        self.prefetch_budget = float(prefetch_budget)
        self.order_hints = bool(order_hints)
        self.hint_step_ms = int(hint_step_ms)
        self.shuffle_buffer = int(shuffle_buffer)
        if self.shuffle_buffer < 0:
            raise ValueError("shuffle_buffer must be 0 (samples in shard order) or more, not %d" % self.shuffle_buffer)
        self.read_while_fetching = bool(read_while_fetching)
        self.stream = bool(stream)
        self.stream_window = int(stream_window)
        if self.stream_window < 0:
            raise ValueError("stream_window must be a number of bytes, not %d" % self.stream_window)
        self.copy = None if copy is None else bool(copy)
        self.progress = progress
        self.server = server
        self.token = token
        self.instance = instance
        self._rank = rank
        self._world_size = world_size
        self.revision = revision
        # Resolves the manifest now (one request at most), so that a missing dataset or key, an unreachable server
        # or a bad option raises here. prefetch=0: this probe starts no thread and fetches no shard; and it places
        # no order hint (the streams that read do).
        probe = _datavo.NativeStream(self._probe_args(rank or 0, world_size or 1, 0, 1))
        self.revision = probe.revision
        self.num_shards = probe.shard_count
        self.num_samples = probe.sample_count
        probe.close()

    @classmethod
    def from_dataset(
        cls,
        name: str,
        keys: "typing.Union[str, typing.Sequence[str], None]" = None,
        cache: typing.Optional[ShardCacheHierarchy] = None,
        cache_config_path: "typing.Union[str, os.PathLike[str], None]" = None,
        *,
        revision: typing.Optional[int] = None,
        shuffle: bool = False,
        seed: int = 0,
        epoch: int = 0,
        prefetch: int = 8,
        prefetch_budget: float = 0.1,
        order_hints: bool = True,
        hint_step_ms: int = 100,
        shuffle_buffer: int = 0,
        read_while_fetching: bool = True,
        stream: bool = False,
        stream_window: int = 16 << 20,
        copy: typing.Optional[bool] = None,
        progress: typing.Optional[bool] = None,
        server: typing.Optional[str] = None,
        token: typing.Optional[str] = None,
        instance: typing.Optional[str] = None,
        rank: typing.Optional[int] = None,
        world_size: typing.Optional[int] = None,
    ) -> "SampleStream":
        """A stream over dataset ``name`` ("<dataset>/<split>"), reading the key group ``keys``.

        ``cache`` is a ShardCacheHierarchy; without one the hierarchy comes from ``cache_config_path``, else the
        resolution order of get_default_shard_cache. The options:

        - ``revision``: the manifest revision to read (default: the latest, resolved now, once).
        - ``shuffle`` and ``seed``: a deterministic per-epoch shard order, the same on every machine (see set_epoch).
        - ``epoch``: the epoch of the first pass (default 0).
        - ``prefetch``: at most this many shards fetched ahead of the reader (default 8; 0: none), and
          ``prefetch_budget``: at most this fraction (default 0.1, at most 0.5) of the top folder tier's max_bytes
          (else its free space) ahead, shared by the readers of this machine: the DataLoader workers of each of its
          ranks ($LOCAL_WORLD_SIZE, as torchrun sets it, else all of world_size).
        - ``order_hints``: place each shard in the folder tiers' LRU order by when this job next needs it, so that
          eviction keeps the shards needed soonest (default True; docs/hierarchy.md, "Order hints"), with
          ``hint_step_ms`` (default 100) the age one shard of distance counts as: about the job's time per shard,
          the same in every rank.
        - ``shuffle_buffer``: N > 0 draws samples at random from a buffer of the next N samples (seeded by ``seed``
          and the epoch, like the shard order; every sample still comes once per epoch), so that a batch mixes
          samples of many shards. It holds N samples and keeps their shards mapped; the first sample waits for N to
          be read. 0 (the default): the samples of a shard come in their order.
        - ``read_while_fetching``: a shard fetched from the origin yields its samples as soon as the chunks that
          hold them are verified, before the whole shard is in and installed (default True; docs/hierarchy.md,
          "Reading while fetching"). The fetch runs on a thread of its own while its shard is read.
        - ``stream``: True reads the shards that no folder tier holds straight from a remote tier that holds them,
          or else from the origin, through verified chunks, one shard at a time, and writes no local copy (no tier,
          no staging file): for shuffle-once passes and shards bigger than any folder tier (docs/hierarchy.md,
          "Streamed reads"). A shard a folder tier holds is read as usual. ``stream_window``: the most bytes of a shard held in memory (default 16 MiB; at least 2 of the
          origin's chunks, and enough for each sample with the first member of the next; a ValueError otherwise).
          Each streamed sample owns a copy of its fields, so memoryviews of it stay valid.
        - ``copy``: True: fields are bytes; False: zero-copy memoryviews into the cached shard. Default: memoryviews,
          except when a torch DataLoader drives the iteration, whose collate and worker pipes would turn a memoryview
          into a list of ints or copy it anyway, so there fields are bytes, as WebDataset's are (a dataset of your
          own that wraps the stream and feeds a DataLoader passes copy=True).
        - ``progress``: a tqdm bar of samples on stderr for a cold pass, one whose first shard came from the origin
          (None: when stderr is a terminal and DATAVO_DISABLE_PROGRESS_BARS is not set; never in a DataLoader
          worker, nor without tqdm). A warm pass shows none.
        - ``server`` and ``token``: the origin (default: $DATAVO_SERVER and $DATAVO_TOKEN).
        - ``instance``: the cache namespace of the server (default: the one the server announces).
        - ``rank`` and ``world_size``: this consumer's share (default: torch.distributed when initialised, else
          $RANK / $WORLD_SIZE, else 0 of 1). Give both or neither.

        Raises FileNotFoundError for a missing dataset or key, ValueError for bad arguments or configuration,
        PermissionError, TimeoutError, ConnectionError for a server that cannot be reached, and DatavoError for the
        rest (datavo_sdk.errors).
        """
        if keys is None:
            raise TypeError("from_dataset() needs keys=[...], the key group to read (e.g. keys=['audio.wav'])")
        return cls(name, keys, cache, cache_config_path, revision=revision, shuffle=shuffle, seed=seed, epoch=epoch,
                   prefetch=prefetch, prefetch_budget=prefetch_budget, order_hints=order_hints,
                   hint_step_ms=hint_step_ms, shuffle_buffer=shuffle_buffer,
                   read_while_fetching=read_while_fetching, stream=stream,
                   stream_window=stream_window, copy=copy, progress=progress,
                   server=server, token=token, instance=instance, rank=rank, world_size=world_size)

    def _args(
        self, rank: int, world_size: int, worker: int, num_workers: int, prefetch: typing.Optional[int] = None
    ) -> _datavo.StreamArgs:
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
        args.local_world_size = _local_world_size(world_size)
        args.worker, args.num_workers = worker, num_workers
        args.shuffle = self.shuffle
        args.seed = self.seed
        args.epoch = self.epoch
        args.prefetch = self.prefetch if prefetch is None else prefetch
        args.prefetch_budget = self.prefetch_budget
        args.order_hints = self.order_hints
        args.hint_step_ms = self.hint_step_ms
        args.shuffle_buffer = self.shuffle_buffer
        args.read_while_fetching = self.read_while_fetching
        args.stream = self.stream
        args.stream_window = self.stream_window
        args.copy = bool(self.copy)
        return args

    def _probe_args(self, rank: int, world_size: int, worker: int, num_workers: int) -> _datavo.StreamArgs:
        """The arguments of a stream that only resolves and counts: it reads nothing, so it fetches nothing ahead
        and places no order hint."""
        args = self._args(rank, world_size, worker, num_workers, prefetch=0)
        args.order_hints = False
        return args

    @property
    def epoch(self) -> int:
        """The epoch of the next passes (see set_epoch)."""
        return int(self._epoch_cell.item()) if self._epoch_cell is not None else self._epoch

    @epoch.setter
    def epoch(self, epoch: int) -> None:
        self.set_epoch(epoch)

    def set_epoch(self, epoch: int) -> None:
        """Sets the epoch of the next passes: with shuffle=True each epoch has its own shard order, the same on every
        machine for one (seed, epoch). Call it before iterating (in every rank), as with DistributedSampler. It
        reaches DataLoader workers that persist across epochs (``persistent_workers=True``) too: once torch is
        loaded, the epoch is kept in shared memory, which the workers read when their next pass starts."""
        self._epoch = int(epoch)
        if self._epoch_cell is not None:
            self._epoch_cell.fill_(self._epoch)

    def _share_epoch(self) -> None:
        """Moves the epoch into a shared-memory tensor: forked workers map the same memory, and spawned ones get it
        through torch's pickler (DataLoader uses torch.multiprocessing)."""
        if self._epoch_cell is None:
            torch = sys.modules["torch"]
            cell = torch.tensor([self._epoch], dtype=torch.int64)
            cell.share_memory_()
            self._epoch_cell = cell

    def consumer(self) -> typing.Tuple[int, int, int, int]:
        """(rank, world_size, worker, num_workers) that the next iter() reads as."""
        if self._rank is not None and self._world_size is not None:
            rank, world = self._rank, self._world_size
        else:
            rank, world = _distributed_rank()
        worker, workers = _worker()
        return rank, world, worker, workers

    def __len__(self) -> int:
        """The number of samples the next iter() yields: this consumer's share (rank, and DataLoader worker when
        called in one; see consumer()) of the resolved revision. Under a DataLoader with workers, the main process
        sees the whole rank's share, which its workers read together. Asks the server nothing (the revision is
        resolved)."""
        probe = _datavo.NativeStream(self._probe_args(*self.consumer()))
        try:
            return probe.consumer_sample_count
        finally:
            probe.close()

    def __bool__(self) -> bool:
        return True  # a stream is a stream, even over an empty share: `if stream:` must not ask len()

    def __iter__(self) -> "typing.Union[_datavo.NativeStream, _ColdPassProgress]":
        """A pass over this consumer's shards: an iterator of Sample with ``close()`` and ``stats()``.

        From its first ``next()`` on, a C++ thread of the iterator reads the stream up to two batches of 64 samples
        ahead of Python (never holding the GIL), so that the C++ side's work overlaps the Python loop's; ``stats()``
        counts what that thread has read: a dict of ``samples``, ``shards``, ``field_bytes``, ``origin_fetches`` and
        ``origin_bytes``, ``tiers`` (per tier: ``hits``, ``misses``, ``promotions``, ``served_bytes``) and
        ``shard_wait_seconds``, how long the stream waited for shards to arrive (input-bound when it is most of
        the pass). Use the iterator from one thread at a time, in the process that called
        ``iter()`` (a DataLoader worker calls it itself); ``close()`` (or dropping the iterator) stops and joins
        the thread, cancelling a shard download in progress."""
        args = self._args(*self.consumer())
        if self.copy is None:
            args.copy = _driven_by_dataloader()
        native = _datavo.NativeStream(args)
        in_worker = _torch.loaded() is not None and _torch.loaded().get_worker_info() is not None
        if in_worker or not _progress.wanted(self.progress):
            return native
        return _ColdPassProgress(native, native.consumer_sample_count, "read " + self.dataset)

    def batches(
        self,
        batch_size: int,
        *,
        fixed: "typing.Union[str, typing.Sequence[str]]" = "auto",
        drop_last: bool = False,
    ) -> "SampleBatches":
        """The same passes, one :class:`Batch` of ``batch_size`` samples at a time: Python pays per batch, not per
        sample. The samples, their order (shuffle, shuffle_buffer, epoch), the consumer's share and the errors are
        those of iterating the stream; a pass's last batch may be short, unless ``drop_last``.

        ``fixed`` says which keys come as one 2-D array (samples x field size; see :class:`Batch`):

        - ``"auto"`` (the default): every key whose fields in the batch all have one size; other keys are lists.
          Give the keys explicitly when a variable-size field could have one size by chance (a batch of one sample).
        - a sequence of keys: those keys, always (a batch whose fields of such a key differ in size raises
          ValueError naming both samples); every other key is a list. ``()``: lists only.
        """
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError("batch_size must be an int of 1 or more, not %r" % (batch_size,))
        if isinstance(fixed, str):
            if fixed != "auto":
                raise ValueError("fixed must be 'auto' or a sequence of keys, not %r" % fixed)
            stacked: typing.Optional[typing.List[str]] = None
        else:
            stacked = list(fixed)
            unknown = [key for key in stacked if key not in self.keys]
            if unknown:
                raise ValueError("fixed names %s, which the stream does not read (keys: %s)" % (
                    ", ".join(repr(k) for k in unknown), ", ".join(self.keys)))
        return SampleBatches(self, batch_size, stacked, bool(drop_last))

    def __repr__(self) -> str:
        return "SampleStream(%r, keys=%r, revision=%r, shards=%r, samples=%r)" % (
            self.dataset,
            self.keys,
            self.revision,
            self.num_shards,
            self.num_samples,
        )


class BatchIterator(typing.Protocol):
    """What iterating SampleBatches gives: Batch objects, with close() and stats() as a pass over samples has."""

    def __iter__(self) -> "BatchIterator": ...

    def __next__(self) -> Batch: ...

    def close(self) -> None: ...

    def stats(self) -> typing.Dict[str, typing.Any]: ...


class SampleBatches(_StreamBase[Batch]):
    """The passes of a SampleStream in batches (made by :meth:`SampleStream.batches`). Each ``iter()`` starts a pass
    over the stream's current epoch and consumer, as iterating the stream does; once torch is loaded it is a torch
    IterableDataset too, for ``DataLoader(stream.batches(64), batch_size=None, num_workers=N)``."""

    def __init__(
        self, stream: SampleStream, batch_size: int, fixed: typing.Optional[typing.List[str]], drop_last: bool
    ) -> None:
        self.stream = stream
        self.batch_size = batch_size
        self.fixed = fixed
        self.drop_last = drop_last

    def __len__(self) -> int:
        """The number of batches the next iter() yields (see SampleStream.__len__ for the share it counts)."""
        samples = len(self.stream)
        return samples // self.batch_size if self.drop_last else -(-samples // self.batch_size)

    def __bool__(self) -> bool:
        return True

    def __iter__(self) -> BatchIterator:
        """A pass: an iterator of Batch with ``close()`` and ``stats()``, as SampleStream.__iter__'s (read ahead by
        one C++ thread, which hands batches over several at a time: one batch first, then twice as many each time, up
        to about 1,024 samples, and fills at most two such hand-overs beyond the one being consumed; no progress
        bar)."""
        args = self.stream._args(*self.stream.consumer())
        args.copy = _driven_by_dataloader() if self.stream.copy is None else bool(self.stream.copy)
        args.batch_size = self.batch_size
        args.fixed = self.fixed
        args.drop_last = self.drop_last
        return typing.cast(BatchIterator, _datavo.NativeStream(args))

    def __repr__(self) -> str:
        return "SampleBatches(%r, batch_size=%d, fixed=%r, drop_last=%r)" % (
            self.stream, self.batch_size, "auto" if self.fixed is None else self.fixed, self.drop_last)


class _ColdPassProgress:
    """A pass with a progress bar if it is cold: the native iterator, and once its first sample came from a shard
    fetched from the origin, a tqdm bar of samples (updated every 64 samples: the per-sample path stays light)."""

    def __init__(self, native: _datavo.NativeStream, total: int, description: str) -> None:
        self._native = native
        self._total = total
        self._description = description
        self._bar: typing.Any = None
        self._count = 0

    def __iter__(self) -> "_ColdPassProgress":
        return self

    def __next__(self) -> Sample:
        try:
            sample = next(self._native)
        except StopIteration:
            self._finish()
            raise
        self._count += 1
        if self._count == 1:
            if self._native.stats()["origin_fetches"] > 0:
                self._bar = _progress.bar(self._total, self._description, "sample")
        elif self._bar is not None and self._count % 64 == 0:
            self._bar.update(self._count - self._bar.n)
        return sample

    def close(self) -> None:
        self._finish()
        self._native.close()

    def stats(self) -> typing.Dict[str, typing.Any]:
        return self._native.stats()

    def _finish(self) -> None:
        if self._bar is not None:
            self._bar.update(self._count - self._bar.n)
            self._bar.close()
            self._bar = None


# Every stream, weakly: when the job imports torch after making streams, their epochs move into shared memory.
_live_streams: "weakref.WeakSet[SampleStream]" = weakref.WeakSet()


def _become_iterable_dataset(data: typing.Any) -> None:
    """Makes SampleStream a torch IterableDataset (in place: streams made before are ones too), and shares the epoch
    of every live stream. Runs once, when torch is loaded (_torch.when_loaded)."""
    for cls in (SampleStream, SampleBatches):
        if not issubclass(cls, data.IterableDataset):
            cls.__bases__ = (data.IterableDataset,) + cls.__bases__
    for stream in list(_live_streams):
        stream._share_epoch()


_torch.when_loaded(_become_iterable_dataset)
