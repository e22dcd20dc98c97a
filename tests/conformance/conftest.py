"""Conformance tests (issue 28): each seed's contract driven through the deployed API as the
seed's own client code would call it. They run against the stack like the e2e tests (the
e2e marker) and reuse their fixtures."""
import secrets

import pytest

from tests.e2e.conftest import Api, aws, db, lambda_client, new_key, s3, stranger  # noqa: F401 (fixtures)

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def org(local_env) -> str:
    """An organisation of the module's own: what "every knowledge base the key's user may read"
    means is then only what the module made."""
    return f"seed-{secrets.token_hex(4)}"


@pytest.fixture(scope="module")
def api(local_env, org) -> Api:
    return Api(local_env["KB_API_URL"], new_key(local_env, org, "seed-user"))


@pytest.fixture(scope="module")
def colleague(local_env, org) -> Api:
    """Another user (an editor) of the same organisation."""
    return Api(local_env["KB_API_URL"], new_key(local_env, org, "colleague"))
