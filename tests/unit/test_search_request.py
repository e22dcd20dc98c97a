"""The search parser shared by the HTTP API, kb_search and tool invocation."""
import pytest

from chalicelib import limits
from chalicelib.errors import Invalid
from chalicelib.retrieval import parse_search_request
from chalicelib.storage.filters import SearchFilters


def test_a_full_body_parses_with_the_service_defaults():
    request = parse_search_request(["kb_1"], {"query": " pumps "})
    assert (request.query, request.top_k, request.min_score, request.strategy, request.max_tokens,
            request.prioritize_by, request.debug, request.filters) == (
        "pumps", limits.TOP_K.default, 0.0, "hybrid", limits.MAX_TOKENS.default, "similarity", False,
        SearchFilters())
    request = parse_search_request(["kb_1"], {"query": "x", "topK": 3, "filters": {"tags": ["a"]}, "debug": True})
    assert (request.top_k, request.filters.tags, request.debug) == (3, ("a",), True)


@pytest.mark.parametrize("body,message", [
    ({"query": "x", "top_k": 1}, "top_k: is not a search field; did you mean topK?"),
    ({"query": "x", "min_score": 0.5}, "min_score: is not a search field; did you mean minScore?"),
    ({"query": "x", "colour": "red"}, "colour: is not a search field (use query, topK"),
    ({"query": "x", "debug": "yes"}, "debug: must be true, false or {\"queryVector\": true}"),
    ({"query": "x", "topK": limits.TOP_K.high + 1}, "topK: must be between 1 and 20"),
])
def test_unknown_fields_and_loose_types_are_refused_by_name(body, message):
    with pytest.raises(Invalid) as err:
        parse_search_request(["kb_1"], body)
    assert err.value.message.startswith(message)


def test_a_callers_own_fields_are_allowed_only_where_it_says_so():
    body = {"query": "x", "knowledgeBaseIds": ["kb_1"]}
    assert parse_search_request(["kb_1"], body, extra_fields=("knowledgeBaseIds",)).query == "x"
    with pytest.raises(Invalid, match="knowledgeBaseIds: is not a search field"):
        parse_search_request(["kb_1"], body)


def _eq(key="team", value="energy"):
    return {"equals": {"key": key, "value": value}}


def test_the_filter_expression_parses_into_a_tree():
    from chalicelib.storage.filters import Condition, Group

    request = parse_search_request(["kb_1"], {"query": "x", "filter": {
        "andAll": [{"greaterThan": {"key": "year", "value": 2022}}, _eq()]}})
    assert request.filters.expression == Group("andAll", (Condition("greaterThan", "year", 2022),
                                                          Condition("equals", "team", "energy")))


def _nested(depth: int) -> dict:
    node = _eq()
    for _ in range(depth):
        node = {"orAll": [node, _eq()]}
    return node


@pytest.mark.parametrize("expression,message", [
    ({"between": {"key": "year", "value": [1, 2]}}, "filter.between: is not a filter operator"),
    ({"andAll": [_eq(), {"like": {"key": "a", "value": "b"}}]}, "filter.andAll[1].like: is not a filter operator"),
    ({"andAll": [_eq()]}, "filter.andAll: must be a list of at least 2 filters"),
    ({"equals": {"key": "a", "value": 1}, "in": {"key": "a", "value": [1]}}, "filter: must be an object with exactly one"),
    ([_eq()], "filter: must be an object with exactly one"),
    ({"greaterThan": {"key": "year", "value": "2022"}}, "filter.greaterThan.value: must be a number"),
    ({"greaterThan": {"key": "year", "value": True}}, "filter.greaterThan.value: must be a number"),
    ({"in": {"key": "team", "value": []}}, "filter.in.value: must be a list of 1 to"),
    ({"startsWith": {"key": "team", "value": 3}}, "filter.startsWith.value: must be a non-empty string"),
    ({"listContains": {"key": "tags", "value": ["a"]}}, "filter.listContains.value: must be a string, number"),
    ({"equals": {"key": "", "value": 1}}, "filter.equals.key: must be a string of 1 to 100"),
    ({"equals": {"key": "a"}}, 'filter.equals: must be {"key": ..., "value": ...}'),
    ({"equals": {"key": "a", "value": None}}, "filter.equals.value: must not be null"),
    (_nested(limits.FILTER_MAX_DEPTH + 1), "nests deeper than"),
    ({"orAll": [_eq() for _ in range(limits.FILTER_MAX_CONDITIONS + 1)]}, "filter: has more than 50 conditions"),
])
def test_a_bad_filter_is_a_400_that_names_where(expression, message):
    with pytest.raises(Invalid) as err:
        parse_search_request(["kb_1"], {"query": "x", "filter": expression})
    assert message in err.value.message and err.value.code == "INVALID_FILTER"


def test_the_deepest_allowed_filter_parses():
    parse_search_request(["kb_1"], {"query": "x", "filter": _nested(limits.FILTER_MAX_DEPTH)})


def test_hybrid_weights_are_scaled_to_sum_to_one():
    assert parse_search_request(["kb_1"], {"query": "x"}).hybrid_weights == limits.HYBRID_WEIGHTS
    request = parse_search_request(["kb_1"], {"query": "x", "hybridWeights": {"semantic": 3, "keyword": 1}})
    assert request.hybrid_weights == (0.75, 0.25)


@pytest.mark.parametrize("body,message", [
    ({"strategy": "semantic", "hybridWeights": {"semantic": 1, "keyword": 0}}, "hybridWeights: applies to the hybrid strategy only"),
    ({"hybridWeights": [0.5, 0.5]}, "hybridWeights: must be an object"),
    ({"hybridWeights": {"semantic": 1}}, "hybridWeights.keyword: is required"),
    ({"hybridWeights": {"semantic": 0, "keyword": 0}}, "hybridWeights: needs a weight above 0"),
    ({"hybridWeights": {"semantic": -1, "keyword": 1}}, "hybridWeights.semantic: must be between 0 and 1000"),
    ({"hybridWeights": {"semantic": 1, "keyword": 1, "bm25": 1}}, "hybridWeights.bm25: is not a weight"),
])
def test_bad_hybrid_weights_are_refused_by_name(body, message):
    with pytest.raises(Invalid) as err:
        parse_search_request(["kb_1"], {"query": "x", **body})
    assert err.value.message.startswith(message)
