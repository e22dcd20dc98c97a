"""Search routes: one knowledge base, several at once, and the bare list that
existing agent workers expect."""
from chalice import Blueprint, Response

from chalicelib.api.http import (authenticated, int_field, invalid, json_body, not_found,
                                 ok, query_params, refuse_unknown, string_field)
from chalicelib.retrieval import PRIORITIES, STRATEGIES, KnowledgeBaseNotFound, SearchRequest, search

blueprint = Blueprint(__name__)
FILTER_FIELDS = ("filename", "tags", "documentIds", "metadata")


def _number(value, name: str, low: float, high: float, default: float) -> float:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise invalid(name, "must be a number")
    if not low <= value <= high:
        raise invalid(name, f"must be between {low:g} and {high:g}")
    return float(value)


def _choice(body: dict, name: str, options: tuple, default: str) -> str:
    value = body.get(name, default)
    if value not in options:
        raise invalid(name, f"must be one of {', '.join(options)}")
    return value


def _string_list(value, name: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value) or len(value) > 100:
        raise invalid(name, "must be a list of up to 100 non-empty strings")
    return value


def parse_filters(value) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise invalid("filters", "must be an object")
    refuse_unknown(value, FILTER_FIELDS, f"is not a filter; use {', '.join(FILTER_FIELDS)}", prefix="filters.")
    filters = {}
    if value.get("filename") is not None:
        filters["filename"] = string_field(value, "filename", required=True, max_length=500)
    for name in ("tags", "documentIds"):
        if value.get(name) is not None:
            filters[name] = _string_list(value[name], f"filters.{name}")
    if value.get("metadata") is not None:
        if not isinstance(value["metadata"], dict):
            raise invalid("filters.metadata", "must be an object of attribute values")
        filters["metadata"] = value["metadata"]
    return filters


def parse_search_request(kb_ids: list[str], body: dict, defaults: dict | None = None) -> SearchRequest:
    defaults = defaults or {}
    return SearchRequest(
        knowledge_base_ids=tuple(kb_ids),
        query=string_field(body, "query", required=True, max_length=2000),
        top_k=int_field(body.get("topK"), "topK", low=1, high=20, default=defaults.get("topK", 5)),
        min_score=_number(body.get("minScore"), "minScore", 0.0, 1.0, defaults.get("minScore", 0.0)),
        strategy=_choice(body, "strategy", STRATEGIES, "hybrid"),
        filters=parse_filters(body.get("filters")),
        max_tokens=int_field(body.get("maxTokens"), "maxTokens", low=50, high=100_000, default=4000),
        prioritize_by=_choice(body, "prioritizeBy", PRIORITIES, "similarity"),
        debug=bool(body.get("debug", False)),
    )


def run_search(principal, request: SearchRequest) -> dict:
    try:
        return search(principal, request)
    except KnowledgeBaseNotFound as missing:
        raise not_found("knowledge base", str(missing)) from None


@blueprint.route("/knowledge-bases/{kb_id}/search", methods=["POST"])
@authenticated(blueprint)
def search_one(principal, kb_id):
    body = json_body(blueprint.current_request)
    return ok(run_search(principal, parse_search_request([kb_id], body)))


@blueprint.route("/search", methods=["POST"])
@authenticated(blueprint)
def search_many(principal):
    body = json_body(blueprint.current_request)
    kb_ids = body.get("knowledgeBaseIds")
    if not isinstance(kb_ids, list) or not kb_ids:
        raise invalid("knowledgeBaseIds", "must be a non-empty list of knowledge base ids")
    kb_ids = list(dict.fromkeys(_string_list(kb_ids, "knowledgeBaseIds")))
    if len(kb_ids) > 20:
        raise invalid("knowledgeBaseIds", "at most 20 knowledge bases per search")
    return ok(run_search(principal, parse_search_request(kb_ids, body)))


@blueprint.route("/knowledge-bases/{kb_id}/query", methods=["GET"])
@authenticated(blueprint)
def query_bare(principal, kb_id):
    """The bare answer existing agent workers expect: [{"text", "metadata": {"source", "page"}}]."""
    params = query_params(blueprint.current_request)
    if not (params.get("q") or "").strip():
        raise invalid("q", "is required")
    body = {"query": params.get("q"),
            "topK": int_field(params.get("top_k"), "top_k", low=1, high=20, default=5)}
    answer = run_search(principal, parse_search_request([kb_id], body))
    bare = [{"text": r["content"], "metadata": {"source": r["source"], "page": r["page"]}}
            for r in answer["results"]]
    return Response(body=bare, status_code=200, headers={"Content-Type": "application/json"})
