"""Per-tier metrics from Python (issue 16): ShardCacheHierarchy.metrics() is the dict of the figures that
`datavo cache stats --format prometheus` prints, metrics_text() is that text, and metrics_textfile() keeps a file of
it for a training job, rewritten atomically and once more when it is closed."""
import json
import os
import re
import subprocess
import time

import pytest

from conftest import DATASET, SHARDS
from datavo_sdk import SampleStream, ShardCacheHierarchy, ShardCacheTier, get_default_shard_cache

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)\{((?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*",?)*)\} ([0-9]+)$')


def parse(text):
    """{(name, tier, outcome or None): value} of a text exposition; asserts every line is valid 0.0.4."""
    assert text.endswith("\n")
    out, typed = {}, set()
    for line in text[:-1].split("\n"):
        if line.startswith("# HELP "):
            continue
        if line.startswith("# TYPE "):
            name, kind = line[7:].split(" ")
            assert kind in ("counter", "gauge") and (kind == "counter") == name.endswith("_total"), line
            typed.add(name)
            continue
        m = SAMPLE.match(line)
        assert m and m.group(1) in typed, line
        labels = dict(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(2)))
        out[(m.group(1), labels["tier"], labels.get("outcome"))] = int(m.group(3))
    return out


def test_metrics_are_the_clis_figures_as_a_dict(env, datavo_bin):
    cache = get_default_shard_cache()
    assert sum(1 for _ in SampleStream.from_dataset(DATASET, keys=["audio.wav"], cache=cache)) > 0
    assert sum(1 for _ in SampleStream.from_dataset(DATASET, keys=["audio.wav"], cache=cache)) > 0
    metrics = cache.metrics()
    assert list(metrics) == ["default"]
    row = metrics["default"]
    assert row["type"] == "folder" and row["scope"] == "every_process"
    assert row["installs_total"] == SHARDS and row["hits_total"] == SHARDS and row["misses_total"] == SHARDS
    assert row["evictions_total"] == 0 and row["breaker_open"] == 0 and row["served_bytes_total"] > 0
    # A folder tier uploads nothing: absent, not 0.
    assert "uploads_total" not in row and "lease_waits_total" not in row

    cache._native.flush_stats()  # what a job that ends does: the CLI, another process, reads the persisted counters
    text = subprocess.run([datavo_bin, "cache", "stats", "--format", "prometheus"], capture_output=True, text=True,
                          check=True).stdout
    cli = parse(text)
    assert cli[("datavo_tier_hits_total", "default", None)] == row["hits_total"]
    assert cli[("datavo_tier_installed_bytes_total", "default", None)] == row["installed_bytes_total"]
    assert parse(cache.metrics_text())[("datavo_tier_installs_total", "default", None)] == SHARDS


def test_metrics_textfile_is_rewritten_and_written_at_close(tmp_path):
    tier = ShardCacheTier(str(tmp_path / "tier"), name="local")
    cache = ShardCacheHierarchy([tier])
    path = tmp_path / "textfile" / "datavo.prom"
    path.parent.mkdir()
    with cache.metrics_textfile(str(path), interval=0.05) as textfile:
        assert textfile.path == str(path)
        assert parse(path.read_text())[("datavo_tier_installs_total", "local", None)] == 0
        cache.get_or_fetch("a" * 64, lambda f: f.write(b"shard bytes"))
        deadline = time.monotonic() + 10
        while parse(path.read_text())[("datavo_tier_installs_total", "local", None)] != 1:
            assert time.monotonic() < deadline, "the textfile was not rewritten"
            time.sleep(0.02)
        cache.get_or_fetch("a" * 64, lambda f: f.write(b"shard bytes"))  # a hit: shown by the write at close
    assert parse(path.read_text())[("datavo_tier_hits_total", "local", None)] == 1
    assert os.listdir(path.parent) == ["datavo.prom"], "a temporary was left behind"

    with pytest.raises(Exception, match="metrics textfile"):
        cache.metrics_textfile(str(tmp_path / "missing" / "datavo.prom"))
    with pytest.raises(ValueError):
        cache.metrics_textfile(str(path), interval=0)
