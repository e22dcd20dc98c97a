"""A knowledge base embedded with Amazon Titan Text Embeddings v2 through the deployed
stack: created over HTTP, a document dropped in the bucket, ingested by the pipeline,
searched over HTTP.

ministack answers Titan embedding models with a text-generation mock, so while this
test runs the Lambdas that embed (the pipeline's Chunk and Embed steps and the API, which embeds
queries) reach bedrock-runtime at a local server that speaks InvokeModel instead:
AWS_ENDPOINT_URL_BEDROCK_RUNTIME, boto3's per-service endpoint, which wins over the
AWS_ENDPOINT_URL the emulator gives every function."""
import secrets
import sys

import pytest

from tests.conftest import ROOT
from tests.e2e.conftest import wait_for_status
from tests.integration.bedrock_server import TitanEmbeddingServer

sys.path.insert(0, str(ROOT / "infra"))
from deploy import wait_until_updated  # noqa: E402

pytestmark = pytest.mark.serial  # changes the embedding functions' settings, which restarts their workers
# Found by handler: names follow the deploy.
EMBEDDING_HANDLERS = ("chalicelib.ingestion.events.pipeline_chunk", "chalicelib.ingestion.events.pipeline_embed",
                      "app.app")
VARIABLE = "AWS_ENDPOINT_URL_BEDROCK_RUNTIME"


def _embedding_functions(lambda_client) -> list[str]:
    functions = [f for page in lambda_client.get_paginator("list_functions").paginate() for f in page["Functions"]]
    names = [f["FunctionName"] for f in functions if f.get("Handler") in EMBEDDING_HANDLERS]
    assert len(names) == len(EMBEDDING_HANDLERS), names
    return names


def _set_variable(lambda_client, name: str, value: str | None) -> None:
    """Adds or removes one variable, leaving the rest as they are now (a redeploy
    may have changed them meanwhile)."""
    variables = lambda_client.get_function_configuration(FunctionName=name).get("Environment", {}).get("Variables", {})
    variables = {k: v for k, v in variables.items() if k != VARIABLE}
    if value is not None:
        variables[VARIABLE] = value
    lambda_client.update_function_configuration(FunctionName=name, Environment={"Variables": variables})
    wait_until_updated(lambda_client, name)


@pytest.fixture(scope="module")
def titan(lambda_client):
    names = _embedding_functions(lambda_client)
    with TitanEmbeddingServer() as server:
        try:
            for name in names:
                _set_variable(lambda_client, name, server.endpoint_url)
            yield server
        finally:
            for name in names:
                _set_variable(lambda_client, name, None)


def test_a_bedrock_knowledge_base_ingests_from_the_bucket_and_answers_searches(api, s3, titan, local_env):
    answer = api.call("POST", "/knowledge-bases", {"name": "Titan", "embedding": {"provider": "bedrock"}})
    assert answer.status_code == 201, answer.text
    kb = answer.json()["data"]
    assert kb["embedding"] == {"provider": "bedrock", "model": "amazon.titan-embed-text-v2:0", "dimension": 1024}
    try:
        passages = {"glaciers.txt": "Glaciers carve deep valleys out of solid rock over thousands of years.",
                    "bread.txt": "Bakers knead the dough and let it proof before baking the bread."}
        for name, text in passages.items():
            s3.put_object(Bucket=local_env["KB_BUCKET"], Key=f"kb/{kb['id']}/{name}", Body=text.encode())
        for name in passages:
            doc, _ = wait_for_status(api, kb["id"], name, timeout=180)
            assert doc["status"] == "PROCESSED", doc["error"]
        # each chunk is embedded after its context line, here the document's path
        assert sorted(r["inputText"] for r in titan.requests) == sorted(f"{n}\n{t}" for n, t in passages.items())

        query = f"how do glaciers carve valleys {secrets.token_hex(4)}"  # not in the query cache yet
        answer = api.call("POST", f"/knowledge-bases/{kb['id']}/search",
                          {"query": query, "topK": 2, "strategy": "semantic"})
        assert answer.status_code == 200, answer.text
        results = answer.json()["data"]["results"]
        assert [r["source"] for r in results][0] == "glaciers.txt"
        assert titan.requests[-1] == {"inputText": query, "dimensions": 1024, "normalize": True}
        assert set(titan.model_ids()) == {"amazon.titan-embed-text-v2:0"}
    finally:
        api.call("DELETE", f"/knowledge-bases/{kb['id']}")
