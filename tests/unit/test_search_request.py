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
    ({"query": "x", "debug": "yes"}, "debug: must be true or false"),
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
