"""The OpenAI and Bedrock request mappings and error shapes (chalicelib/compat), without the stack."""
import json
from dataclasses import replace
from datetime import datetime, timezone

import pytest

from chalicelib import errors
from chalicelib.compat import bedrock, openai as compat
from chalicelib.errors import Invalid
from chalicelib.storage.filters import Condition, Group


def test_openai_filters_become_the_products_retrieval_filter():
    nested = {"type": "and", "filters": [
        {"type": "eq", "key": "team", "value": "x"},
        {"type": "or", "filters": [{"type": "gte", "key": "year", "value": 2022},
                                   {"type": "nin", "key": "lang", "value": ["en", "fr"]}]}]}
    assert compat.translate_filter(nested) == {"andAll": [
        {"equals": {"key": "team", "value": "x"}},
        {"orAll": [{"greaterThanOrEquals": {"key": "year", "value": 2022}},
                   {"notIn": {"key": "lang", "value": ["en", "fr"]}}]}]}
    # a compound of one filter is that filter (the product's groups take two or more)
    assert compat.translate_filter({"type": "or", "filters": [{"type": "ne", "key": "a", "value": True}]}) == \
        {"notEquals": {"key": "a", "value": True}}


@pytest.mark.parametrize("bad, param", [
    ({"type": "like", "key": "a", "value": "x"}, "filters.type"),
    ({"type": "gt", "key": "a", "value": "soon"}, "filters.value"),
    ({"type": "in", "key": "a", "value": []}, "filters.value"),
    ({"type": "eq", "value": "x"}, "filters.key"),
    ({"type": "and", "filters": []}, "filters.filters"),
    ({"type": "and", "filters": [{"type": "eq", "key": "a", "value": {"x": 1}}]}, "filters.filters[0].value"),
    ({"type": "eq", "key": "a", "value": "x", "extra": 1}, "filters.extra"),
])
def test_bad_filters_name_the_field(bad, param):
    with pytest.raises(Invalid) as refused:
        compat.translate_filter(bad)
    assert refused.value.message.startswith(param + ":")
    body = compat.error_body(refused.value, 400)["error"]
    assert body["param"] == param and body["type"] == "invalid_request_error"


def test_search_request_maps_results_threshold_ranker_and_filter():
    request, queries, rewrite, threshold = compat.search_request("kb_1", {
        "query": ["refund", "money back"], "max_num_results": 3,
        "ranking_options": {"ranker": "default-2024-11-15", "score_threshold": 0.4},
        "filters": {"type": "eq", "key": "team", "value": "billing"}})
    assert request.knowledge_base_ids == ("kb_1",) and request.query == "refund money back"
    # score_threshold is OpenAI's: on the score each result shows (search_page), not the search's minScore
    assert (request.top_k, request.min_score, request.rerank, threshold) == (3, 0.0, True, 0.4)
    assert request.filters.expression == Condition("equals", "team", "billing")
    assert queries == ["refund", "money back"] and rewrite is False
    default, _, _, _ = compat.search_request("kb_1", {"query": "x"})
    # ranker auto: as the knowledge base says (its search.rerank); none: never
    assert (default.top_k, default.min_score, default.rerank, default.strategy) == (10, 0.0, None, "hybrid")
    never, _, _, _ = compat.search_request("kb_1", {"query": "x", "ranking_options": {"ranker": "none"}})
    assert never.rerank is False


def _passage(rank, similarity, cosine, rerank=None):
    from chalicelib.retrieval.model import Passage, Scores
    return Passage(rank=rank, content=f"text {rank}", source="a.md", path="a.md", document_id="doc_1",
                   knowledge_base_id="kb_1", chunk_index=rank, page=None, headers=[], similarity=similarity,
                   metadata={}, tokens=3, truncated=False, scores=Scores(cosine, None, similarity),
                   rerank_score=rerank, chunk_id=rank)


def test_vector_store_search_shows_the_score_it_is_ordered_by_and_thresholds_that_one():
    """A hybrid search's results come in fused order: each shows its fused score (not its
    cosine, which read unsorted), and score_threshold drops by the score shown."""
    from chalicelib.retrieval.model import SearchResult
    passages = (_passage(1, 1.0, 0.41), _passage(2, 0.62, 0.73), _passage(3, 0.35, 0.52))
    result = SearchResult(query="q", knowledge_base_ids=("kb_1",), knowledge_base_names=("kb",), passages=passages,
                          summary="", tokens_used=9, omitted=0, cached=False, strategy="hybrid", took_ms=1)
    scores = [r["score"] for r in compat.search_page(result, ["q"])["data"]]
    assert scores == sorted(scores, reverse=True) == [1.0, 0.62, 0.35]
    assert [r["score"] for r in compat.search_page(result, ["q"], 0.5)["data"]] == [1.0, 0.62]
    reranked = replace(result, passages=(_passage(1, 0.62, 0.7, rerank=0.9), _passage(2, 1.0, 0.4, rerank=0.2)))
    assert [r["score"] for r in compat.search_page(reranked, ["q"], 0.5)["data"]] == [0.9]


@pytest.mark.parametrize("body, param", [
    ({"query": "x", "max_num_results": 50}, "max_num_results"),
    ({"query": ""}, "query"),
    ({"query": "x", "ranking_options": {"ranker": "best"}}, "ranking_options.ranker"),
    ({"query": "x", "ranking_options": {"score_threshold": 2}}, "ranking_options.score_threshold"),
    ({"query": "x", "rewrite_query": "yes"}, "rewrite_query"),
    ({"query": "x", "top_k": 3}, "top_k"),
])
def test_bad_searches_name_the_field(body, param):
    with pytest.raises(Invalid) as refused:
        compat.search_request("kb_1", body)
    assert compat.error_body(refused.value, 400)["error"]["param"] == param


def test_rewrite_query_without_a_model_is_a_400(monkeypatch):
    monkeypatch.delenv("LLM_PROVIDER", raising=False)
    with pytest.raises(Invalid) as refused:
        compat.rewrite_query("refund")
    assert refused.value.message.startswith("rewrite_query:") and "language model" in refused.value.message


def test_rewrite_query_with_a_model():
    class Model:
        def complete(self, system, messages):
            assert messages[0].content == "how 2 get refund??"
            return json.dumps({"query": "how to get a refund"})

    assert compat.rewrite_query("how 2 get refund??", Model()) == "how to get a refund"


def test_error_statuses_and_codes():
    assert compat.error_body(errors.Unauthorized("no key"), 401)["error"]["code"] == "invalid_api_key"
    assert compat.error_body(errors.Throttled("slow down", retry_after=1), 429)["error"]["type"] == "rate_limit_error"
    assert compat.error_body(errors.NotFound.thing("vector store", "kb_x"), 404)["error"]["param"] is None
    assert bedrock.error_shape(errors.Unauthorized("no key"), 401)[:2] == (403, "AccessDeniedException")
    assert bedrock.error_shape(errors.Invalid("x: y"), 400)[:2] == (400, "ValidationException")
    assert bedrock.error_shape(errors.NotFound("gone"), 404)[:2] == (404, "ResourceNotFoundException")
    assert bedrock.error_shape(errors.Throttled("slow", retry_after=1), 429)[:2] == (429, "ThrottlingException")
    assert bedrock.error_shape(errors.TooLarge("big"), 413)[:2] == (400, "ValidationException")


def _doc(**row):
    return {"id": "doc_1", "kb_id": "kb_1", "path": "file_0123456789abcdef/a.pdf", "status": "PROCESSED",
            "error_code": None, "error_message": None, "size_bytes": 10, "metadata": {"team": "x"},
            "created_at": datetime(2025, 1, 1, tzinfo=timezone.utc), **row}


def test_document_status_as_vector_store_file():
    view = compat.vector_store_file_view(_doc())
    assert view["id"] == "file_0123456789abcdef" and view["status"] == "completed" and view["last_error"] is None
    assert compat.vector_store_file_view(_doc(status="PROCESSING"))["status"] == "in_progress"
    failed = compat.vector_store_file_view(_doc(status="FAILED", error_code="UNSUPPORTED_TYPE", error_message="PNG"))
    assert failed["last_error"] == {"code": "unsupported_file", "message": "UNSUPPORTED_TYPE: PNG"}
    assert compat.vector_store_file_view(_doc(status="FAILED", error_code="NO_TEXT"))["last_error"]["code"] == \
        "invalid_file"
    assert compat.vector_store_file_view(_doc(status="FAILED", error_code="INTERNAL_ERROR"))["last_error"]["code"] == \
        "server_error"
    # a document uploaded through the product's own API is its own file
    assert compat.vector_store_file_view(_doc(path="guides/a.md"))["id"] == "doc_1"


def test_static_chunking_must_be_the_stores_own():
    kb = {"chunk_tokens": 500, "chunk_overlap": 50}
    static = {"type": "static", "static": {"max_chunk_size_tokens": 500, "chunk_overlap_tokens": 50}}
    assert compat._check_chunking(static, kb) == (500, 50)
    with pytest.raises(Invalid, match="fixed when it is created"):
        compat._check_chunking({**static, "static": {"max_chunk_size_tokens": 800, "chunk_overlap_tokens": 400}}, kb)


def test_retrieve_request_maps_onto_the_search():
    request, offset, size, _ = bedrock.retrieve_request("kb_1", {
        "retrievalQuery": {"text": "solar"}, "retrievalConfiguration": {"vectorSearchConfiguration": {
            "numberOfResults": 3, "overrideSearchType": "SEMANTIC",
            "filter": {"andAll": [{"equals": {"key": "team", "value": "energy"}},
                                  {"listContains": {"key": "tags", "value": "roof"}}]}}}})
    assert (request.query, request.top_k, request.strategy, offset, size) == ("solar", 3, "semantic", 0, 3)
    assert request.filters.expression == Group("andAll", (Condition("equals", "team", "energy"),
                                                          Condition("listContains", "tags", "roof")))
    assert bedrock.retrieve_request("kb_1", {"retrievalQuery": {"text": "x"}})[0].strategy == "hybrid"


def test_next_token_pages_and_is_bound_to_its_request():
    body = {"retrievalQuery": {"text": "solar"},
            "retrievalConfiguration": {"vectorSearchConfiguration": {"numberOfResults": 4}}}
    _, _, _, digest = bedrock.retrieve_request("kb_1", body)
    request, offset, size, _ = bedrock.retrieve_request("kb_1", {**body, "nextToken": bedrock.encode_token("kb_1", 8, digest)})
    assert (offset, size, request.top_k) == (8, 4, 12)
    with pytest.raises(Invalid, match="another knowledge base or another query"):
        bedrock.retrieve_request("kb_1", {**body, "retrievalQuery": {"text": "wind"},
                                          "nextToken": bedrock.encode_token("kb_1", 8, digest)})
    with pytest.raises(Invalid, match="nextToken"):
        bedrock.retrieve_request("kb_1", {**body, "nextToken": "not-a-token"})


@pytest.mark.parametrize("config, field", [
    ({"numberOfResults": 50}, "numberOfResults"),
    ({"overrideSearchType": "KEYWORD"}, "overrideSearchType"),
    ({"implicitFilterConfiguration": {"metadataAttributes": []}}, "implicitFilterConfiguration"),
    ({"filter": {"greaterThan": {"key": "year", "value": "recent"}}}, "filter.greaterThan.value"),
    ({"rerankingConfiguration": {"type": "OTHER"}}, "rerankingConfiguration.type"),
])
def test_bad_retrieve_configurations_name_the_field(config, field):
    with pytest.raises(Invalid) as refused:
        bedrock.retrieve_request("kb_1", {"retrievalQuery": {"text": "x"},
                                          "retrievalConfiguration": {"vectorSearchConfiguration": config}})
    assert f"vectorSearchConfiguration.{field}" in refused.value.message


def test_rerank_names_the_deployments_model(monkeypatch):
    monkeypatch.setenv("RERANK_MODEL_ARN", "arn:aws:bedrock:eu-west-1::foundation-model/amazon.rerank-v1:0")
    config = {"type": "BEDROCK_RERANKING_MODEL", "bedrockRerankingConfiguration": {
        "numberOfRerankedResults": 2,
        "modelConfiguration": {"modelArn": "arn:aws:bedrock:us-east-1::foundation-model/amazon.rerank-v1:0"}}}
    request, _, size, _ = bedrock.retrieve_request("kb_1", {"retrievalQuery": {"text": "x"}, "retrievalConfiguration": {
        "vectorSearchConfiguration": {"rerankingConfiguration": config}}})
    assert request.rerank and size == 2
    config["bedrockRerankingConfiguration"]["modelConfiguration"]["modelArn"] = "cohere.rerank-v3-5:0"
    with pytest.raises(Invalid, match="reranks with"):
        bedrock.retrieve_request("kb_1", {"retrievalQuery": {"text": "x"}, "retrievalConfiguration": {
            "vectorSearchConfiguration": {"rerankingConfiguration": config}}})


def test_retrieve_and_generate_without_a_model_is_not_implemented(monkeypatch):
    monkeypatch.delenv("LLM_PROVIDER", raising=False)
    with pytest.raises(bedrock.NotImplementedHere, match="language model"):
        bedrock.retrieve_and_generate(None, {"input": {"text": "x"}})
