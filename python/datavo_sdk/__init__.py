"""datavo_sdk: Datavo's shard cache hierarchy and SampleStream for Python, on the C++ core.

    from datavo_sdk import SampleStream
    for sample in SampleStream.from_dataset("voice_demo_v1/train", keys=["audio.wav"]):
        wav = sample["audio.wav"]      # a zero-copy memoryview into the cached shard; sample.id is its id

The seven names of the spec ("Programmatic Access"): SampleStream, ShardCacheHierarchy, ShardCacheTier,
S3ShardCacheTier, GcsShardCacheTier, AzureBlobShardCacheTier and get_default_shard_cache; plus DatavoError (the base
of every exception; the classes are in datavo_sdk.errors), Sample, Batch and SampleBatches (stream.batches(n)),
CacheInfo and TierStats; and the cache's
operations: warm() (as `datavo warm`) and ShardCacheHierarchy's ls, rm, gc, verify, check and stats (as `datavo
cache ...`), each with a typed report (WarmReport, LsReport, ...). Log lines go to the
``logging`` logger "datavo". See python/README.md.
"""

from . import _datavo
from . import errors
from .errors import DatavoError
from ._sample import Batch, Sample

_datavo._init(errors.BY_CODE, DatavoError, Sample, Batch)

from . import _logging  # noqa: E402  (after _init: forwarding needs nothing else, but keep one order)

_logging.install()

from ._tiers import (  # noqa: E402
    AzureBlobShardCacheTier,
    CacheInfo,
    GcsShardCacheTier,
    S3ShardCacheTier,
    ShardCacheHierarchy,
    ShardCacheTier,
    TierStats,
    get_default_shard_cache,
)

from ._stream import SampleBatches, SampleStream  # noqa: E402  (imports no torch: it becomes an IterableDataset once torch loads)
from ._ops import (  # noqa: E402
    BadObject,
    CacheEntry,
    CheckReport,
    CheckStep,
    GcReport,
    LsReport,
    RemovedEntry,
    RmReport,
    RmTier,
    TierLsTotal,
    TierCheck,
    TierFailure,
    TierGc,
    TierNotVerified,
    TierObjectVerify,
    TierVerify,
    UploadSummary,
    VerifyReport,
    WarmFailure,
    WarmReport,
    WarmShare,
    WarmTier,
    WarmTierUploads,
    warm,
)

__version__ = _datavo.__version__


__all__ = [
    "SampleStream",
    "ShardCacheHierarchy",
    "ShardCacheTier",
    "S3ShardCacheTier",
    "GcsShardCacheTier",
    "AzureBlobShardCacheTier",
    "get_default_shard_cache",
    "DatavoError",
    "Sample",
    "Batch",
    "SampleBatches",
    "CacheInfo",
    "TierStats",
    "warm",
    "WarmReport",
    "WarmShare",
    "WarmTier",
    "WarmTierUploads",
    "WarmFailure",
    "UploadSummary",
    "BadObject",
    "CacheEntry",
    "CheckReport",
    "CheckStep",
    "GcReport",
    "LsReport",
    "RemovedEntry",
    "RmReport",
    "RmTier",
    "TierLsTotal",
    "TierCheck",
    "TierFailure",
    "TierGc",
    "TierNotVerified",
    "TierObjectVerify",
    "TierVerify",
    "VerifyReport",
]
