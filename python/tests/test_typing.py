"""Types: the package is typed (py.typed, a stub for the extension), a user script touching every public name passes
Debian's `mypy --strict`, and a deliberate type error is caught."""
import ast
import os
import shutil
import subprocess
import textwrap

import pytest

import datavo_sdk
from datavo_sdk import _datavo

USER_SCRIPT = """
import datetime
import hashlib
import typing

import datavo_sdk
from datavo_sdk import (AzureBlobShardCacheTier, Batch, CacheInfo, DatavoError, GcsShardCacheTier, S3ShardCacheTier,
                        Sample, SampleBatches, SampleStream, ShardCacheHierarchy, ShardCacheTier, TierStats, UploadSummary,
                        WarmFailure, WarmReport, WarmShare, WarmTier, WarmTierUploads, get_default_shard_cache, warm)
from datavo_sdk import (BadObject, CacheEntry, CheckReport, CheckStep, GcReport, LsReport, RemovedEntry, RmReport,
                        RmTier, TierCheck, TierFailure, TierGc, TierLsTotal, TierNotVerified, TierObjectVerify,
                        TierVerify, VerifyReport)
from datavo_sdk.errors import IntegrityError, NotFoundError, UnreachableError


def fetch(f: typing.Any) -> typing.Dict[str, int]:
    return {"size": f.write(b"abc")}


def main() -> int:
    folder = ShardCacheTier("/tmp/x", "10GB", "fast", max_age=datetime.timedelta(days=3), durability="none")
    s3 = S3ShardCacheTier("bucket", "us-east-1", endpoint_url="http://127.0.0.1:9", lease_duration="10s")
    gcs = GcsShardCacheTier("bucket", "project", part_size="16MiB", concurrency=4)
    azure = AzureBlobShardCacheTier("http://127.0.0.1:9/a/c", sas_token="sv=x", upload="sync")
    cache = ShardCacheHierarchy([folder, s3, gcs, azure])
    default: ShardCacheHierarchy = get_default_shard_cache()
    path: str = cache.get_or_fetch(hashlib.sha256(b"abc").hexdigest(), fetch, instance="local")
    rows: typing.List[CacheInfo] = cache.cache_info()
    stats: TierStats = rows[0].stats
    rate: float = stats.hit_rate + stats.hits + len(SampleStream.from_dataset("voice/train", keys="audio.wav"))
    names: typing.List[str] = [tier.name for tier in cache.tiers + default.tiers]
    stream = SampleStream.from_dataset("voice/train", keys=["audio.wav"], cache=cache, shuffle=True, seed=1,
                                       prefetch=4, copy=False, progress=False, rank=0, world_size=1)
    stream.set_epoch(stream.epoch + 1)
    report: WarmReport = warm("voice/train", ["audio.wav"], cache, revision=3, jobs=2, progress=False)
    tier_rows: typing.List[WarmTier] = report.tiers
    failures: typing.List[WarmFailure] = report.failures
    uploads: typing.Optional[UploadSummary] = report.uploads
    bucket_row: typing.Optional[WarmTierUploads] = tier_rows[-1].uploads
    held: typing.Optional[int] = tier_rows[0].held
    shared: WarmReport = warm("voice/train", "audio.wav", cache, share="0/2", share_wait=30)
    share: typing.Optional[WarmShare] = shared.share
    waited: float = share.waited_seconds + share.deferred + share.from_region if share else 0.0
    warmed: int = report.shards - report.failed + tier_rows[0].hits + len(failures) + (uploads.failed if uploads else 0)
    warmed += (bucket_row.skipped if bucket_row else 0) + (held or 0) + (uploads.skipped if uploads else 0)
    listing: LsReport = cache.ls(instance="local")
    entries: typing.List[CacheEntry] = listing.entry_list
    broken: typing.List[TierFailure] = listing.failures
    per_tier: typing.List[TierLsTotal] = listing.tiers
    removed: RmReport = cache.rm(["0" * 64], dataset="voice/train")
    gone: typing.List[RemovedEntry] = removed.entry_list
    scope: typing.List[RmTier] = cache.rm(["0" * 64], tier=["fast"], all_tiers=False).tiers
    swept: GcReport = cache.gc(dry_run=True)
    gc_rows: typing.List[TierGc] = swept.tiers
    verified: VerifyReport = cache.verify(repair=False)
    verify_rows: typing.List[TierVerify] = verified.tiers
    left_alone: typing.List[TierNotVerified] = verified.not_verified
    cloud_rows: typing.List[TierObjectVerify] = cache.verify(full=True).objects
    bad_objects: typing.List[BadObject] = cloud_rows[0].bad_objects if cloud_rows else []
    unproven: int = verified.metadata_only
    gc_policy: str = gc_rows[0].policy
    gc_age: typing.Optional[int] = gc_rows[0].max_age_seconds
    checked: CheckReport = cache.check()
    check_rows: typing.List[TierCheck] = checked.tiers
    steps: typing.List[CheckStep] = check_rows[0].steps
    counters: typing.List[CacheInfo] = cache.stats(reset=True)
    checked.raise_for_error()
    warmed += len(entries) + len(broken) + len(gone) + len(gc_rows) + len(verify_rows) + len(bad_objects) + unproven + len(steps) + len(counters)
    rank, world, worker, workers = stream.consumer()
    for sample in stream:
        assert isinstance(sample, Sample)
        key: str = sample.id
        data = sample["audio.wav"]
        plain: typing.Dict[str, typing.Any] = sample.to_bytes()
        with sample:
            pass
    batches: SampleBatches = stream.batches(64, fixed=["audio.wav"], drop_last=True)
    for batch in stream.batches(8):
        assert isinstance(batch, Batch)
        ids: typing.List[str] = batch.ids
        warmed += batch.num_samples + len(ids) + len(batches)
    try:
        pass
    except (IntegrityError, NotFoundError, UnreachableError) as error:
        code: str = error.code
        errno: int = error.sys_errno
    except DatavoError:
        pass
    version: str = datavo_sdk.__version__
    return len(path) + len(names) + rank + world + worker + workers + int(rate) + stream.num_samples + warmed


if __name__ == "__main__":
    main()
"""


def mypy_binary():
    path = shutil.which("mypy", path="/usr/bin:/bin")
    if path is None:
        pytest.fail("Debian's mypy is needed (scripts/install-deps.sh installs it)")
    return path


def run_mypy(tmp_path, script):
    source = tmp_path / "user_script.py"
    source.write_text(textwrap.dedent(script))
    # The package as installed (build/python-site in scripts/test.sh): mypy finds it through MYPYPATH, and checks its
    # annotations too (no --follow-imports=silent): the package itself passes --strict.
    package_root = os.path.dirname(os.path.dirname(datavo_sdk.__file__))
    env = dict(os.environ, MYPYPATH=package_root)
    return subprocess.run(
        [mypy_binary(), "--strict", "--no-incremental", "--cache-dir", str(tmp_path / "mypy-cache"),
         "--python-executable", "/usr/bin/python3", str(source)],
        capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)


def test_the_package_ships_py_typed_and_a_stub_for_the_extension():
    package = os.path.dirname(datavo_sdk.__file__)
    assert os.path.isfile(os.path.join(package, "py.typed"))
    assert os.path.isfile(os.path.join(package, "_datavo.pyi"))


def test_the_stub_declares_every_name_the_extension_exports():
    stub = ast.parse(open(os.path.join(os.path.dirname(datavo_sdk.__file__), "_datavo.pyi")).read())
    declared = set()
    for node in stub.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            declared.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            declared.add(node.target.id)
    exported = {name for name in dir(_datavo) if not name.startswith("__") or name == "__version__"}
    assert exported - declared == set(), "missing from python/datavo_sdk/_datavo.pyi"
    assert declared - exported == set(), "declared in the stub but not exported"


def test_a_user_script_touching_every_public_name_passes_mypy_strict(tmp_path):
    done = run_mypy(tmp_path, USER_SCRIPT)
    assert done.returncode == 0, done.stdout + done.stderr
    for name in datavo_sdk.__all__:
        assert name in USER_SCRIPT, name


@pytest.mark.parametrize(
    "line, message",
    [
        ('datavo_sdk.ShardCacheTier("/tmp/x", max_age=["3d"])', 'Argument "max_age" to "ShardCacheTier"'),
        ('datavo_sdk.SampleStream.from_dataset("d/s", keys=["a"]).set_epoch("one")', 'Argument 1 to "set_epoch"'),
        ('x: int = datavo_sdk.get_default_shard_cache().tiers[0].name', "Incompatible types in assignment"),
    ],
)
def test_a_deliberate_type_error_is_caught(tmp_path, line, message):
    done = run_mypy(tmp_path, "import datavo_sdk\n" + line + "\n")
    assert done.returncode == 1, done.stdout + done.stderr
    assert message in done.stdout, done.stdout
