"""A search request from its JSON (the HTTP body, the kb_search payload, a tool's
arguments), checked against chalicelib.limits. Errors name the public field."""
from typing import Optional, Union

from chalicelib import limits
from chalicelib.errors import Invalid
from chalicelib.retrieval.model import FIELD_CHOICES, PRIORITIES, STRATEGIES, SearchRequest
from chalicelib.storage.filters import COMPARISONS, GROUPS, NUMERIC, Condition, Expression, Group, SearchFilters
from chalicelib.validate import (bool_field, camel_case, choice_field, int_field, number_field,
                                 refuse_unknown, string_field, string_list)

FILTER_FIELDS = ("filename", "tags", "documentIds", "metadata", "userId")
SEARCH_FIELDS = ("query", "topK", "minScore", "strategy", "hybridWeights", "filters", "filter", "maxTokens",
                 "prioritizeBy", "debug", "rerank", "fields")


def refuse_unknown_fields(body: dict, allowed: tuple[str, ...]) -> None:
    """A field the search does not know is a 400 naming it (top_k used to be
    accepted and ignored), with the field it was probably meant to be."""
    for name in sorted(set(body) - set(allowed)):
        meant = camel_case(str(name))
        hint = f"; did you mean {meant}?" if meant != name and meant in allowed else ""
        raise Invalid.field(str(name), f"is not a search field{hint} (use {', '.join(allowed)})")


def parse_filter(value, path: str = "filter") -> Expression:
    """Bedrock's RetrievalFilter: one operator per object, e.g.
    {"andAll": [{"greaterThan": {"key": "year", "value": 2022}}, {"equals": {"key": "team", "value": "energy"}}]}."""
    count = [0]

    def walk(node, where: str, depth: int) -> Expression:
        if not isinstance(node, dict) or len(node) != 1:
            raise Invalid.field(where, "must be an object with exactly one operator "
                                       f"({', '.join(COMPARISONS + GROUPS)})", code="INVALID_FILTER")
        (op, operand), = node.items()
        if op in GROUPS:
            if depth >= limits.FILTER_MAX_DEPTH:
                raise Invalid.field(where, f"nests deeper than {limits.FILTER_MAX_DEPTH} levels", code="INVALID_FILTER")
            if not isinstance(operand, list) or len(operand) < 2:
                raise Invalid.field(f"{where}.{op}", "must be a list of at least 2 filters (use a single filter alone)",
                                    code="INVALID_FILTER")
            return Group(op, tuple(walk(m, f"{where}.{op}[{i}]", depth + 1) for i, m in enumerate(operand)))
        if op not in COMPARISONS:
            raise Invalid.field(f"{where}.{op}", f"is not a filter operator; use one of {', '.join(COMPARISONS + GROUPS)}",
                                code="INVALID_FILTER")
        count[0] += 1
        if count[0] > limits.FILTER_MAX_CONDITIONS:
            raise Invalid.field(path, f"has more than {limits.FILTER_MAX_CONDITIONS} conditions", code="INVALID_FILTER")
        here = f"{where}.{op}"
        if not isinstance(operand, dict) or set(operand) != {"key", "value"}:
            raise Invalid.field(here, 'must be {"key": ..., "value": ...}', code="INVALID_FILTER")
        key, val = operand["key"], operand["value"]
        if not isinstance(key, str) or not 0 < len(key) <= limits.FILTER_KEY_MAX_CHARS:
            raise Invalid.field(f"{here}.key", f"must be a string of 1 to {limits.FILTER_KEY_MAX_CHARS} characters",
                                code="INVALID_FILTER")
        _check_filter_value(op, val, f"{here}.value")
        return Condition(op, key, val)

    return walk(value, path, 0)


def _check_filter_value(op: str, value, where: str) -> None:
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    scalar = number or isinstance(value, (str, bool))
    if op in NUMERIC and not number:
        raise Invalid.field(where, f"must be a number for {op}", code="INVALID_FILTER")
    if op in ("startsWith", "stringContains") and not (isinstance(value, str) and value):
        raise Invalid.field(where, f"must be a non-empty string for {op}", code="INVALID_FILTER")
    if op == "listContains" and not scalar:
        raise Invalid.field(where, "must be a string, number or boolean for listContains", code="INVALID_FILTER")
    if op in ("in", "notIn") and not (isinstance(value, list) and 0 < len(value) <= limits.FILTER_LIST_MAX):
        raise Invalid.field(where, f"must be a list of 1 to {limits.FILTER_LIST_MAX} values for {op}",
                            code="INVALID_FILTER")
    if op in ("equals", "notEquals") and value is None:
        raise Invalid.field(where, f"must not be null for {op}", code="INVALID_FILTER")


def parse_hybrid_weights(value, strategy: str) -> tuple[float, float]:
    """{"semantic": w, "keyword": w}: non-negative, not both 0; scaled to sum to 1."""
    if value is None:
        return limits.HYBRID_WEIGHTS
    if strategy != "hybrid":
        raise Invalid.field("hybridWeights", f"applies to the hybrid strategy only, not {strategy}")
    if not isinstance(value, dict):
        raise Invalid.field("hybridWeights", 'must be an object {"semantic": number, "keyword": number}')
    refuse_unknown(value, ("semantic", "keyword"), "is not a weight; use semantic, keyword", prefix="hybridWeights.")
    for name in ("semantic", "keyword"):
        if value.get(name) is None:
            raise Invalid.field(f"hybridWeights.{name}", "is required (a number, 0 for none)")
    weights = tuple(number_field(value[name], f"hybridWeights.{name}", limits.HYBRID_WEIGHT)
                    for name in ("semantic", "keyword"))
    if sum(weights) == 0:
        raise Invalid.field("hybridWeights", "needs a weight above 0")
    return weights[0] / sum(weights), weights[1] / sum(weights)


def parse_filters(value, expression=None) -> SearchFilters:
    """The `filters` shorthand and the `filter` expression; both apply when both are given."""
    parsed = parse_filter(expression) if expression is not None else None
    if value is None:
        return SearchFilters(expression=parsed)
    if not isinstance(value, dict):
        raise Invalid.field("filters", "must be an object")
    refuse_unknown(value, FILTER_FIELDS, f"is not a filter; use {', '.join(FILTER_FIELDS)}", prefix="filters.")
    metadata = value.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise Invalid.field("filters.metadata", "must be an object of attribute values")
    return SearchFilters(
        filename=(string_field(value, "filename", required=True, max_length=limits.FILTER_FILENAME_MAX_CHARS)
                  if value.get("filename") is not None else None),
        tags=tuple(string_list(value["tags"], "filters.tags")) if value.get("tags") is not None else (),
        document_ids=(tuple(string_list(value["documentIds"], "filters.documentIds"))
                      if value.get("documentIds") is not None else ()),
        metadata=metadata or {}, expression=parsed,
        user_id=(string_field(value, "userId", required=True, max_length=limits.ID_MAX_CHARS, label="filters.userId")
                 if value.get("userId") is not None else None))


def parse_fields(value) -> tuple[str, ...]:
    """["content"] (the default: each passage's whole text) or ["summary"]."""
    if value is None:
        return FIELD_CHOICES[0]
    if not isinstance(value, list) or tuple(value) not in FIELD_CHOICES:
        raise Invalid.field("fields", 'must be ["summary"] (a short summary and the chunkId of each passage)'
                                      ' or ["content"] (the whole passage, the default)')
    return tuple(value)


def parse_search_request(kb_ids: list[str], body: dict, *, top_k_default: Optional[int] = None,
                         min_score_default: Optional[float] = None, whole_floats: bool = False,
                         extra_fields: tuple[str, ...] = ()) -> SearchRequest:
    """The defaults are the service's unless a tool's configuration gives its own;
    extra_fields are the caller's own (knowledgeBaseIds, apiKey…), read elsewhere."""
    refuse_unknown_fields(body, SEARCH_FIELDS + extra_fields)
    strategy = choice_field(body, "strategy", STRATEGIES, limits.DEFAULT_STRATEGY)
    debug = parse_debug(body.get("debug"))
    return SearchRequest(
        knowledge_base_ids=tuple(kb_ids),
        query=string_field(body, "query", required=True, max_length=limits.QUERY_MAX_CHARS),
        top_k=int_field(body.get("topK"), "topK", limits.TOP_K, default=top_k_default, whole_floats=whole_floats),
        min_score=number_field(body.get("minScore"), "minScore", limits.MIN_SCORE, default=min_score_default),
        strategy=strategy,
        hybrid_weights=parse_hybrid_weights(body.get("hybridWeights"), strategy),
        filters=parse_filters(body.get("filters"), body.get("filter")),
        max_tokens=int_field(body.get("maxTokens"), "maxTokens", limits.MAX_TOKENS),
        prioritize_by=choice_field(body, "prioritizeBy", PRIORITIES, limits.DEFAULT_PRIORITY),
        debug=debug[0], debug_query_vector=debug[1],
        rerank=bool_field(body, "rerank") if body.get("rerank") is not None else None,  # None: the knowledge base's
        fields=parse_fields(body.get("fields")),
    )


def parse_multi_search_request(body: dict) -> SearchRequest:
    """POST /search's body and each query of POST /search/batch: knowledgeBaseIds beside
    the search fields."""
    kb_ids = body.get("knowledgeBaseIds")
    if not isinstance(kb_ids, list) or not kb_ids:
        raise Invalid.field("knowledgeBaseIds", "must be a non-empty list of knowledge base ids")
    kb_ids = list(dict.fromkeys(string_list(kb_ids, "knowledgeBaseIds")))
    if len(kb_ids) > limits.KNOWLEDGE_BASES_PER_SEARCH:
        raise Invalid.field("knowledgeBaseIds", f"at most {limits.KNOWLEDGE_BASES_PER_SEARCH}"
                                                " knowledge bases per search")
    return parse_search_request(kb_ids, body, extra_fields=("knowledgeBaseIds",))


BATCH_FIELDS = ("queries",)


def parse_batch_request(body: dict) -> list[Union[SearchRequest, Invalid]]:
    """POST /search/batch: {"queries": [each as POST /search takes it, ...]}. A malformed
    envelope raises; a malformed query is its own Invalid, in its place, for its own answer."""
    refuse_unknown(body, BATCH_FIELDS, "is not a batch field; use queries (each query names its knowledgeBaseIds)")
    queries = body.get("queries")
    if not isinstance(queries, list) or not 0 < len(queries) <= limits.BATCH_QUERIES_MAX:
        raise Invalid.field("queries", f"must be a list of 1 to {limits.BATCH_QUERIES_MAX} searches")
    parsed: list[Union[SearchRequest, Invalid]] = []
    for i, query in enumerate(queries):
        try:
            if not isinstance(query, dict):
                raise Invalid.field(f"queries[{i}]", "must be an object {knowledgeBaseIds, query, ...}")
            parsed.append(parse_multi_search_request(query))
        except Invalid as err:
            parsed.append(err)
    return parsed


def parse_debug(value) -> tuple[bool, bool]:
    """`debug`: true, false, or {"queryVector": bool} (debug on, with the query's embedding):
    (debug, with the query vector)."""
    if value is None or isinstance(value, bool):
        return bool(value), False
    if isinstance(value, dict) and set(value) <= {"queryVector"} and isinstance(value.get("queryVector", False), bool):
        return True, value.get("queryVector", False)
    raise Invalid.field("debug", 'must be true, false or {"queryVector": true}')
