"""Search routes: one knowledge base, several at once, and the bare list that
existing agent workers expect."""
from chalice import Blueprint, Response

from chalicelib import limits
from chalicelib.api.http import JSON_HEADERS, authenticated, json_body, ok, query_params
from chalicelib.api.views import bare_view, batch_view, chunk_view, search_view
from chalicelib.errors import Invalid
from chalicelib.retrieval import (SearchRequest, parse_multi_search_request, parse_search_request, results_cache,
                                  search)
from chalicelib.retrieval.batch import search_batch
from chalicelib.retrieval.chunks import read_chunk
from chalicelib.retrieval.request import parse_batch_request
from chalicelib.retrieval.readable import readable_kb_ids, search_readable
from chalicelib.validate import int_field, refuse_unknown, string_list

blueprint = Blueprint(__name__)


def _one_request(request, kb_id: str) -> SearchRequest:
    return parse_search_request([kb_id], json_body(request))


def _many_request(request) -> SearchRequest:
    return parse_multi_search_request(json_body(request))


@blueprint.route("/knowledge-bases/{kb_id}/search", methods=["POST"])
@authenticated(blueprint, reads=lambda caller, request, params: results_cache.keys_to_read(
    caller, _one_request(request, params["kb_id"])))
def search_one(principal, kb_id):
    return ok(search_view(search(principal, _one_request(blueprint.current_request, kb_id))))


@blueprint.route("/search", methods=["POST"])
@authenticated(blueprint, reads=lambda caller, request, _: results_cache.keys_to_read(caller, _many_request(request)))
def search_many(principal):
    return ok(search_view(search(principal, _many_request(blueprint.current_request))))


@blueprint.route("/search/batch", methods=["POST"])
@authenticated(blueprint)
def search_batch_route(principal):
    """Up to limits.BATCH_QUERIES_MAX searches, each as POST /search takes it; a bad one
    is an error in its place, not a failed batch."""
    body = json_body(blueprint.current_request)
    return ok(batch_view(search_batch(principal, parse_batch_request(body))))


@blueprint.route("/knowledge-bases/{kb_id}/chunks/{chunk_id}", methods=["GET"])
@authenticated(blueprint)
def get_chunk(principal, kb_id, chunk_id):
    """Seed 003's lazy loading: the whole text of a passage a search answered in summary."""
    return ok(chunk_view(read_chunk(principal, kb_id, chunk_id)))


@blueprint.route("/knowledge-bases/{kb_id}/query", methods=["GET"])
@authenticated(blueprint)
def query_bare(principal, kb_id):
    """The bare answer existing agent workers expect: [{"text", "metadata": {"source", "page"}}]."""
    params = query_params(blueprint.current_request)
    if not (params.get("q") or "").strip():
        raise Invalid.field("q", "is required")
    body = {"query": params.get("q"), "topK": int_field(params.get("top_k"), "top_k", limits.TOP_K)}
    answer = search(principal, parse_search_request([kb_id], body))
    return Response(body=bare_view(answer.passages), status_code=200, headers=JSON_HEADERS)


WORKER_PARAMETERS = {"q", "top_k", "kb"}


@blueprint.route("/knowledge-base/query", methods=["GET"])
@authenticated(blueprint)
def query_readable(principal):
    """Seed 002's worker: GET /api/knowledge-base/query/?q=&top_k= (the `api` stage on AWS;
    API Gateway takes the trailing slash), the bare [{"text", "metadata": {"source", "page"}}]
    over every knowledge base the key's user may read in its organisation, or those named
    by kb= (repeated or comma-separated; any it may see)."""
    request = blueprint.current_request
    params = query_params(request)
    refuse_unknown(params, WORKER_PARAMETERS, "is not a parameter; use q, top_k and kb")
    if not (params.get("q") or "").strip():
        raise Invalid.field("q", "is required")
    named = [k.strip() for v in _all_values(request, "kb") for k in v.split(",") if k.strip()]
    body = {"query": params.get("q"), "topK": int_field(params.get("top_k"), "top_k", limits.TOP_K)}
    if named:
        kb_ids = list(dict.fromkeys(string_list(named, "kb")))
        if len(kb_ids) > limits.KNOWLEDGE_BASES_PER_SEARCH:
            raise Invalid.field("kb", f"at most {limits.KNOWLEDGE_BASES_PER_SEARCH} knowledge bases per query")
        passages = search(principal, parse_search_request(kb_ids, body)).passages
    else:
        groups = readable_kb_ids(principal)
        request_ = parse_search_request(["-"], body)  # checked before the knowledge bases are known
        passages = search_readable(principal, request_, groups) if groups else []
    return Response(body=bare_view(passages), status_code=200, headers=JSON_HEADERS)


def _all_values(request, name: str) -> list[str]:
    """Every value of a repeated query parameter (Chalice keeps them in a MultiDict)."""
    params = request.query_params
    if params is None or name not in params:
        return []
    return list(params.getlist(name)) if hasattr(params, "getlist") else [params[name]]
