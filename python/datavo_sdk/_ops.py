"""The cache's operations from Python: warm() fills the cache with every shard of a key group, as `datavo warm` does,
through the same C++ operation (datavo::warm), and returns a typed report."""

import dataclasses
import os
import sys
import typing

from . import _datavo, _logging
from ._tiers import PathArg, ShardCacheHierarchy
from .errors import DatavoError


@dataclasses.dataclass(frozen=True)
class WarmTier:
    """How one tier took part in a warm (fastest tier first in WarmReport.tiers)."""

    tier: str
    hits: int  #: shards this warm found in the tier
    promoted_into: int  #: shards this warm copied into it from a slower tier
    cached: int  #: shards whose fastest copy is in this tier once the warm is done


@dataclasses.dataclass(frozen=True)
class UploadSummary:
    """What went up to the remote tiers before the warm returned."""

    uploaded: int
    already_present: int  #: another machine had stored the same bytes: a success
    failed: int
    pending: int  #: still queued or running when the warm returned


@dataclasses.dataclass(frozen=True)
class WarmFailure:
    """A shard that could not be warmed."""

    shard_index: int
    error: DatavoError


@dataclasses.dataclass(frozen=True)
class WarmReport:
    """What warm() did: the fields of ``datavo warm --json`` (docs/cli.md), with errors as exception objects."""

    dataset: str  #: "<dataset>/<split>"
    revision: int
    keys: typing.List[str]  #: the key group, normalized
    shards: int
    failed: int
    size_bytes: int  #: of the shards warmed
    origin_shards: int  #: fetched from the origin by this warm
    origin_bytes: int
    tiers: typing.List[WarmTier]
    not_cached: int  #: shards that no tier holds once the warm is done (evicted meanwhile)
    seconds: float
    uploads: typing.Optional[UploadSummary]  #: None without a remote tier
    failures: typing.List[WarmFailure]
    partial: typing.Optional[str]  #: set when the top tier does not hold every shard
    error: typing.Optional[DatavoError]  #: what failed, or None


def _report(answer: typing.Dict[str, typing.Any]) -> WarmReport:
    fields = dict(answer)
    fields["tiers"] = [WarmTier(**row) for row in answer["tiers"]]
    fields["uploads"] = UploadSummary(**answer["uploads"]) if answer["uploads"] is not None else None
    fields["failures"] = [WarmFailure(**row) for row in answer["failures"]]
    return WarmReport(**fields)


def _wants_progress_bar(progress: typing.Optional[bool]) -> bool:
    """progress=True or False decides; None: a bar when tqdm is importable, stderr is a terminal and
    DATAVO_DISABLE_PROGRESS_BARS is not set (as huggingface_hub does with HF_HUB_DISABLE_PROGRESS_BARS)."""
    if progress is not None:
        return progress
    if os.environ.get("DATAVO_DISABLE_PROGRESS_BARS", "").strip().lower() not in ("", "0", "false", "no", "off"):
        return False
    return sys.stderr is not None and sys.stderr.isatty()


class _ProgressBar:
    """A tqdm bar over the shards of a warm, with the bytes from the origin as its postfix; nothing without tqdm."""

    def __init__(self, wanted: bool, description: str) -> None:
        self._bar: typing.Any = None
        self._wanted = wanted
        self._description = description

    def update(self, total: int, done: int, origin_bytes: int) -> None:
        if not self._wanted or total == 0:
            return
        if self._bar is None:
            try:
                from tqdm import tqdm
            except ImportError:
                self._wanted = False
                return
            self._bar = tqdm(total=total, desc=self._description, unit="shard", file=sys.stderr, leave=True)
        if done > self._bar.n:
            self._bar.update(done - self._bar.n)
        self._bar.set_postfix_str("%.1f MB from the origin" % (max(origin_bytes, 0) / 1e6), refresh=False)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def warm(
    dataset: str,
    keys: typing.Union[str, typing.Sequence[str]],
    cache: typing.Optional[ShardCacheHierarchy] = None,
    cache_config_path: typing.Optional[PathArg] = None,
    *,
    revision: typing.Optional[int] = None,
    jobs: int = 4,
    allow_partial: bool = False,
    server: typing.Optional[str] = None,
    token: typing.Optional[str] = None,
    instance: typing.Optional[str] = None,
    progress: typing.Optional[bool] = None,
) -> WarmReport:
    """Fills the cache with every shard of the key group ``keys`` of ``dataset`` ("<dataset>/<split>"), as
    ``datavo warm`` does: a shard a tier holds is a hit (or promoted into a faster tier), any other is fetched from
    the origin once, ``jobs`` at a time. Waits for the uploads to remote tiers, then returns a WarmReport.

    ``cache``, ``cache_config_path``, ``server``, ``token`` and ``instance`` are those of SampleStream.from_dataset;
    ``revision`` pins a manifest revision (default: the latest). ``allow_partial``: a warm whose top tier cannot hold
    every shard still succeeds, with ``report.partial`` saying so. ``progress``: a tqdm bar on stderr (None: when
    tqdm is importable, stderr is a terminal and DATAVO_DISABLE_PROGRESS_BARS is not set).

    Raises, as SampleStream.from_dataset does, for a bad argument or dataset, an unreachable origin or a cache that
    cannot be made. A warm that ran but failed (a shard that could not be fetched, a top tier too small without
    allow_partial) raises its ``report.error``, with the report as the exception's ``report`` attribute. Ctrl-C
    stops the warm (downloads in progress end at their next chunk) and raises KeyboardInterrupt.
    """
    if isinstance(keys, str):
        keys = [keys]
    if cache is not None and not isinstance(cache, ShardCacheHierarchy):
        raise TypeError("cache must be a ShardCacheHierarchy, not %s" % type(cache).__name__)
    if int(jobs) < 1:
        raise ValueError("jobs must be at least 1, not %d" % int(jobs))
    _logging.sync_level()
    args = _datavo.WarmArgs()
    args.dataset = dataset
    args.keys = sorted(set(keys))
    args.revision = revision
    args.cache = cache._native if cache is not None else None
    args.cache_config_path = os.fspath(cache_config_path) if cache_config_path is not None else None
    args.server = server
    args.token = token
    args.instance = instance
    args.jobs = int(jobs)
    args.allow_partial = bool(allow_partial)
    bar = _ProgressBar(_wants_progress_bar(progress), "warm " + dataset)
    job = _datavo.WarmJob(args)
    try:
        while not job.wait(0.1):
            bar.update(*job.progress()[:3])
        bar.update(*job.progress()[:3])
    except KeyboardInterrupt:
        job.stop()
        while not job.wait(0.5):
            pass
        raise
    finally:
        bar.close()
    report = _report(job.report())
    if report.error is not None:
        error = report.error
        setattr(error, "report", report)
        raise error
    return report
