# spec 000, "Programmatic Access" (verbatim).
from datavo_sdk import (
    AzureBlobShardCacheTier,
    SampleStream,
    GcsShardCacheTier,
    S3ShardCacheTier,
    ShardCacheHierarchy,
    ShardCacheTier,
    get_default_shard_cache,
)

# Default consumer path.
ds = SampleStream.from_dataset("voice_demo_v1/train", keys=["audio.wav"])

# Inspect or override:
cache = get_default_shard_cache()
for tier in cache.tiers:
    print(tier.name, tier.max_bytes, tier.supports_direct_read)

# Custom on-prem topology, e.g. for tests.
custom = ShardCacheHierarchy(
    [
        ShardCacheTier("/tmp/fast", max_bytes=10 * 1024**3, name="fast"),
        ShardCacheTier("/tmp/slow", name="slow"),
    ]
)
ds = SampleStream.from_dataset("voice_demo_v1/train", keys=["audio.wav"], cache=custom)

# Cloud topology — pick the tier class that matches the region's cloud.
cloud_azure = ShardCacheHierarchy(
    [
        ShardCacheTier("/mnt/cache/datavo/shards", max_bytes=200 * 1024**3, name="nvme"),
        AzureBlobShardCacheTier(
            container_url="https://datavoeastus.blob.core.windows.net/shards",
            name="region-eastus",
        ),
    ]
)

cloud_aws = ShardCacheHierarchy(
    [
        ShardCacheTier("/mnt/cache/datavo/shards", max_bytes=200 * 1024**3, name="nvme"),
        S3ShardCacheTier(
            bucket="datavo-cache-us-east-1",
            region="us-east-1",
            name="region-us-east-1",
        ),
    ]
)

cloud_gcp = ShardCacheHierarchy(
    [
        ShardCacheTier("/mnt/cache/datavo/shards", max_bytes=200 * 1024**3, name="nvme"),
        GcsShardCacheTier(
            bucket="datavo-cache-us-central1",
            name="region-us-central1",
        ),
    ]
)
