"""Amazon Bedrock's Retrieve through boto3's bedrock-agent-runtime client itself, against the
deployed stack: endpoint_url is KB_API_URL and a before-send hook sends the product's key as
a bearer token (README: Coming from Bedrock)."""
import base64
import secrets

import boto3
import pytest
from botocore import UNSIGNED
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.e2e.conftest import new_key, wait_for_status

pytestmark = pytest.mark.e2e

DOCUMENTS = {
    "energy/solar.md": ("Solar panels on the depot roof produce most of the site's power in summer.",
                        {"team": "energy", "year": 2024, "tags": ["solar", "roof"]}),
    "energy/wind.md": ("Two wind turbines on the ridge supply the depot in winter storms.",
                       {"team": "energy", "year": 2021, "tags": ["wind"]}),
    "fleet/buses.md": ("The electric bus fleet charges at the depot overnight from the grid and the panels.",
                       {"team": "fleet", "year": 2023, "tags": ["buses"]}),
    "fleet/trucks.md": ("Delivery trucks run on biodiesel and refuel at the depot pump.",
                        {"team": "fleet", "year": 2022, "tags": ["trucks"]}),
    "people/canteen.md": ("The depot canteen serves lunch from noon; power cuts close it early.",
                          {"team": "people", "year": 2024, "tags": ["food"]}),
}
QUERY = "what powers the depot?"


def client_for(local_env, key: str, **config):
    """The documented setup: unsigned requests, the key added by a before-send hook."""
    runtime = boto3.client("bedrock-agent-runtime", endpoint_url=local_env["KB_API_URL"], region_name="us-east-1",
                           config=Config(signature_version=UNSIGNED, retries={"total_max_attempts": 1}, **config))
    runtime.meta.events.register("before-send.bedrock-agent-runtime.*",
                                 lambda request, **_: request.headers.__setitem__("Authorization", f"Bearer {key}"))
    return runtime


@pytest.fixture(scope="module")
def kb(api):
    kb_id = api.call("POST", "/knowledge-bases", {"name": "Bedrock drop-in"}).json()["data"]["id"]
    for path, (text, metadata) in DOCUMENTS.items():
        answer = api.call("POST", f"/knowledge-bases/{kb_id}/documents", {
            "path": path, "metadata": metadata, "content": base64.b64encode(text.encode()).decode()})
        assert answer.status_code == 202, answer.text
    for path in DOCUMENTS:
        doc, _ = wait_for_status(api, kb_id, path)
        assert doc["status"] == "PROCESSED", doc
    yield kb_id
    api.call("DELETE", f"/knowledge-bases/{kb_id}")


@pytest.fixture(scope="module")
def runtime(local_env, api):
    return client_for(local_env, api.key)


def _paths(results) -> list[str]:
    return [r["location"]["s3Location"]["uri"].split("/", 5)[-1] for r in results]


def test_retrieve_answers_bedrocks_shape(runtime, kb, local_env):
    answer = runtime.retrieve(knowledgeBaseId=kb, retrievalQuery={"text": QUERY},
                              retrievalConfiguration={"vectorSearchConfiguration": {"numberOfResults": 5}})
    results = answer["retrievalResults"]
    assert len(results) == 5
    first = results[0]
    assert first["content"]["type"] == "TEXT" and first["content"]["text"]
    assert first["location"]["type"] == "S3"
    uri = first["location"]["s3Location"]["uri"]
    assert uri.startswith(f"s3://{local_env['KB_BUCKET']}/kb/{kb}/")
    path = uri.split(f"/kb/{kb}/", 1)[1]
    assert first["metadata"]["team"] == DOCUMENTS[path][1]["team"]
    assert first["metadata"]["x-amz-bedrock-kb-source-uri"] == uri
    scores = [r["score"] for r in results]
    assert scores == sorted(scores, reverse=True)


def test_retrieve_with_a_filter(runtime, kb):
    answer = runtime.retrieve(knowledgeBaseId=kb, retrievalQuery={"text": QUERY}, retrievalConfiguration={
        "vectorSearchConfiguration": {"numberOfResults": 10, "filter": {"andAll": [
            {"equals": {"key": "team", "value": "energy"}}, {"greaterThan": {"key": "year", "value": 2022}}]}}})
    assert _paths(answer["retrievalResults"]) == ["energy/solar.md"]
    either = runtime.retrieve(knowledgeBaseId=kb, retrievalQuery={"text": QUERY}, retrievalConfiguration={
        "vectorSearchConfiguration": {"numberOfResults": 10, "overrideSearchType": "SEMANTIC", "filter": {"orAll": [
            {"listContains": {"key": "tags", "value": "wind"}}, {"startsWith": {"key": "team", "value": "peo"}}]}}})
    assert sorted(_paths(either["retrievalResults"])) == ["energy/wind.md", "people/canteen.md"]


def test_pages_with_next_token(runtime, kb):
    whole = runtime.retrieve(knowledgeBaseId=kb, retrievalQuery={"text": QUERY},
                             retrievalConfiguration={"vectorSearchConfiguration": {"numberOfResults": 5}})
    config = {"vectorSearchConfiguration": {"numberOfResults": 2}}
    pages, token = [], None
    while True:
        answer = runtime.retrieve(knowledgeBaseId=kb, retrievalQuery={"text": QUERY}, retrievalConfiguration=config,
                                  **({"nextToken": token} if token else {}))
        pages.append(_paths(answer["retrievalResults"]))
        token = answer.get("nextToken")
        if not token:
            break
    assert [len(p) for p in pages[:3]] == [2, 2, 1]
    assert sum(pages, []) == _paths(whole["retrievalResults"])
    with pytest.raises(runtime.exceptions.ValidationException, match="another knowledge base or another query"):
        runtime.retrieve(knowledgeBaseId=kb, retrievalQuery={"text": "something else"}, retrievalConfiguration=config,
                         nextToken=answer.get("nextToken") or _first_token(runtime, kb, config))


def _first_token(runtime, kb, config) -> str:
    return runtime.retrieve(knowledgeBaseId=kb, retrievalQuery={"text": QUERY}, retrievalConfiguration=config)["nextToken"]


def test_hybrid_and_reranking(runtime, kb):
    hybrid = runtime.retrieve(knowledgeBaseId=kb, retrievalQuery={"text": "biodiesel pump"}, retrievalConfiguration={
        "vectorSearchConfiguration": {"numberOfResults": 1, "overrideSearchType": "HYBRID"}})
    assert _paths(hybrid["retrievalResults"]) == ["fleet/trucks.md"]
    reranked = runtime.retrieve(knowledgeBaseId=kb, retrievalQuery={"text": QUERY}, retrievalConfiguration={
        "vectorSearchConfiguration": {"numberOfResults": 3, "rerankingConfiguration": {
            "type": "BEDROCK_RERANKING_MODEL", "bedrockRerankingConfiguration": {
                "numberOfRerankedResults": 2,
                "modelConfiguration": {"modelArn": "arn:aws:bedrock:us-east-1::foundation-model/amazon.rerank-v1:0"}}}}})
    assert len(reranked["retrievalResults"]) == 2
    with pytest.raises(runtime.exceptions.ValidationException, match="reranks with"):
        runtime.retrieve(knowledgeBaseId=kb, retrievalQuery={"text": QUERY}, retrievalConfiguration={
            "vectorSearchConfiguration": {"rerankingConfiguration": {
                "type": "BEDROCK_RERANKING_MODEL", "bedrockRerankingConfiguration": {
                    "modelConfiguration": {"modelArn": "arn:aws:bedrock:us-east-1::foundation-model/cohere.rerank-v3-5:0"}}}}})


def test_errors_are_boto3s_own_exceptions(runtime, kb, local_env):
    with pytest.raises(runtime.exceptions.ValidationException, match="numberOfResults"):
        runtime.retrieve(knowledgeBaseId=kb, retrievalQuery={"text": QUERY},
                         retrievalConfiguration={"vectorSearchConfiguration": {"numberOfResults": 50}})
    with pytest.raises(runtime.exceptions.ValidationException, match="must be a number for greaterThan"):
        runtime.retrieve(knowledgeBaseId=kb, retrievalQuery={"text": QUERY}, retrievalConfiguration={
            "vectorSearchConfiguration": {"filter": {"greaterThan": {"key": "year", "value": "recent"}}}})
    with pytest.raises(runtime.exceptions.ValidationException, match="guardrail"):
        runtime.retrieve(knowledgeBaseId=kb, retrievalQuery={"text": QUERY},
                         guardrailConfiguration={"guardrailId": "g1", "guardrailVersion": "1"})
    with pytest.raises(runtime.exceptions.ResourceNotFoundException):
        runtime.retrieve(knowledgeBaseId="kb_0000000000000000", retrievalQuery={"text": QUERY})
    stranger = client_for(local_env, new_key(local_env, f"e2e-bedrock-other-{secrets.token_hex(4)}", "eve"))
    with pytest.raises(stranger.exceptions.ResourceNotFoundException):  # not yours is not found
        stranger.retrieve(knowledgeBaseId=kb, retrievalQuery={"text": QUERY})
    with pytest.raises(runtime.exceptions.AccessDeniedException):
        client_for(local_env, "kbk_not-a-key").retrieve(knowledgeBaseId=kb, retrievalQuery={"text": QUERY})
    signed = boto3.client("bedrock-agent-runtime", endpoint_url=local_env["KB_API_URL"], region_name="us-east-1",
                          aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret",
                          config=Config(retries={"total_max_attempts": 1}))
    with pytest.raises(signed.exceptions.AccessDeniedException, match="SigV4"):
        signed.retrieve(knowledgeBaseId=kb, retrievalQuery={"text": QUERY})


_RERANK = "retrievalConfiguration.vectorSearchConfiguration.rerankingConfiguration.bedrockRerankingConfiguration"


def _reranked(model_configuration) -> dict:
    return {"vectorSearchConfiguration": {"rerankingConfiguration": {
        "type": "BEDROCK_RERANKING_MODEL", "bedrockRerankingConfiguration": {"modelConfiguration": model_configuration}}}}


@pytest.mark.parametrize("configuration, field", [
    (_reranked("amazon.rerank-v1:0"), f"{_RERANK}.modelConfiguration"),
    (_reranked(["amazon.rerank-v1:0"]), f"{_RERANK}.modelConfiguration"),
    (_reranked(7), f"{_RERANK}.modelConfiguration"),
    (_reranked(True), f"{_RERANK}.modelConfiguration"),
    (_reranked({"modelArn": 5}), f"{_RERANK}.modelConfiguration.modelArn"),
    ({"vectorSearchConfiguration": {"overrideSearchType": []}},
     "retrievalConfiguration.vectorSearchConfiguration.overrideSearchType"),
    ({"vectorSearchConfiguration": {"filter": {"andAll": [{"equals": {"key": "team", "value": "x"}},
                                                          {"equals": {"key": 3, "value": "y"}}]}}},
     "retrievalConfiguration.vectorSearchConfiguration.filter.andAll[1].equals.key"),
])
def test_a_wrong_type_is_a_validation_exception_naming_the_field(api, kb, configuration, field):
    """Types boto3 refuses before sending, sent as another SDK or a hand-made request would."""
    answer = api.call("POST", f"/knowledgebases/{kb}/retrieve",
                      {"retrievalQuery": {"text": QUERY}, "retrievalConfiguration": configuration})
    assert answer.status_code == 400, answer.text
    assert answer.headers["x-amzn-ErrorType"] == "ValidationException"
    assert answer.json()["message"].startswith(f"{field}: must be ")


def test_retrieve_by_the_knowledge_bases_arn(runtime, kb):
    """boto3 percent-encodes the ARN's ":" and "/" into the path (…%3Aknowledge-base%2Fkb_…)."""
    by_id = runtime.retrieve(knowledgeBaseId=kb, retrievalQuery={"text": QUERY})["retrievalResults"]
    arn = f"arn:aws:bedrock:us-east-1:123456789012:knowledge-base/{kb}"
    by_arn = runtime.retrieve(knowledgeBaseId=arn, retrievalQuery={"text": QUERY})["retrievalResults"]
    assert by_arn and _paths(by_arn) == _paths(by_id)
    with pytest.raises(runtime.exceptions.ValidationException, match="knowledgeBaseId"):
        runtime.retrieve(knowledgeBaseId=f"arn:aws:s3:::bucket/{kb}", retrievalQuery={"text": QUERY})
    with pytest.raises(runtime.exceptions.ResourceNotFoundException):
        runtime.retrieve(knowledgeBaseId="arn:aws:bedrock:us-east-1:123456789012:knowledge-base/kb_0000000000000000",
                         retrievalQuery={"text": QUERY})


def test_throttled_is_throttling_exception(local_env, kb, api):
    slow = client_for(local_env, new_key(local_env, f"e2e-bedrock-rate-{secrets.token_hex(4)}", "fast", rate=2))
    with pytest.raises(slow.exceptions.ThrottlingException) as throttled:
        for _ in range(40):
            try:
                slow.retrieve(knowledgeBaseId=kb, retrievalQuery={"text": QUERY})
            except slow.exceptions.ResourceNotFoundException:
                pass  # another organisation's key: the knowledge base is not its own, and that is fine here
    assert throttled.value.response["ResponseMetadata"]["HTTPStatusCode"] == 429


def test_retrieve_and_generate_without_a_model_is_501(runtime, kb, lambda_client, local_env):
    from tests.e2e.test_openai_vector_stores import llm_configured

    if llm_configured(lambda_client, local_env):
        pytest.skip("a chat model is configured on the API function right now")
    with pytest.raises(ClientError) as refused:
        runtime.retrieve_and_generate(input={"text": QUERY}, retrieveAndGenerateConfiguration={
            "type": "KNOWLEDGE_BASE", "knowledgeBaseConfiguration": {
                "knowledgeBaseId": kb, "modelArn": "arn:aws:bedrock:us-east-1::foundation-model/m"}})
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 501
    assert refused.value.response["Error"]["Code"] == "NotImplementedException"
    assert "language model" in refused.value.response["Error"]["Message"]
