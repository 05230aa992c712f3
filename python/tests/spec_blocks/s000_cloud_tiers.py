# spec 000, "Cloud tiers": the three cloud tier examples (verbatim).
AzureBlobShardCacheTier(
    container_url="https://datavoeastus.blob.core.windows.net/shards",
    name="region-eastus",
    # sas_token: SAS string for ad-hoc auth, otherwise DefaultAzureCredential
    # managed_identity_client_id: pin to a specific user-assigned MI
)

S3ShardCacheTier(
    bucket="datavo-cache-us-east-1",
    region="us-east-1",
    name="region-us-east-1",
    # boto3's default credential chain — env vars, EC2 instance profile,
    # ECS task role, EKS service account...
)

GcsShardCacheTier(
    bucket="datavo-cache-us-central1",
    project="datavo-prod",
    name="region-us-central1",
    # Application Default Credentials — workload identity on GKE, service
    # account on GCE, gcloud auth locally...
)
