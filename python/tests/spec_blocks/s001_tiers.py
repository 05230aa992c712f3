# spec 001, "Tiers and the hierarchy" (verbatim).
from datavo_sdk import get_default_shard_cache

cache = get_default_shard_cache()          # the hierarchy a read would use
for tier in cache.tiers:                    # fastest first
    print(tier.name, tier.supports_direct_read, tier.max_bytes)
