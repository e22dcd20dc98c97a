"""A search request from its JSON (the HTTP body, the kb_search payload, a tool's
arguments), checked against chalicelib.limits. Errors name the public field."""
from typing import Optional

from chalicelib import limits
from chalicelib.errors import Invalid
from chalicelib.retrieval.model import PRIORITIES, STRATEGIES, SearchRequest
from chalicelib.storage.filters import SearchFilters
from chalicelib.validate import (bool_field, camel_case, choice_field, int_field, number_field,
                                 refuse_unknown, string_field, string_list)

FILTER_FIELDS = ("filename", "tags", "documentIds", "metadata")
SEARCH_FIELDS = ("query", "topK", "minScore", "strategy", "filters", "maxTokens", "prioritizeBy", "debug")


def refuse_unknown_fields(body: dict, allowed: tuple[str, ...]) -> None:
    """A field the search does not know is a 400 naming it (top_k used to be
    accepted and ignored), with the field it was probably meant to be."""
    for name in sorted(set(body) - set(allowed)):
        meant = camel_case(str(name))
        hint = f"; did you mean {meant}?" if meant != name and meant in allowed else ""
        raise Invalid.field(str(name), f"is not a search field{hint} (use {', '.join(allowed)})")


def parse_filters(value) -> SearchFilters:
    if value is None:
        return SearchFilters()
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
        metadata=metadata or {})


def parse_search_request(kb_ids: list[str], body: dict, *, top_k_default: Optional[int] = None,
                         min_score_default: Optional[float] = None, whole_floats: bool = False,
                         extra_fields: tuple[str, ...] = ()) -> SearchRequest:
    """The defaults are the service's unless a tool's configuration gives its own;
    extra_fields are the caller's own (knowledgeBaseIds, apiKey…), read elsewhere."""
    refuse_unknown_fields(body, SEARCH_FIELDS + extra_fields)
    return SearchRequest(
        knowledge_base_ids=tuple(kb_ids),
        query=string_field(body, "query", required=True, max_length=limits.QUERY_MAX_CHARS),
        top_k=int_field(body.get("topK"), "topK", limits.TOP_K, default=top_k_default, whole_floats=whole_floats),
        min_score=number_field(body.get("minScore"), "minScore", limits.MIN_SCORE, default=min_score_default),
        strategy=choice_field(body, "strategy", STRATEGIES, limits.DEFAULT_STRATEGY),
        filters=parse_filters(body.get("filters")),
        max_tokens=int_field(body.get("maxTokens"), "maxTokens", limits.MAX_TOKENS),
        prioritize_by=choice_field(body, "prioritizeBy", PRIORITIES, limits.DEFAULT_PRIORITY),
        debug=bool_field(body, "debug"),
    )
