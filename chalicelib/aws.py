"""boto3 clients. Endpoints come from AWS_ENDPOINT_URL (botocore reads it), so the same
code talks to AWS, ministack or LocalStack. boto3 loads with the first client: a worker
that only searches never needs it (about 0.1 s of a cold start, `bench/cold.py`)."""
from functools import lru_cache


@lru_cache(maxsize=None)
def client(service: str):
    import boto3

    return boto3.client(service)


@lru_cache(maxsize=1)
def s3_presigner():
    """SigV4 presigning: the URL then signs the Content-Length and Content-Type it was
    issued for, so S3 refuses a PUT of other bytes (SigV2 URLs sign neither)."""
    import boto3
    from botocore.config import Config

    return boto3.client("s3", config=Config(signature_version="s3v4"))
