"""The spec's code blocks are tests: every Python block of spec 000 and 001 runs as written, in a fresh
interpreter, against the local `datavo serve`. Only endpoints and paths are swapped in, through the environment
(HOME, DATAVO_SHARD_CACHE_DIR, DATAVO_MANIFEST_CACHE_DIR, DATAVO_SERVER); the blocks are never edited.

Blocks that show bare constructors run after the spec's own `from datavo_sdk import (...)` statement. The blocks are
kept verbatim in spec_blocks/ (so that the tests do not depend on the spec's location at run time);
test_blocks_are_verbatim_copies_of_the_spec checks them against the spec text when it can find it
($DATAVO_SPEC_DIR, else ../shared/spec or ../../shared/spec from the repository), and fails under
DATAVO_REQUIRE_SPEC=1 when it cannot.

The cloud blocks construct S3/GCS/Azure tiers: they pass once the cloud tiers' C++ backends have landed (until then
the factories answer `unsupported`), with no credentials and no network, because constructing does no I/O.
"""
import glob
import os
import sys

import pytest

from conftest import REPO, SHARDS, run_python

BLOCKS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "spec_blocks")
SPEC_FILES = {"s000": "000_933ac759bfdda45b.txt", "s001": "001_4bfa2287f4041893.txt"}


def block_path(name):
    return os.path.join(BLOCKS, name + ".py")


def block_code(name):
    with open(block_path(name), encoding="utf-8") as f:
        lines = f.read().splitlines()
    assert lines[0].startswith("# spec "), "the first line of a block file names its source"
    return "\n".join(lines[1:]) + "\n"


def spec_dir():
    candidates = [os.environ.get("DATAVO_SPEC_DIR"), os.path.join(REPO, "..", "shared", "spec"),
                  os.path.join(REPO, "..", "..", "shared", "spec")]
    for path in candidates:
        if path and os.path.isfile(os.path.join(path, SPEC_FILES["s000"])):
            return path
    return None


def run_block(name, env):
    code = block_code(name)
    if not code.startswith("from datavo_sdk import"):
        # A block that shows bare constructors (the reference's tier examples) runs after the spec's own import
        # statement, the first lines of "Programmatic Access"; the block itself is unchanged.
        prelude = block_code("s000_programmatic_access")
        code = prelude[: prelude.index(")\n") + 2] + code
    child = dict(os.environ)
    # Endpoints swapped in: should a cloud tier ever reach the wire, it would meet an emulator (when the harness's
    # are exported) or a closed loopback port, never a real cloud. Constructing a tier does no I/O in any case.
    child.setdefault("AWS_ENDPOINT_URL_S3", child.get("MOTO_S3_ENDPOINT") or "http://127.0.0.1:9")
    child.setdefault("STORAGE_EMULATOR_HOST", child.get("GCS_EMULATOR_ENDPOINT") or "http://127.0.0.1:9")
    done = run_python(code, env=child)
    assert done.returncode == 0, "block %s failed:\n%s" % (name, done.stderr)
    return done


def test_every_block_file_is_tested():
    names = sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(BLOCKS, "*.py")))
    assert names == sorted(TESTED)


def test_blocks_are_verbatim_copies_of_the_spec():
    where = spec_dir()
    if where is None:
        if os.environ.get("DATAVO_REQUIRE_SPEC") == "1":
            pytest.fail("DATAVO_REQUIRE_SPEC=1 but the spec was not found (set DATAVO_SPEC_DIR)")
        pytest.skip("the spec is not beside this repository (set DATAVO_SPEC_DIR to check the copies)")
    for name in TESTED:
        with open(os.path.join(where, SPEC_FILES[name[:4]]), encoding="utf-8") as f:
            spec = f.read()
        assert block_code(name) in spec, "%s differs from the spec" % name
    # And no Python block of the spec is missing: every line that starts a block here is all there is.
    for key, file_name in SPEC_FILES.items():
        with open(os.path.join(where, file_name), encoding="utf-8") as f:
            spec = f.read()
        starts = [line for line in spec.splitlines() if line.startswith(("from datavo_sdk import", "ShardCacheTier(",
                                                                        "AzureBlobShardCacheTier("))]
        covered = "".join(block_code(n) for n in TESTED if n.startswith(key))
        assert all(line in covered for line in starts), [line for line in starts if line not in covered]


def test_s000_folder_tier(env):
    existed = os.path.exists("/scratch/datavo/shards")
    run_block("s000_folder_tier", env)
    assert os.path.exists("/scratch/datavo/shards") == existed  # constructing does no I/O (created on first use)


def test_s000_cloud_tiers(env):
    run_block("s000_cloud_tiers", env)


def test_s000_programmatic_access(env, origin):
    before = origin.requests()
    done = run_block("s000_programmatic_access", env)
    # get_default_shard_cache() printed the default tier: name, max_bytes, supports_direct_read.
    assert "default 53687091200 True" in done.stdout
    # Two from_dataset calls: manifests only, no shard fetched (the streams were not iterated).
    assert origin.requests("ticket") == before.get("ticket", 0)


def test_s001_quick_start_second_pass_makes_no_server_traffic(env, origin):
    before = origin.requests()
    run_block("s001_quick_start", env)
    after_first_process = origin.requests()
    # First pass fetched every shard once; the second pass, in the same process, none.
    assert after_first_process.get("shard", 0) - before.get("shard", 0) == SHARDS
    # "Second pass, even in a new process": run the block again; no shard or ticket request at all.
    run_block("s001_quick_start", env)
    again = origin.requests()
    assert again.get("shard", 0) == after_first_process.get("shard", 0)
    assert again.get("ticket", 0) == after_first_process.get("ticket", 0)
    assert os.listdir(os.environ["DATAVO_SHARD_CACHE_DIR"])  # the default tier, at $DATAVO_SHARD_CACHE_DIR


def test_s001_quick_start_with_the_default_home_cache(env, origin, monkeypatch):
    # Without DATAVO_SHARD_CACHE_DIR the cache is ~/.cache/altavo/datavo/shards: HOME is the swapped path.
    monkeypatch.delenv("DATAVO_SHARD_CACHE_DIR")
    run_block("s001_quick_start", env)
    assert os.path.isdir(os.path.join(os.environ["HOME"], ".cache/altavo/datavo/shards"))


def test_s001_tiers(env):
    done = run_block("s001_tiers", env)
    assert done.stdout.split() == ["default", "True", "53687091200"]


TESTED = ["s000_folder_tier", "s000_cloud_tiers", "s000_programmatic_access", "s001_quick_start", "s001_tiers"]
