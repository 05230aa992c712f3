# spec 000, "Folder tiers": the folder tier example (verbatim; test_spec_blocks.py checks it against the spec).
ShardCacheTier(
    path="/scratch/datavo/shards",
    max_bytes=1_099_511_627_776,   # 1 TiB
    name="scratch",
)
