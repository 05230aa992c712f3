"""The cache's operations from Python, through the same C++ operations as the CLI (include/datavo/warm.hpp and
operations.hpp), each with a typed report whose field names are those of the CLI's JSON (docs/cli.md): warm() fills the cache with every shard of a key group, as `datavo warm`
does; ls, rm, gc, verify and check (ShardCacheHierarchy's methods) are `datavo cache ls|rm|gc|verify|check`."""

import dataclasses
import datetime
import os
import typing

from . import _datavo, _logging, _progress
from ._tiers import PathArg, ShardCacheHierarchy
from .errors import DatavoError


@dataclasses.dataclass(frozen=True)
class WarmTierUploads:
    """What became of every shard of a warm in one writable remote tier: the four counts add up to the shards."""

    uploaded: int  #: stored by this warm (during it, or backfilled from the local copy)
    already_present: int  #: the tier held it already
    failed: int  #: its lookup or upload failed
    skipped: int  #: not tried: tier down (breaker open), too small, no local copy
    failed_reason: typing.Optional[str]  #: the last failure's message
    skipped_reason: typing.Optional[str]  #: the last skip's reason


@dataclasses.dataclass(frozen=True)
class WarmTier:
    """How one tier took part in a warm (fastest tier first in WarmReport.tiers)."""

    tier: str
    hits: int  #: shards this warm found in the tier
    promoted_into: int  #: shards this warm copied into it from a slower tier
    cached: int  #: shards whose fastest copy is in this tier once the warm is done
    held: typing.Optional[int] = None  #: shards the tier holds once the warm is done (None: a read-only remote tier)
    uploads: typing.Optional[WarmTierUploads] = None  #: set for a writable remote tier


@dataclasses.dataclass(frozen=True)
class UploadSummary:
    """What went up to the remote tiers before the warm returned."""

    uploaded: int
    already_present: int  #: another machine had stored the same bytes: a success
    failed: int
    skipped: int  #: not tried: the tier was down (breaker open), too small, or had no local copy to upload from
    pending: int  #: still queued or running when the warm returned


@dataclasses.dataclass(frozen=True)
class WarmFailure:
    """A shard that could not be warmed."""

    shard_index: int
    error: DatavoError


@dataclasses.dataclass(frozen=True)
class WarmShare:
    """What a region's share did in a warm (``warm(share="I/N")``, ``datavo warm --share``)."""

    index: int  #: this VM's place in the region
    count: int  #: the region's members
    deferred: int  #: shards left to their members while the region's bucket was down
    from_region: int  #: of those, read from the bucket once their members had uploaded them
    fetched_after_wait: int  #: of those, fetched from the origin once the wait had run out
    waited_seconds: float  #: the time spent waiting for the region


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
    #: set when the top tier does not hold every shard, or a writable remote tier did not receive every shard
    partial: typing.Optional[str]
    error: typing.Optional[DatavoError]  #: what failed, or None
    share: typing.Optional[WarmShare] = None  #: set when warm() was given a share


def _report(answer: typing.Dict[str, typing.Any]) -> WarmReport:
    fields = dict(answer)
    fields["tiers"] = [
        WarmTier(**dict(row, uploads=WarmTierUploads(**row["uploads"]) if row["uploads"] is not None else None))
        for row in answer["tiers"]
    ]
    fields["uploads"] = UploadSummary(**answer["uploads"]) if answer["uploads"] is not None else None
    fields["failures"] = [WarmFailure(**row) for row in answer["failures"]]
    fields["share"] = WarmShare(**answer["share"]) if answer["share"] is not None else None
    return WarmReport(**fields)


class _ProgressBar:
    """A bar over the shards of a warm, with the bytes from the origin as its postfix (_progress.py decides)."""

    def __init__(self, wanted: bool, description: str) -> None:
        self._bar: typing.Any = None
        self._wanted = wanted
        self._description = description

    def update(self, total: int, done: int, origin_bytes: int) -> None:
        if not self._wanted or total == 0:
            return
        if self._bar is None:
            self._bar = _progress.bar(total, self._description, "shard")
            if self._bar is None:
                self._wanted = False
                return
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
    share: typing.Optional[str] = None,
    share_wait: float = 120,
) -> WarmReport:
    """Fills the cache with every shard of the key group ``keys`` of ``dataset`` ("<dataset>/<split>"), as
    ``datavo warm`` does: a shard a tier holds is a hit (or promoted into a faster tier), any other is fetched from
    the origin once, ``jobs`` at a time. Waits for the uploads to remote tiers, then returns a WarmReport.

    ``cache``, ``cache_config_path``, ``server``, ``token`` and ``instance`` are those of SampleStream.from_dataset;
    ``revision`` pins a manifest revision (default: the latest). ``allow_partial``: a warm whose top tier cannot hold
    every shard still succeeds, with ``report.partial`` saying so. ``progress``: a tqdm bar on stderr (None: when
    tqdm is importable, stderr is a terminal and DATAVO_DISABLE_PROGRESS_BARS is not set). ``share``: "I/N", this VM
    is member I of the N that warm the dataset in a region (``datavo warm --share``): while the bucket that coordinates
    the region cannot be reached, only this member's share of the shards is fetched from the origin, and the others'
    are read from the bucket once their members uploaded them, waiting at most ``share_wait`` seconds (at least 1).

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
    if share is not None:
        if float(share_wait) < 1:
            raise ValueError("share_wait must be at least 1 second, not %r" % share_wait)
        args.share = str(share)
        args.share_wait_seconds = int(round(float(share_wait)))
    bar = _ProgressBar(_progress.wanted(progress), "warm " + dataset)
    job = _datavo.WarmJob(args)
    try:
        _wait(job, lambda: bar.update(*job.progress()[:3]))
    finally:
        bar.close()
    report = _report(job.report())
    if report.error is not None:
        error = report.error
        setattr(error, "report", report)
        raise error
    return report


class _Report:
    """What the reports of ls, rm, gc, verify and check share: they are returned also when part of the operation
    failed (the CLI's exit status 1), with ``error`` summing up what did not work."""

    error: typing.Optional[DatavoError]

    def raise_for_error(self) -> None:
        """Raises ``error`` (with this report as its ``report`` attribute) when there is one."""
        if self.error is not None:
            setattr(self.error, "report", self)
            raise self.error


@dataclasses.dataclass(frozen=True)
class TierFailure:
    """A tier an operation could not complete on (the other tiers were still done)."""

    tier: str
    error: DatavoError


@dataclasses.dataclass(frozen=True)
class CacheEntry:
    """One entry of one tier (ShardCacheHierarchy.ls()); the shard fields say what warm, read or a SampleStream
    recorded it to be, and are None for an entry nothing recorded (get_or_fetch, `datavo cache put`)."""

    tier: str
    instance: str
    content_hash: str
    size_bytes: int
    last_access: datetime.datetime  #: the mtime, for folder tiers
    dataset: typing.Optional[str]
    split: typing.Optional[str]
    revision: typing.Optional[int]
    shard_index: typing.Optional[int]
    keys: typing.Optional[typing.List[str]]


@dataclasses.dataclass(frozen=True)
class TierLsTotal:
    tier: str
    entries: int
    size_bytes: int
    listed: bool  #: False: the tier could not be listed (see failures)


@dataclasses.dataclass(frozen=True)
class LsReport(_Report):
    instance: typing.Optional[str]  #: None: every instance's entries
    entries: int  #: copies: an entry two tiers hold counts twice
    size_bytes: int  #: of every copy in every tier; per tier: ``tiers``
    entry_list: typing.List[CacheEntry]  #: tier by tier, fastest first
    tiers: typing.List[TierLsTotal]  #: a total per tier, fastest first
    failures: typing.List[TierFailure]  #: tiers that could not be listed
    error: typing.Optional[DatavoError]


@dataclasses.dataclass(frozen=True)
class RemovedEntry:
    content_hash: str
    reason: str  #: "named" (given by its hash) or "of_dataset"
    removed_from: typing.List[str]  #: the tiers in scope that held it
    failures: typing.List[TierFailure]


@dataclasses.dataclass(frozen=True)
class RmTier:
    tier: str
    type: str
    location: str
    shared: bool  #: other machines reach it (a bucket)
    touched: bool  #: in the removal's scope


@dataclasses.dataclass(frozen=True)
class RmReport(_Report):
    entry_list: typing.List[RemovedEntry]
    tiers: typing.List[RmTier]  #: every tier, and whether the removal touched it
    skipped_tiers: typing.List[str]  #: the tiers left alone (shared ones unless asked for, read-only ones)
    removed: int  #: entries removed from at least one tier
    not_cached: int  #: named entries that no tier in scope held
    error: typing.Optional[DatavoError]  #: also set when there was nothing to remove (a typo in a hash)


@dataclasses.dataclass(frozen=True)
class TierGc:
    """What gc did with one tier. ``policy``: "evict" (a writable folder tier: max_bytes, max_age, leftover files),
    "expire" (a writable cloud tier with max_age: its older objects deleted; its size is left to the bucket's
    lifecycle rules), "lifecycle" (a writable cloud tier without max_age: no entry deleted) or "read_only". A writable
    cloud tier is also swept of the leases and check probes that killed processes left in it."""

    tier: str
    type: str  #: folder, s3, gcs or azure_blob
    policy: str
    max_age_seconds: typing.Optional[int]
    evicted: int  #: entries
    freed_bytes: int
    expired: int  #: of which by max_age
    staging_swept: int
    locks_swept: int
    used_bytes: int  #: after the gc
    entries_bytes: int  #: of committed entries, after the gc
    expired_leases: int  #: a writable cloud tier: lease objects that killed processes left (their expiry long past)
    stale_probes: int  #: a writable cloud tier: ``cache check`` probe objects that killed checks left
    leftovers_removed: int  #: of those two, deleted (none in a dry run)


@dataclasses.dataclass(frozen=True)
class GcReport(_Report):
    dry_run: bool
    tiers: typing.List[TierGc]  #: every tier that answered, fastest first
    failures: typing.List[TierFailure]
    error: typing.Optional[DatavoError]


@dataclasses.dataclass(frozen=True)
class TierVerify:
    tier: str
    checked: int
    ok: int
    bad: int  #: digest or size mismatch
    unverifiable: int  #: no digest recorded
    quarantined: int
    bad_paths: typing.List[str]


@dataclasses.dataclass(frozen=True)
class BadObject:
    """A cloud object that does not match the size and SHA-256 recorded with it."""

    object: str  #: the object name in the bucket or container
    why: str
    removed: bool  #: deleted by ``repair=True`` (a writable tier)


@dataclasses.dataclass(frozen=True)
class TierObjectVerify:
    """A cloud tier's objects as verify checked them; each object is in exactly one of verified_by_service,
    verified_by_download, metadata_only and bad."""

    tier: str
    type: str  #: "s3", "gcs", "azure_blob"
    read_only: bool
    objects: int
    verified_by_service: int  #: the service's whole-object SHA-256 is the recorded one (S3 only)
    verified_by_download: int  #: ``full=True``: downloaded and hashed
    metadata_only: int  #: size and SHA-256 recorded and consistent, bytes not proven (``full=True`` downloads them)
    bad: int
    removed: int
    bad_objects: typing.List[BadObject]
    error: typing.Optional[DatavoError]  #: the tier could not be checked (unreachable, refused)


@dataclasses.dataclass(frozen=True)
class TierNotVerified:
    """A tier that verify does not check (the memory tier), and why."""

    tier: str
    type: str
    why: str


@dataclasses.dataclass(frozen=True)
class VerifyReport(_Report):
    repair: bool
    depth: str  #: "metadata" or "full" (cloud objects downloaded)
    tiers: typing.List[TierVerify]  #: the folder tiers, fastest first
    objects: typing.List[TierObjectVerify]  #: the cloud tiers, fastest first
    not_verified: typing.List[TierNotVerified]  #: the other tiers, fastest first
    unrepaired: int  #: bad entries left in place
    metadata_only: int  #: cloud objects not proven by a checksum (``full=True`` downloads them)
    error: typing.Optional[DatavoError]


@dataclasses.dataclass(frozen=True)
class CheckStep:
    step: str  #: "write", "put", "conditional put", ...
    ok: bool
    detail: str


@dataclasses.dataclass(frozen=True)
class TierCheck:
    tier: str
    type: str
    location: str
    read_only: bool
    ok: bool  #: usable: readable, and writable unless read-only
    readable: bool
    writable: bool
    steps: typing.List[CheckStep]
    warnings: typing.List[str]


@dataclasses.dataclass(frozen=True)
class CheckReport(_Report):
    tiers: typing.List[TierCheck]
    ok: bool  #: every tier usable
    error: typing.Optional[DatavoError]


def _failures(rows: typing.List[typing.Dict[str, typing.Any]]) -> typing.List[TierFailure]:
    return [TierFailure(**row) for row in rows]


def ls(cache: ShardCacheHierarchy, instance: typing.Optional[str]) -> LsReport:
    _logging.sync_level()
    answer = _wait(_datavo.cache_ls(cache._native, instance)).report()
    entries = [CacheEntry(**row) for row in answer.pop("entry_list")]
    tiers = [TierLsTotal(**row) for row in answer.pop("tiers")]
    return LsReport(entry_list=entries, tiers=tiers, failures=_failures(answer.pop("failures")), **answer)


def rm(cache: ShardCacheHierarchy, hashes: typing.Sequence[str], dataset: typing.Optional[str],
       instance: typing.Optional[str], tier: typing.Sequence[str], all_tiers: bool) -> RmReport:
    _logging.sync_level()
    answer = _wait(_datavo.cache_rm(cache._native, list(hashes), dataset, instance, list(tier), all_tiers)).report()
    entries = [RemovedEntry(content_hash=row["content_hash"], reason=row["reason"], removed_from=row["removed_from"],
                            failures=_failures(row["failures"])) for row in answer.pop("entry_list")]
    tiers = [RmTier(**row) for row in answer.pop("tiers")]
    return RmReport(entry_list=entries, tiers=tiers, **answer)


def _wait(job: typing.Any, poll: typing.Optional[typing.Callable[[], None]] = None) -> typing.Any:
    """Waits for an operation that runs on a thread of the extension (warm, ls, rm, check, gc, verify), calling
    ``poll`` every 0.1 s. Ctrl-C stops the operation (it ends between objects and undoes what it began: a check
    deletes its probe object) and, once it has stopped, raises KeyboardInterrupt. Returns ``job``."""
    try:
        while not job.wait(0.1):
            if poll is not None:
                poll()
        if poll is not None:
            poll()
    except KeyboardInterrupt:
        job.stop()
        while not job.wait(0.5):
            pass
        raise
    return job


def gc(cache: ShardCacheHierarchy, dry_run: bool) -> GcReport:
    _logging.sync_level()
    answer = _wait(_datavo.cache_gc(cache._native, dry_run)).report()
    tiers = [TierGc(**row) for row in answer.pop("tiers")]
    return GcReport(tiers=tiers, failures=_failures(answer.pop("failures")), **answer)


def _object_verify(row: typing.Dict[str, typing.Any]) -> TierObjectVerify:
    bad = [BadObject(**one) for one in row.pop("bad_objects")]
    return TierObjectVerify(bad_objects=bad, **row)


def verify(cache: ShardCacheHierarchy, repair: bool, full: bool) -> VerifyReport:
    _logging.sync_level()
    answer = _wait(_datavo.cache_verify(cache._native, repair, full)).report()
    return VerifyReport(tiers=[TierVerify(**row) for row in answer.pop("tiers")],
                        objects=[_object_verify(row) for row in answer.pop("objects")],
                        not_verified=[TierNotVerified(**row) for row in answer.pop("not_verified")], **answer)


def check(cache: ShardCacheHierarchy) -> CheckReport:
    _logging.sync_level()
    answer = _wait(_datavo.cache_check(cache._native)).report()
    tiers = []
    for row in answer.pop("tiers"):
        steps = [CheckStep(**step) for step in row.pop("steps")]
        tiers.append(TierCheck(steps=steps, **row))
    return CheckReport(tiers=tiers, **answer)
