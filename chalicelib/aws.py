"""boto3 clients. Endpoints come from AWS_ENDPOINT_URL (botocore reads it), so the same
code talks to AWS, ministack or LocalStack."""
from functools import lru_cache

import boto3


@lru_cache(maxsize=None)
def client(service: str):
    return boto3.client(service)
