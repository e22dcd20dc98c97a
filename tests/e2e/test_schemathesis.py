"""Property-based tests of the running local API against docs/openapi.yaml: no
5xx, and every answer matches the documented status codes and schemas; and hostile
requests (schemathesis' negative mode: wrong types, values out of range, missing and
extra fields, NUL bytes) never get a 5xx (issue 29)."""
import secrets

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import GenerationMode
from schemathesis.checks import (content_type_conformance, not_a_server_error,
                                 response_schema_conformance, status_code_conformance)

from tests.conftest import ROOT, read_local_env
from tests.e2e.conftest import Api, new_key

# Under pytest-xdist schemathesis runs each test as one item that checks no operation: tests/run.py
# runs these in a process of their own.
pytestmark = pytest.mark.one_process
schema = schemathesis.openapi.from_path(ROOT / "docs" / "openapi.yaml")
# Conformance from valid requests; the invalid ones are the hostile test's. With schemathesis'
# default (both modes) the coverage phase sent 2,400 mostly negative cases, 774 to POST /search
# alone: 206 s of make test; valid ones only, 847 cases in 54 s.
schema.config.generation.update(modes=[GenerationMode.POSITIVE])
# Generated examples only, not the coverage phase's boundary cases: with issue 31's routes they
# took 57 of the test's 77 s (20 s without), and make test passed its 15 minutes. Boundaries that
# matter are in the hand-written tests by name (test_hostile_input.py, test_api.py).
schema.config.phases.update(phases=["examples", "fuzzing"])
# No DELETE: its hostile part may be nothing but the path, which would remove the targets.
# Nor the three GETs that take nothing to make hostile (schemathesis skips them).
hostile = (schemathesis.openapi.from_path(ROOT / "docs" / "openapi.yaml").exclude(method="DELETE")
           .exclude(method="GET", path=["/agents", "/console", "/health"]))
hostile.config.generation.update(modes=[GenerationMode.NEGATIVE], allow_x00=True)
# Generated cases only: the coverage phase's exhaustive boundary cases took 40 s an operation
# on the largest bodies (search), and the conformance test above runs the examples.
hostile.config.phases.update(phases=["fuzzing"])
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@pytest.fixture(scope="module")
def target(local_env):
    """A real knowledge base to aim the generated requests at (deleting it is left to other tests),
    in an organisation of its own: GET /knowledge-base/query searches every knowledge base of
    the organisation, and what other tests leave there is not this test's to meet."""
    api = Api(local_env["KB_API_URL"], new_key(local_env, f"e2e-fuzz-{secrets.token_hex(4)}", "fuzzer"))
    kb = api.call("POST", "/knowledge-bases", {"name": "Fuzzed"}).json()["data"]
    api.call("POST", f"/knowledge-bases/{kb['id']}/entries", {"title": "Seed", "content": "Seed text for search."})
    agent = api.call("POST", "/agents", {"name": "Fuzzed agent"}).json()["data"]
    tool = api.call("POST", f"/agents/{agent['id']}/knowledge-base-tools",
                    {"quickAdd": True, "knowledgeBaseId": kb["id"]}).json()["data"]["tool"]
    uploaded = api.call("POST", "/v1/files", files={"file": ("fuzzed.md", b"Fuzzed file text."),
                                                    "purpose": (None, "assistants")}).json()
    api.call("POST", f"/v1/vector_stores/{kb['id']}/files", {"file_id": uploaded["id"]})
    return {"kb_id": kb["id"], "agent_id": agent["id"], "tool_id": tool["id"], "file_id": uploaded["id"],
            "key": api.key, "url": read_local_env()["KB_API_URL"]}


# The OpenAI and Bedrock paths name the knowledge base their own way. Their 16 operations add about 35 s
# (both tests, on 2 busy cores) to the 70 s the others take.
TARGETS = {"kb_id": "kb_id", "vector_store_id": "kb_id", "knowledgeBaseId": "kb_id", "agent_id": "agent_id",
           "tool_id": "tool_id", "file_id": "file_id"}


def _aim(case, target) -> None:
    for name, value in TARGETS.items():
        if name in (case.path_parameters or {}):
            case.path_parameters[name] = target[value]


def _call_and_validate(case, target, checks) -> None:
    response = case.call(base_url=target["url"], headers={"Authorization": f"Bearer {target['key']}"}, timeout=60)
    if response.status_code == 501 and case.path == "/retrieveAndGenerate":
        # Bedrock's NotImplementedException where no chat model is configured (the local stack has none):
        # documented, not a fault
        checks = [check for check in checks if check is not not_a_server_error]
        if not checks:  # an empty list would mean schemathesis's own defaults, which include it
            return
    case.validate_response(response, checks=checks)


# Deleting these would leave the rest of the run nothing real to aim at.
KEEP = {("DELETE", "/knowledge-bases/{kb_id}"), ("DELETE", "/agents/{agent_id}"),
        ("DELETE", "/agents/{agent_id}/tools/{tool_id}"), ("DELETE", "/v1/vector_stores/{vector_store_id}"),
        ("DELETE", "/v1/files/{file_id}"), ("DELETE", "/v1/vector_stores/{vector_store_id}/files/{file_id}")}


# Fuzzed examples per operation: 8 and 4 (were 12 and 15, then 6 and 8); derandomized, so each
# run sends the same cases, and the hand-written tests (test_hostile_input.py, test_api.py) hold
# the cases that matter by name.
@schema.parametrize()
@settings(max_examples=8, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
def test_api_conforms_to_its_openapi_document(case, target):
    if (case.method, case.path) not in KEEP:
        _aim(case, target)
    _call_and_validate(case, target, CHECKS)


@hostile.parametrize()
@settings(max_examples=4, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
def test_hostile_requests_never_get_a_5xx(case, target):
    """Aimed at the real knowledge base, agent and tool where the operation names one."""
    _aim(case, target)
    _call_and_validate(case, target, [not_a_server_error])
