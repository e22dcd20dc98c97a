"""Routes for a knowledge base's documents and text entries."""
from chalice import Blueprint

from chalicelib import entries
from chalicelib.api.http import (ApiError, authenticated, int_field, invalid, json_body, not_found,
                                 ok, query_params, string_field)
from chalicelib.knowledge_bases import documents

blueprint = Blueprint(__name__)


def _metadata(body: dict) -> dict:
    value = body.get("metadata") or {}
    if not isinstance(value, dict):
        raise invalid("metadata", "must be an object of attribute values")
    for name, item in value.items():
        if not isinstance(name, str) or not name or len(name) > 100:
            raise invalid("metadata", "attribute names must be strings of 1 to 100 characters")
        scalar = isinstance(item, (str, int, float, bool))
        if not (scalar or (isinstance(item, list) and all(isinstance(v, str) for v in item))):
            raise invalid(f"metadata.{name}", "must be a string, number, boolean or list of strings")
    return value


@blueprint.route("/knowledge-bases/{kb_id}/documents", methods=["POST"])
@authenticated(blueprint)
def upload_document(principal, kb_id):
    body = json_body(blueprint.current_request)
    content = body.get("content")
    if content is not None and not isinstance(content, str):
        raise invalid("content", "must be a base64 string")
    size = body.get("size")
    if size is not None and (isinstance(size, bool) or not isinstance(size, int)):
        raise invalid("size", "must be an integer number of bytes")
    request = documents.UploadRequest(
        filename=string_field(body, "filename", required=True, max_length=1000),
        content_type=string_field(body, "contentType", required=False, max_length=200) or None,
        size=size, metadata=_metadata(body), content_base64=content)
    try:
        answer = documents.upload(principal, kb_id, request)
    except documents.UploadRejected as err:
        raise ApiError(err.status, err.code, err.message) from None
    if answer is None:
        raise not_found("knowledge base", kb_id)
    return ok(answer, status=201 if content is None else 202)


@blueprint.route("/knowledge-bases/{kb_id}/documents/{doc_id}", methods=["GET"])
@authenticated(blueprint)
def get_document(principal, kb_id, doc_id):
    doc = documents.get_document(principal, kb_id, doc_id)
    if doc is None:
        raise not_found("document", doc_id)
    return ok(doc)


@blueprint.route("/knowledge-bases/{kb_id}/documents/{doc_id}", methods=["DELETE"])
@authenticated(blueprint)
def delete_document(principal, kb_id, doc_id):
    if not documents.delete_document(principal, kb_id, doc_id):
        raise not_found("document", doc_id)
    return ok({"id": doc_id, "deleted": True})


@blueprint.route("/knowledge-bases/{kb_id}/documents/{doc_id}/reindex", methods=["POST"])
@authenticated(blueprint)
def reindex_document(principal, kb_id, doc_id):
    try:
        doc = documents.reindex_document(principal, kb_id, doc_id)
    except documents.UploadRejected as err:
        raise ApiError(err.status, err.code, err.message) from None
    if doc is None:
        raise not_found("document", doc_id)
    return ok(doc, status=202)


@blueprint.route("/knowledge-bases/{kb_id}/entries", methods=["POST"])
@authenticated(blueprint)
def create_entry(principal, kb_id):
    body = json_body(blueprint.current_request)
    entry = entries.create_entry(
        principal, kb_id, title=string_field(body, "title", required=True, max_length=500),
        content=string_field(body, "content", required=True, max_length=200_000),
        metadata=_metadata(body))
    if entry is None:
        raise not_found("knowledge base", kb_id)
    return ok(entry, status=201)


@blueprint.route("/knowledge-search", methods=["GET"])
@authenticated(blueprint)
def knowledge_search(principal):
    params = query_params(blueprint.current_request)
    query = (params.get("q") or "").strip()
    if not query:
        raise invalid("q", "is required")
    if len(query) > 2000:
        raise invalid("q", "must be at most 2000 characters")
    max_results = int_field(params.get("max_results"), "max_results", low=1, high=20, default=5)
    return ok(entries.search_entries(principal, query, max_results))
