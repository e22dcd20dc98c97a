"""End-to-end tests: the deployed stack on the emulator, over HTTP and S3 only."""
import json
import secrets
import time

import boto3
import psycopg
import pytest
import requests
from psycopg.rows import dict_row

pytestmark = pytest.mark.e2e


class Api:
    def __init__(self, base_url: str, key: str | None):
        self.base_url, self.key = base_url, key

    def call(self, method: str, path: str, body=None, key: str | None = "default", **kwargs):
        key = self.key if key == "default" else key
        headers = {**({"Authorization": f"Bearer {key}"} if key else {}), **kwargs.pop("headers", {})}
        return requests.request(method, self.base_url + path, json=body, headers=headers,
                                timeout=120, **kwargs)


@pytest.fixture(scope="session")
def aws(local_env):
    return boto3.Session(aws_access_key_id=local_env["AWS_ACCESS_KEY_ID"],
                         aws_secret_access_key=local_env["AWS_SECRET_ACCESS_KEY"],
                         region_name=local_env["AWS_DEFAULT_REGION"])


@pytest.fixture(scope="session")
def s3(aws, local_env):
    return aws.client("s3", endpoint_url=local_env["AWS_ENDPOINT_URL"])


@pytest.fixture(scope="session")
def lambda_client(aws, local_env):
    return aws.client("lambda", endpoint_url=local_env["AWS_ENDPOINT_URL"])


def new_key(local_env, org: str, user: str, role: str | None = None, rate: int | None = 1000,
            groups: str | None = None) -> str:
    """A key issued as `make key` does. Its rate is high unless given: a test of something
    else must not meet the rate limit (test_access.py tests the default one)."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    args = (["key", org, user] + (["--role", role] if role else []) + (["--rate", str(rate)] if rate else [])
            + (["--groups", groups] if groups else []))
    out = subprocess.run([sys.executable, str(ROOT / "localstack" / "stack.py"), *args],
                         check=True, capture_output=True, text=True)
    return out.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="session")
def api(local_env):
    key = new_key(local_env, f"e2e-{secrets.token_hex(4)}", "tester")
    return Api(local_env["KB_API_URL"], key)


@pytest.fixture(scope="module")
def db(local_env):
    """The stack's database, for what the API does not show (chunks, run ids) and for
    arranging states a test needs (a run that ended, a row whose object is gone)."""
    with psycopg.connect(local_env["DATABASE_URL"], autocommit=True, row_factory=dict_row) as conn:
        yield conn


@pytest.fixture(scope="session")
def stranger(local_env):
    return Api(local_env["KB_API_URL"], new_key(local_env, f"e2e-other-{secrets.token_hex(4)}", "eve"))


def list_documents(api: Api, kb_id: str, **params) -> list[dict]:
    """Every document of the knowledge base (all pages)."""
    items, token = [], None
    while True:
        query = {"limit": 1000, **params, **({"nextToken": token} if token else {})}
        answer = api.call("GET", f"/knowledge-bases/{kb_id}/documents", params=query)
        assert answer.status_code == 200, answer.text
        items += answer.json()["data"]["items"]
        token = answer.json()["data"]["nextToken"]
        if not token:
            return items


def find_document(api: Api, kb_id: str, name: str) -> dict | None:
    """The document at this path, else the first whose file name it is."""
    answer = api.call("GET", f"/knowledge-bases/{kb_id}/documents", params={"path": name})
    if answer.status_code == 200 and answer.json()["data"]["items"]:
        return answer.json()["data"]["items"][0]
    return next((d for d in list_documents(api, kb_id) if d["filename"] == name), None)


def wait_for_status(api: Api, kb_id: str, filename: str, wanted=("PROCESSED", "FAILED"),
                    timeout: float = 120, changed_since: str | None = None) -> tuple[dict, list[str]]:
    """Poll the documents list; returns the document and every status seen. With
    changed_since (an updatedAt seen before an upload), an older state does not count."""
    seen, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        doc = find_document(api, kb_id, filename)
        if doc and changed_since is not None and doc["updatedAt"] == changed_since:
            doc = None
        if doc and (not seen or seen[-1] != doc["status"]):
            seen.append(doc["status"])
        if doc and doc["status"] in wanted:
            return doc, seen
        time.sleep(0.25)
    raise AssertionError(f"{filename} did not reach {wanted} within {timeout}s; saw {seen}")


def invoke(lambda_client, payload: dict) -> dict:
    from tests.conftest import read_local_env

    answer = lambda_client.invoke(FunctionName=read_local_env()["KB_SEARCH_FUNCTION"],
                                  Payload=json.dumps(payload).encode())
    assert "FunctionError" not in answer, answer["Payload"].read()
    return json.loads(answer["Payload"].read())
