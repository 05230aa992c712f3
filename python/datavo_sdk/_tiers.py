"""Tiers, the hierarchy and get_default_shard_cache: thin wrappers over the C++ classes (include/datavo/).

Every tier's arguments are the fields of its type in shards.yaml (docs/config.md) and go through the same C++
parser: the same defaults, checks, ~ and $VAR expansion and normalisation, and errors that name the argument
(``ConfigError: ShardCacheTier.max_bytes: ...``). Constructing a tier does no I/O and needs no credentials.
"""

import dataclasses
import datetime
import os
import typing

from . import _datavo, _logging

if typing.TYPE_CHECKING:  # the reports are defined in _ops, which imports this module
    from ._ops import CheckReport, GcReport, LsReport, RmReport, VerifyReport

#: A size: bytes as an int, or a string such as "200GB" or "16MiB" (docs/config.md, Sizes).
Size = typing.Union[int, str]
#: A duration: a string such as "30d" or "60s" (docs/config.md, Durations), seconds, or a timedelta.
Duration = typing.Union[str, int, float, datetime.timedelta]
#: A path: a str or an os.PathLike.
PathArg = typing.Union[str, "os.PathLike[str]"]
#: What a fetcher may return: None, or a dict with "size" (an int) and/or "sha256" (64 hex digits).
FetcherAnswer = typing.Optional[typing.Mapping[str, typing.Union[int, str]]]

__all__ = [
    "ShardCacheTier",
    "S3ShardCacheTier",
    "GcsShardCacheTier",
    "AzureBlobShardCacheTier",
    "ShardCacheHierarchy",
    "get_default_shard_cache",
    "CacheInfo",
    "TierStats",
]


def _text(key: str, value: typing.Any) -> typing.Tuple[str, bool]:
    """(shards.yaml text, quoted) for one argument value, as a YAML scalar would give it to the C++ parser."""
    if isinstance(value, bool):
        return ("true" if value else "false"), False
    if isinstance(value, int):
        return str(value), False
    if isinstance(value, float) and value.is_integer():
        return str(int(value)), False
    if isinstance(value, datetime.timedelta):
        return "%ds" % int(value.total_seconds()), False
    if isinstance(value, os.PathLike):
        return os.fspath(value), True
    if isinstance(value, str):
        return value, True
    raise TypeError("%s: expected a str, int or bool, not %s" % (key, type(value).__name__))


class _Tier:
    """What every tier has: name, max_bytes (None: unbounded), supports_direct_read; also type, location and
    read_only."""

    _type: typing.ClassVar[str] = ""
    __slots__ = ("_native", "_arguments")

    _native: typing.Any
    _arguments: typing.Optional[typing.Dict[str, typing.Any]]

    def _build(self, arguments: typing.Dict[str, typing.Any]) -> None:
        # Durations may also be given as seconds (an int) or a timedelta.
        for key in ("max_age", "lease_duration"):
            value = arguments.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                arguments[key] = "%ds" % int(value)
        settings = [(key,) + _text(key, value) for key, value in arguments.items() if value is not None]
        self._arguments = dict(arguments)
        self._native = _datavo.make_tier(self._type, settings, type(self).__name__)

    @classmethod
    def _wrap(cls, native: typing.Any) -> "_Tier":
        """A Python object for a tier the C++ library built (from shards.yaml)."""
        classes: typing.Tuple[typing.Type[_Tier], ...] = (
            ShardCacheTier, S3ShardCacheTier, GcsShardCacheTier, AzureBlobShardCacheTier)
        kind = {t._type: t for t in classes}
        tier: _Tier = object.__new__(kind.get(native.type, _Tier))
        tier._native = native
        tier._arguments = None
        return tier

    @property
    def name(self) -> str:
        return str(self._native.name)

    @property
    def max_bytes(self) -> typing.Optional[int]:
        return typing.cast(typing.Optional[int], self._native.max_bytes)

    @property
    def supports_direct_read(self) -> bool:
        return bool(self._native.supports_direct_read)

    @property
    def read_only(self) -> bool:
        return bool(self._native.read_only)

    @property
    def type(self) -> str:
        """folder, s3, gcs or azure_blob."""
        return str(self._native.type)

    @property
    def location(self) -> str:
        """A directory, or the bucket's URL."""
        return str(self._native.location)

    def __reduce__(self) -> typing.Tuple[typing.Any, ...]:
        if self._arguments is None:
            raise TypeError("a tier read from shards.yaml pickles through its hierarchy (get_default_shard_cache)")
        return (_rebuild_tier, (type(self), self._arguments))

    def __repr__(self) -> str:
        if getattr(self, "_native", None) is None:
            return "<%s (not constructed)>" % type(self).__name__
        return "%s(name=%r, location=%r, max_bytes=%r, supports_direct_read=%r)" % (
            type(self).__name__,
            self.name,
            self.location,
            self.max_bytes,
            self.supports_direct_read,
        )


def _arguments_of(frame_locals: typing.Dict[str, typing.Any]) -> typing.Dict[str, typing.Any]:
    """A constructor's arguments, by name, from its locals() (taken first thing, so that they hold nothing else)."""
    return {k: v for k, v in frame_locals.items() if k not in ("self", "__class__")}


def _rebuild_tier(cls: typing.Type["_Tier"], arguments: typing.Dict[str, typing.Any]) -> "_Tier":
    tier = object.__new__(cls)
    tier._build(dict(arguments))
    return tier


class ShardCacheTier(_Tier):
    """A folder tier: a directory on a local filesystem, directly readable (the spec's FolderTier).

    ``path`` is created on first use; ``~`` and ``$VAR`` are expanded. ``max_bytes`` (an int, or a size such as
    ``"200GB"``; None or 0: unbounded) is kept by LRU eviction on mtime. The keyword-only arguments are the other
    fields of a folder tier in shards.yaml: ``max_age`` ("30d", seconds, or a timedelta), ``lru_resolution`` (a hit
    leaves an mtime younger than this alone; "10s" by default), ``read_only``, ``durability`` ("fsync" | "none"),
    ``verify`` ("size" | "full" | "sampled") and ``verify_sample_every``.
    """

    _type = "folder"
    __slots__ = ()

    def __init__(
        self,
        path: PathArg,
        max_bytes: typing.Optional[Size] = None,
        name: typing.Optional[str] = None,
        *,
        max_age: typing.Optional[Duration] = None,
        lru_resolution: typing.Optional[Duration] = None,
        read_only: typing.Optional[bool] = None,
        durability: typing.Optional[str] = None,
        verify: typing.Optional[str] = None,
        verify_sample_every: typing.Optional[int] = None,
    ) -> None:
        self._build(_arguments_of(locals()))


class _CloudTier(_Tier):
    __slots__ = ()


class S3ShardCacheTier(_CloudTier):
    """An S3 bucket (AWS, or any server speaking its API through ``endpoint_url``). Not directly readable: a hit is
    materialized into a folder tier. Credentials follow the AWS SDKs' default chain, resolved at first use; nothing
    here does I/O. Extra fields as in shards.yaml: ``endpoint_url``, ``addressing_style`` ("auto" | "path" |
    "virtual"), ``profile``, ``max_bytes``, ``read_only``, ``part_size``, ``concurrency``, ``upload``
    ("background" | "sync"), ``single_flight``, ``lease_duration`` ("60s", seconds, or a timedelta),
    ``max_age`` (gc deletes older objects) and the hedged reads' ``hedge``, ``hedge_after`` ("p95", "250ms") and
    ``hedge_max_fraction`` ("5%")."""

    _type = "s3"
    __slots__ = ()

    def __init__(
        self,
        bucket: str,
        region: typing.Optional[str] = None,
        name: typing.Optional[str] = None,
        prefix: typing.Optional[str] = None,
        *,
        endpoint_url: typing.Optional[str] = None,
        addressing_style: typing.Optional[str] = None,
        profile: typing.Optional[str] = None,
        max_bytes: typing.Optional[Size] = None,
        read_only: typing.Optional[bool] = None,
        part_size: typing.Optional[Size] = None,
        concurrency: typing.Optional[int] = None,
        upload: typing.Optional[str] = None,
        single_flight: typing.Optional[bool] = None,
        lease_duration: typing.Optional[Duration] = None,
        max_age: typing.Optional[Duration] = None,
        hedge: typing.Optional[bool] = None,
        hedge_after: typing.Optional[str] = None,
        hedge_max_fraction: typing.Optional[str] = None,
    ) -> None:
        self._build(_arguments_of(locals()))


class GcsShardCacheTier(_CloudTier):
    """A Google Cloud Storage bucket, over the JSON API; Application Default Credentials, resolved at first use.
    Extra fields as in shards.yaml: ``endpoint_url``, ``max_bytes``, ``read_only``, ``part_size``,
    ``concurrency``, ``upload``, ``single_flight``, ``lease_duration``, ``max_age``, ``hedge``, ``hedge_after``,
    ``hedge_max_fraction``."""

    _type = "gcs"
    __slots__ = ()

    def __init__(
        self,
        bucket: str,
        project: typing.Optional[str] = None,
        name: typing.Optional[str] = None,
        prefix: typing.Optional[str] = None,
        *,
        endpoint_url: typing.Optional[str] = None,
        max_bytes: typing.Optional[Size] = None,
        read_only: typing.Optional[bool] = None,
        part_size: typing.Optional[Size] = None,
        concurrency: typing.Optional[int] = None,
        upload: typing.Optional[str] = None,
        single_flight: typing.Optional[bool] = None,
        lease_duration: typing.Optional[Duration] = None,
        max_age: typing.Optional[Duration] = None,
        hedge: typing.Optional[bool] = None,
        hedge_after: typing.Optional[str] = None,
        hedge_max_fraction: typing.Optional[str] = None,
    ) -> None:
        self._build(_arguments_of(locals()))


class AzureBlobShardCacheTier(_CloudTier):
    """An Azure Blob container. ``sas_token`` (a secret, never logged) or else the DefaultAzureCredential chain
    (``managed_identity_client_id`` pins a user-assigned identity), resolved at first use. Extra fields as in
    shards.yaml: ``max_bytes``, ``read_only``, ``part_size``, ``concurrency``, ``upload``, ``single_flight``,
    ``lease_duration``, ``max_age``, ``hedge``, ``hedge_after``, ``hedge_max_fraction``."""

    _type = "azure_blob"
    __slots__ = ()

    def __init__(
        self,
        container_url: str,
        name: typing.Optional[str] = None,
        sas_token: typing.Optional[str] = None,
        managed_identity_client_id: typing.Optional[str] = None,
        prefix: typing.Optional[str] = None,
        *,
        max_bytes: typing.Optional[Size] = None,
        read_only: typing.Optional[bool] = None,
        part_size: typing.Optional[Size] = None,
        concurrency: typing.Optional[int] = None,
        upload: typing.Optional[str] = None,
        single_flight: typing.Optional[bool] = None,
        lease_duration: typing.Optional[Duration] = None,
        max_age: typing.Optional[Duration] = None,
        hedge: typing.Optional[bool] = None,
        hedge_after: typing.Optional[str] = None,
        hedge_max_fraction: typing.Optional[str] = None,
    ) -> None:
        self._build(_arguments_of(locals()))

    def __repr__(self) -> str:  # the SAS token is a secret; the base repr shows none of the arguments anyway
        return _Tier.__repr__(self)


@dataclasses.dataclass(frozen=True)
class TierStats:
    """A tier's counters: cumulative for folder tiers (persisted in the tier); for a remote tier those of this
    machine, kept in the top writable folder tier (CacheInfo.scope says which). A counter the tier cannot keep
    (CacheInfo.not_kept) reads 0. The fields are the C++ TierStats (include/datavo/tier.hpp), in its order; a test
    checks them against the extension's."""

    hits: int  # lookups this tier served
    misses: int  # lookups this tier could not serve
    promotions: int  # entries copied into this tier from a slower tier
    installs: int  # entries installed into this tier after an origin fetch
    capacity_skips: int  # installs skipped because the shard is larger than max_bytes
    evictions: int  # entries removed by LRU, max_age or rm
    quarantined: int  # damaged entries moved aside on a hit or by verify
    errors: int  # failures that were degraded to a miss or a skip
    uploads: int  # background uploads that completed (remote tiers)
    upload_failures: int  # background uploads that failed (remote tiers)
    uploads_present: int  # uploads that found the object there already (remote tiers)
    upload_skips: int  # uploads not tried: the tier's breaker was open (remote tiers)
    lease_waits: int  # fetches that waited for another VM's lease (remote tiers)
    hedges_sent: int  # second requests sent for a slow ranged GET (remote tiers)
    hedges_won: int  # hedged requests that answered before the first (remote tiers)
    bytes_served: int  # bytes handed to readers from this tier
    bytes_installed: int  # bytes of promotions and installs

    @property
    def hit_rate(self) -> float:
        """hits / (hits + misses), 0.0 before any lookup."""
        return 0.0 if self.hits + self.misses == 0 else self.hits / (self.hits + self.misses)


@dataclasses.dataclass(frozen=True)
class CacheInfo:
    """One tier of ShardCacheHierarchy.cache_info(): what it is, how full, and its counters."""

    name: str
    type: str
    location: str
    max_bytes: typing.Optional[int]  # None: unbounded
    read_only: bool
    used_bytes: typing.Optional[int]  # None when the tier could not be measured
    entries: typing.Optional[int]
    stats: TierStats
    # Whose counters `stats` holds: "every_process" (a folder tier), "this_machine" (a remote tier's, kept in the
    # folder tier `kept_in`) or "this_process" (no writable folder tier keeps them).
    scope: str
    kept_in: typing.Optional[str]
    not_kept: typing.List[str]  # counters the tier cannot keep (a bucket's evictions): 0 in `stats`, not measured
    breaker_open: bool  # this process skips the tier for a cooldown


class ShardCacheHierarchy:
    """An ordered list of tiers, fastest first, read through by content hash. At least one must be a folder tier
    (the local landing zone). Carries no per-dataset state: share it across streams and threads."""

    __slots__ = ("_tiers", "_native", "_config_path")

    _tiers: typing.List[_Tier]
    _native: typing.Any
    _config_path: typing.Optional[typing.Tuple[typing.Optional[str]]]

    def __init__(self, tiers: typing.Iterable[_Tier]) -> None:
        tiers = list(tiers)
        for tier in tiers:
            if not isinstance(tier, _Tier):
                raise TypeError("ShardCacheHierarchy takes tiers (ShardCacheTier, S3ShardCacheTier, ...), not %s"
                                % type(tier).__name__)
        _logging.sync_level()
        self._native = _datavo.make_hierarchy([t._native for t in tiers])
        self._tiers = tiers
        self._config_path = None

    @classmethod
    def _from_native(cls, native: typing.Any, config_path: typing.Optional[str]) -> "ShardCacheHierarchy":
        hierarchy = object.__new__(cls)
        hierarchy._native = native
        hierarchy._tiers = [_Tier._wrap(t) for t in native.tiers]
        hierarchy._config_path = (config_path,)
        return hierarchy

    @property
    def tiers(self) -> typing.List[_Tier]:
        """The tiers, fastest first."""
        return list(self._tiers)

    def get_or_fetch(
        self,
        content_hash: str,
        fetcher: typing.Callable[[_datavo.StagingWriter], typing.Any],
        *,
        instance: typing.Optional[str] = None,
    ) -> str:
        """The local path of the topmost installed copy of the shard ``content_hash`` (64 lowercase hex).

        Walks the tiers fastest first; a hit on a slower tier is promoted into the faster ones; on a complete miss
        ``fetcher(f)`` is called once with ``f``, the shard's staging file as a write-only binary file object
        (``f.write(b)``, ``shutil.copyfileobj(src, f)``; a tool that downloads to a path of its own hands that file
        over with ``f.write_file(path)``; ``f.restart()`` starts over). It may return None, or a dict with ``size``
        and/or ``sha256`` that the bytes must match. An exception it raises propagates and nothing is installed.
        The GIL is released while the hierarchy works. ``instance`` scopes the key (default: the instance
        of $DATAVO_SERVER as the CLI, warm() and SampleStream resolve it: the server's instance_id, asked once per
        server and remembered; the URL's host_port only offline or while the server cannot be reached; "local"
        without a server).

        The file at the path may be evicted later; open it right away (``tarfile.open(path)``): an open file stays
        readable."""
        _logging.sync_level()
        return str(self._native.get_or_fetch(content_hash, fetcher, instance))

    def cache_info(self) -> typing.List[CacheInfo]:
        """A CacheInfo per tier, fastest first."""
        rows = []
        for row in self._native.cache_info():
            stats = row.pop("stats")
            rows.append(CacheInfo(stats=TierStats(**stats), **row))
        return rows

    def stats(self, *, reset: bool = False) -> typing.List[CacheInfo]:
        """``datavo cache stats [--reset]``: cache_info() with the counters of every process for folder tiers;
        ``reset=True`` zeroes the folder tiers' counters first."""
        _logging.sync_level()
        rows = []
        for row in _datavo.cache_stats(self._native, bool(reset)):
            stats = row.pop("stats")
            rows.append(CacheInfo(stats=TierStats(**stats), **row))
        return rows

    def metrics(self) -> typing.Dict[str, typing.Dict[str, typing.Any]]:
        """The per-tier metrics of ``datavo cache stats --format prometheus`` as a dict: tier name -> {"type",
        "scope", then each metric by its Prometheus name without the "datavo_tier_" prefix ("hits_total",
        "served_bytes_total", "breaker_open", ...)}; "uploads_total" is a dict by outcome ("uploaded",
        "already_present", "failed", "skipped"). A metric the tier cannot keep is absent, not 0."""
        _logging.sync_level()
        return typing.cast(typing.Dict[str, typing.Dict[str, typing.Any]], _datavo.tier_metrics(self._native))

    def metrics_text(self) -> str:
        """metrics() in the Prometheus text exposition format 0.0.4 (``datavo cache stats --format prometheus``)."""
        _logging.sync_level()
        return str(_datavo.render_metrics(self._native))

    def metrics_textfile(self, path: str, *, interval: float = 5.0) -> "_datavo.MetricsTextfile":
        """Keeps the file ``path`` holding metrics_text(), rewritten atomically every ``interval`` seconds (a
        temporary beside it, renamed: node_exporter's textfile collector never reads half a file; name it
        ``*.prom``) until close(), which writes it a last time. A context manager::

            with cache.metrics_textfile("/var/lib/node_exporter/textfile/datavo.prom"):
                for sample in SampleStream.from_dataset(..., cache=cache): ...

        Raises at once when the file cannot be written."""
        if interval <= 0:
            raise ValueError("interval must be > 0 seconds, not %r" % (interval,))
        return _datavo.MetricsTextfile(self._native, str(path), float(interval))

    def ls(self, *, instance: typing.Optional[str] = None) -> "LsReport":
        """``datavo cache ls``: every entry of every tier, with what warm, read or a SampleStream recorded it to be.
        ``instance``: only that instance's entries (default: every instance's). Ctrl-C stops it within its current
        list request and raises KeyboardInterrupt."""
        from . import _ops

        return _ops.ls(self, instance)

    def rm(self, content_hashes: typing.Sequence[str] = (), *, dataset: typing.Optional[str] = None,
           instance: typing.Optional[str] = None, tier: typing.Union[str, typing.Sequence[str], None] = None,
           all_tiers: bool = False) -> "RmReport":
        """``datavo cache rm``: removes the entries ``content_hashes`` and, with ``dataset`` ("<dataset>/<split>" or
        "<dataset>"), every entry recorded as part of it (``instance``: default as in get_or_fetch). By default only
        from the tiers this machine alone reaches (folder and memory tiers): a shared tier (a bucket) is left alone
        unless ``tier`` names it (a name or a list: exactly those tiers) or ``all_tiers=True`` (every writable
        tier). Nothing asks for a confirmation. ``report.tiers`` says which tiers were touched, ``skipped_tiers``
        which were left alone. A hash that is not cached, or a dataset with no cached entry, sets ``report.error``
        (not_found): nothing to remove is no success. ValueError when neither is given, when both ``tier`` and
        ``all_tiers`` are, or when ``tier`` names no writable tier. Ctrl-C stops it before its next entry and raises
        KeyboardInterrupt."""
        from . import _ops

        if isinstance(content_hashes, str):
            content_hashes = [content_hashes]
        tiers = [tier] if isinstance(tier, str) else list(tier or ())
        return _ops.rm(self, content_hashes, dataset, instance, tiers, bool(all_tiers))

    def gc(self, *, dry_run: bool = False) -> "GcReport":
        """``datavo cache gc [--dry-run]``: evicts each writable folder tier to its max_bytes and max_age and sweeps
        leftover staging and lock files; deletes a writable cloud tier's objects older than its max_age (its size is
        left to the bucket's lifecycle rules), and the leases and check probes that killed processes left in it.
        The report says what was done with each tier. Ctrl-C stops it between objects and raises KeyboardInterrupt."""
        from . import _ops

        return _ops.gc(self, bool(dry_run))

    def verify(self, *, repair: bool = False, full: bool = False) -> "VerifyReport":
        """``datavo cache verify [--repair] [--full]``: re-hashes every entry of the folder tiers against its recorded
        SHA-256, and checks every object of the cloud tiers against its recorded size and SHA-256 (a HEAD each,
        proven by the service's own SHA-256 where it keeps one: S3; ``full=True`` downloads and hashes every
        object). ``repair=True`` quarantines bad entries and deletes bad objects from writable cloud tiers. Ctrl-C
        stops it between entries and raises KeyboardInterrupt."""
        from . import _ops

        return _ops.verify(self, bool(repair), bool(full))

    def check(self) -> "CheckReport":
        """``datavo cache check``: probes every tier once (write, sync and read back for a folder tier; put, get,
        conditional put and delete of a probe object for a cloud tier). Ctrl-C stops it, deletes the probe object and
        raises KeyboardInterrupt."""
        from . import _ops

        return _ops.check(self)

    def __reduce__(self) -> typing.Tuple[typing.Any, ...]:
        if self._config_path is not None:
            return (get_default_shard_cache, self._config_path)
        return (ShardCacheHierarchy, (self._tiers,))

    def __repr__(self) -> str:
        return "ShardCacheHierarchy([%s])" % ", ".join(repr(t) for t in self._tiers)


def get_default_shard_cache(cache_config_path: typing.Optional[PathArg] = None) -> ShardCacheHierarchy:
    """The hierarchy a read would use: ``cache_config_path`` (or $DATAVO_SHARD_CACHE_CONFIG), else
    /etc/datavo/shards.yaml, else ~/.config/datavo/shards.yaml, else one 50 GiB folder tier at
    $DATAVO_SHARD_CACHE_DIR or ~/.cache/altavo/datavo/shards (the resolution order of the CLI)."""
    _logging.sync_level()
    path = os.fspath(cache_config_path) if cache_config_path is not None else None
    return ShardCacheHierarchy._from_native(_datavo.get_default_shard_cache(path), path)
