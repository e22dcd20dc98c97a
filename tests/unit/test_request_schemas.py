"""The OpenAI and Bedrock request bodies' types (chalicelib/compat/schemas.py), checked against
docs/openapi.yaml's schemas, without the stack."""
import json
import re

import pytest
import yaml

from chalicelib import errors
from chalicelib.compat import bedrock, openai as compat, schemas
from chalicelib.errors import Invalid
from infra import request_schemas
from tests.conftest import ROOT

DOC = yaml.safe_load((ROOT / "docs" / "openapi.yaml").read_text())


def test_the_lambdas_copy_is_docs_openapi_yaml():
    """Change docs/openapi.yaml, then run python infra/request_schemas.py."""
    assert schemas.SCHEMAS.read_text() == request_schemas.render(DOC)


def _template(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "{}", path)


def test_every_openai_and_bedrock_route_is_in_the_document():
    from app import app

    documented = {(_template(path), method.upper()) for path, item in DOC["paths"].items() for method in item}
    routes = {(_template(path), method) for path, entry in app.routes.items()
              if path.startswith(("/v1/", "/knowledgebases/", "/retrieveAndGenerate")) for method in entry}
    assert routes and routes <= documented, routes - documented
    json_bodies = {op["operationId"] for path, item in DOC["paths"].items()
                   if path.startswith(request_schemas.PREFIXES) for op in item.values()
                   if "application/json" in (op.get("requestBody") or {}).get("content", {})}
    assert json_bodies == set(json.loads(schemas.SCHEMAS.read_text())["operations"])


RERANK = "retrievalConfiguration.vectorSearchConfiguration.rerankingConfiguration.bedrockRerankingConfiguration"


def _reranked(model_configuration) -> dict:
    return {"retrievalQuery": {"text": "x"}, "retrievalConfiguration": {"vectorSearchConfiguration": {
        "rerankingConfiguration": {"type": "BEDROCK_RERANKING_MODEL",
                                   "bedrockRerankingConfiguration": {"modelConfiguration": model_configuration}}}}}


@pytest.mark.parametrize("operation, body, field, code", [
    # the fuzzer's 500s
    ("retrieve", _reranked("amazon.rerank-v1:0"), f"{RERANK}.modelConfiguration", "INVALID_TYPE"),
    ("retrieve", _reranked(["x"]), f"{RERANK}.modelConfiguration", "INVALID_TYPE"),
    ("retrieve", _reranked(1), f"{RERANK}.modelConfiguration", "INVALID_TYPE"),
    ("retrieve", _reranked(True), f"{RERANK}.modelConfiguration", "INVALID_TYPE"),
    ("retrieve", _reranked({"modelArn": 5}), f"{RERANK}.modelConfiguration.modelArn", "INVALID_TYPE"),
    ("retrieve", {"retrievalQuery": {"text": "x"},
                  "retrievalConfiguration": {"vectorSearchConfiguration": {"overrideSearchType": []}}},
     "retrievalConfiguration.vectorSearchConfiguration.overrideSearchType", "INVALID_TYPE"),
    ("searchVectorStore", {"query": "x", "ranking_options": {"ranker": []}}, "ranking_options.ranker", "INVALID_TYPE"),
    # and their kind
    ("retrieve", {}, "retrievalQuery", "MISSING_REQUIRED_PARAMETER"),
    ("retrieve", {"retrievalQuery": {"text": 3}}, "retrievalQuery.text", "INVALID_TYPE"),
    ("retrieve", {"retrievalQuery": {"text": "x"}, "nextToken": 12}, "nextToken", "INVALID_TYPE"),
    ("retrieve", {"retrievalQuery": {"text": "x"}, "retrievalConfiguration": {"vectorSearchConfiguration": {
        "filter": {"orAll": [{"equals": {"key": "a", "value": 1}}, {"in": []}]}}}},
     "retrievalConfiguration.vectorSearchConfiguration.filter.orAll[1].in", "INVALID_TYPE"),
    ("retrieveAndGenerate", {"input": {"text": "x"}, "sessionId": 5, "retrieveAndGenerateConfiguration": {
        "type": "KNOWLEDGE_BASE", "knowledgeBaseConfiguration": {"knowledgeBaseId": "kb_1"}}}, "sessionId",
     "INVALID_TYPE"),
    ("searchVectorStore", {"query": ["a", 2]}, "query[1]", "INVALID_TYPE"),
    ("searchVectorStore", {"query": {"text": "a"}}, "query", "INVALID_TYPE"),
    ("searchVectorStore", {"query": "a", "filters": {"type": "in", "key": "k", "value": [1, None]}}, "filters.value[1]",
     "INVALID_TYPE"),
    ("createVectorStore", {"file_ids": "file_1"}, "file_ids", "INVALID_TYPE"),
    ("createVectorStoreFile", {"attributes": {}}, "file_id", "MISSING_REQUIRED_PARAMETER"),
    ("createVectorStoreFile", {"file_id": "f", "attributes": {"a": [1]}}, "attributes.a", "INVALID_TYPE"),
    ("updateVectorStoreFile", {"attributes": "team=x"}, "attributes", "INVALID_TYPE"),
])
def test_a_wrong_type_names_its_field(operation, body, field, code):
    with pytest.raises(Invalid) as refused:
        schemas.check(operation, body)
    assert refused.value.message.split(": ", 1)[0] == field
    assert refused.value.code == code


def test_the_error_shapes_carry_the_field():
    with pytest.raises(Invalid) as refused:
        schemas.check("searchVectorStore", {"query": "x", "ranking_options": {"ranker": []}})
    assert compat.error_body(refused.value, 400) == {"error": {
        "message": "ranking_options.ranker: must be a string", "type": "invalid_request_error",
        "param": "ranking_options.ranker", "code": "invalid_type"}}
    with pytest.raises(Invalid) as refused:
        schemas.check("retrieve", {"retrievalQuery": {"text": "x"}, "retrievalConfiguration": []})
    assert bedrock.error_shape(refused.value, 400) == (
        400, "ValidationException", {"message": "retrievalConfiguration: must be an object"})


@pytest.mark.parametrize("operation, body", [
    ("retrieve", {"retrievalQuery": {"text": "x", "type": "TEXT"}, "nextToken": None, "retrievalConfiguration": {
        "vectorSearchConfiguration": {"numberOfResults": 3, "overrideSearchType": "HYBRID", "filter": {
            "andAll": [{"greaterThan": {"key": "year", "value": 2022}}, {"in": {"key": "t", "value": ["a"]}}]},
            "rerankingConfiguration": {"type": "BEDROCK_RERANKING_MODEL", "bedrockRerankingConfiguration": {
                "numberOfRerankedResults": 2, "modelConfiguration": {"modelArn": "amazon.rerank-v1:0"},
                "metadataConfiguration": {"selectionMode": "ALL"}}}}}}),
    ("searchVectorStore", {"query": ["a", "b"], "max_num_results": None, "rewrite_query": False,
                           "ranking_options": {"ranker": "auto", "score_threshold": 0.2},
                           "filters": {"type": "or", "filters": [{"type": "eq", "key": "a", "value": True},
                                                                 {"type": "nin", "key": "b", "value": ["x", 2]}]}}),
    ("createVectorStore", {"name": "x", "file_ids": ["file_1"], "metadata": {}, "chunking_strategy": {
        "type": "static", "static": {"max_chunk_size_tokens": 400, "chunk_overlap_tokens": 50}}}),
    ("createVectorStoreFile", {"file_id": "file_1", "attributes": {"team": "x", "year": 2024, "public": True},
                               "chunking_strategy": None}),
    # values and unknown fields are the compat code's, with its own messages
    ("retrieve", {"retrievalQuery": {"text": "x"}, "retrievalConfiguration": {"vectorSearchConfiguration": {
        "numberOfResults": 500, "overrideSearchType": "KEYWORD", "unknown": 1}}}),
])
def test_right_types_pass(operation, body):
    assert schemas.check(operation, body) is body


def test_values_and_unknown_fields_keep_the_compat_codes_messages():
    body = schemas.check("retrieve", {"retrievalQuery": {"text": "x"}, "retrievalConfiguration": {
        "vectorSearchConfiguration": {"overrideSearchType": "KEYWORD"}}})
    with pytest.raises(Invalid, match="overrideSearchType: must be one of HYBRID, SEMANTIC"):
        bedrock.retrieve_request("kb_1", body)
    body = schemas.check("retrieve", {"retrievalQuery": {"text": "x"}, "guardrailConfiguration": {"guardrailId": "g"}})
    with pytest.raises(Invalid, match="guardrails are not applied"):
        bedrock.retrieve_request("kb_1", body)


@pytest.mark.parametrize("value, kb_id", [
    ("kb_1234", "kb_1234"),
    ("arn:aws:bedrock:us-east-1:123456789012:knowledge-base/kb_1234", "kb_1234"),
    ("arn:aws-us-gov:bedrock:us-gov-west-1:123456789012:knowledge-base/kb_1234", "kb_1234"),
])
def test_a_knowledge_base_by_id_or_arn(value, kb_id):
    assert bedrock.kb_id_of(value) == kb_id


@pytest.mark.parametrize("value", ["arn:aws:s3:::bucket/kb_1234", "arn:aws:bedrock:us-east-1:1:agent/kb_1234",
                                   "arn:aws:bedrock:us-east-1:1:knowledge-base/kb_1/x"])
def test_an_arn_of_something_else_is_refused(value):
    with pytest.raises(errors.Invalid, match="^knowledgeBaseId: "):
        bedrock.kb_id_of(value)
