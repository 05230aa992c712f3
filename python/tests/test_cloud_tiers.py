"""The cloud tiers: S3ShardCacheTier, GcsShardCacheTier and AzureBlobShardCacheTier bind the C++ cloud
tiers (make_s3_tier, make_gcs_tier, make_azure_blob_tier). Constructing one needs no SDK, no credentials and no I/O:
these tests run with every credential variable unset and endpoints on a closed loopback port. They pass once the C++
backends have landed; until then the factories answer `unsupported` and these tests fail (by design: the SDK binds
the real factories, never a placeholder). Reading and writing through an emulator: test_cloud_emulators.py."""
import pickle
import subprocess
import sys

import pytest

from datavo_sdk import (
    AzureBlobShardCacheTier,
    GcsShardCacheTier,
    S3ShardCacheTier,
    ShardCacheHierarchy,
    ShardCacheTier,
    errors,
)

CLOSED = "http://127.0.0.1:9"  # nothing listens on the discard port: any I/O would fail, and none may happen

CREDENTIAL_VARIABLES = [
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_REGION",
    "AWS_DEFAULT_REGION", "GOOGLE_APPLICATION_CREDENTIALS", "AZURE_CLIENT_ID", "AZURE_TENANT_ID",
    "AZURE_CLIENT_SECRET", "AZURE_STORAGE_KEY", "AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_CONNECTION_STRING",
]


@pytest.fixture(autouse=True)
def no_credentials(monkeypatch, tmp_path):
    for name in CREDENTIAL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.aws, ~/.config/gcloud, ~/.azure
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def test_s3_tier_as_in_the_spec():
    tier = S3ShardCacheTier(bucket="datavo-cache-us-east-1", region="us-east-1", name="region-us-east-1")
    assert (tier.name, tier.max_bytes, tier.supports_direct_read, tier.type) == ("region-us-east-1", None, False, "s3")
    extra = S3ShardCacheTier(bucket="b-1", prefix="team-a", endpoint_url=CLOSED, max_bytes="1TB", read_only=True,
                             addressing_style="path", upload="sync", single_flight=False, part_size="8MiB",
                             concurrency=4)
    assert extra.name == "b-1" and extra.max_bytes == 1 << 40 and extra.read_only


def test_gcs_tier_as_in_the_spec():
    tier = GcsShardCacheTier(bucket="datavo-cache-us-central1", project="datavo-prod", name="region-us-central1")
    assert (tier.name, tier.max_bytes, tier.supports_direct_read, tier.type) == (
        "region-us-central1", None, False, "gcs")
    assert GcsShardCacheTier(bucket="datavo-b", prefix="p", endpoint_url=CLOSED, max_bytes=10).max_bytes == 10


def test_azure_tier_as_in_the_spec():
    tier = AzureBlobShardCacheTier(container_url="https://datavoeastus.blob.core.windows.net/shards",
                                   name="region-eastus")
    assert (tier.name, tier.supports_direct_read, tier.type) == ("region-eastus", False, "azure_blob")
    secret = AzureBlobShardCacheTier(container_url=CLOSED + "/devstoreaccount1/c", sas_token="sv=2021&sig=SECRET",
                                     managed_identity_client_id="00000000-0000-0000-0000-000000000000",
                                     prefix="team-a")
    assert "SECRET" not in repr(secret)


def test_a_hierarchy_puts_a_folder_tier_in_front(tmp_path):
    h = ShardCacheHierarchy([
        ShardCacheTier(str(tmp_path / "nvme"), max_bytes=200 * 1024**3, name="nvme"),
        S3ShardCacheTier(bucket="datavo-cache-us-east-1", region="us-east-1", name="region-us-east-1",
                         endpoint_url=CLOSED),
    ])
    assert [(t.name, t.supports_direct_read) for t in h.tiers] == [("nvme", True), ("region-us-east-1", False)]
    with pytest.raises(ValueError, match="folder"):
        ShardCacheHierarchy([GcsShardCacheTier(bucket="datavo-b", endpoint_url=CLOSED)])
    assert [t.name for t in pickle.loads(pickle.dumps(h)).tiers] == ["nvme", "region-us-east-1"]


@pytest.mark.parametrize(
    "make, fragment",
    [
        (lambda: S3ShardCacheTier(bucket="Bad_Bucket"), "S3ShardCacheTier.bucket: invalid S3 bucket name"),
        (lambda: S3ShardCacheTier(bucket="b-1", endpoint_url="ftp://x"), "S3ShardCacheTier.endpoint_url"),
        (lambda: S3ShardCacheTier(bucket="b-1", prefix="a/../b"), "S3ShardCacheTier.prefix"),
        (lambda: GcsShardCacheTier(bucket="datavo-b", part_size="1KB"), "GcsShardCacheTier.part_size"),
        (lambda: AzureBlobShardCacheTier(container_url="not a url"), "AzureBlobShardCacheTier.container_url"),
    ],
)
def test_bad_cloud_arguments_are_value_errors(make, fragment):
    # Checked by the same C++ parser as shards.yaml, before any factory runs.
    with pytest.raises(ValueError) as raised:
        make()
    assert fragment in str(raised.value) and isinstance(raised.value, errors.ConfigError)


def test_importing_a_cloud_tier_loads_no_cloud_sdk():
    code = ("import sys; from datavo_sdk import S3ShardCacheTier, GcsShardCacheTier, AzureBlobShardCacheTier; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('boto3', 'botocore', 'google', 'azure')]; "
            "print(bad)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr
