"""Routes for a knowledge base's documents and text entries, and the search over
the caller's own entries."""
from chalice import Blueprint

from chalicelib import limits
from chalicelib.api.http import authenticated, json_body, ok, query_params
from chalicelib.api.views import chunk_view, document_view, entry_hit_view, entry_view, sync_view, upload_view
from chalicelib.documents import entries, listing, service, uploads
from chalicelib.documents.entry_text import whole_contents
from chalicelib.auth.access import ENTRY_LEVELS, canonical_level
from chalicelib.errors import Invalid
from chalicelib.ingestion.extract import HEAD_BYTES
from chalicelib.storage.document_status import STATUSES, parse_status
from chalicelib.validate import int_field, refuse_unknown, string_field

blueprint = Blueprint(__name__)
HEAD_BASE64_CHARS = (HEAD_BYTES + 2) // 3 * 4


def _metadata(body: dict) -> dict:
    value = body.get("metadata") or {}
    if not isinstance(value, dict):
        raise Invalid.field("metadata", "must be an object of attribute values")
    for name, item in value.items():
        if not isinstance(name, str) or not name or len(name) > limits.METADATA_NAME_MAX_CHARS:
            raise Invalid.field("metadata", f"attribute names must be strings of 1 to"
                                            f" {limits.METADATA_NAME_MAX_CHARS} characters")
        scalar = isinstance(item, (str, int, float, bool))
        if not (scalar or (isinstance(item, list) and all(isinstance(v, str) for v in item))):
            raise Invalid.field(f"metadata.{name}", "must be a string, number, boolean or list of strings")
    return value


@blueprint.route("/knowledge-bases/{kb_id}/documents", methods=["POST"])
@authenticated(blueprint)
def upload_document(principal, kb_id):
    body = json_body(blueprint.current_request)
    content = body.get("content")
    if content is not None and not isinstance(content, str):
        raise Invalid.field("content", "must be a base64 string")
    size = body.get("size")
    if size is not None and (isinstance(size, bool) or not isinstance(size, int)):
        raise Invalid.field("size", "must be an integer number of bytes")
    url = string_field(body, "url", required=False, max_length=limits.URL_MAX_CHARS) or None
    if url is not None and (content is not None or size is not None or body.get("sha256") is not None):
        raise Invalid.field("url", "the service fetches the URL's bytes: give no content, size or sha256 with it")
    path = string_field(body, "path", required=False, max_length=limits.FILENAME_MAX_CHARS)
    filename = string_field(body, "filename", required=not (path or url), max_length=limits.FILENAME_MAX_CHARS)
    request = uploads.UploadRequest(
        path=path or (uploads.name_as_path(filename) if filename else None), url=url,
        content_type=string_field(body, "contentType", required=False,
                                  max_length=limits.CONTENT_TYPE_MAX_CHARS) or None,
        size=size, metadata=_metadata(body), content_base64=content,
        sha256=string_field(body, "sha256", required=False, max_length=64) or None,
        head_base64=string_field(body, "head", required=False, max_length=HEAD_BASE64_CHARS) or None)
    upload = uploads.upload(principal, kb_id, request)
    if upload.result == uploads.UNCHANGED:
        return ok(upload_view(upload), status=200)
    return ok(upload_view(upload), status=202 if upload.put is None else 201)


@blueprint.route("/knowledge-bases/{kb_id}/documents", methods=["GET"])
@authenticated(blueprint)
def list_documents(principal, kb_id):
    params = query_params(blueprint.current_request)
    refuse_unknown(params, {"limit", "nextToken", "status", "prefix", "path", "sort"},
                   "is not a parameter of the document list")
    status = params.get("status")
    if status is not None:
        status = parse_status(status)
        if status is None:
            raise Invalid.field("status", f"must be one of {', '.join(STATUSES)} (any case; completed is"
                                          " PROCESSED)")
    sort = params.get("sort") or listing.DEFAULT_SORT
    if sort not in listing.SORTS:
        raise Invalid.field("sort", f"must be one of {', '.join(listing.SORTS)}")
    path, prefix = params.get("path"), params.get("prefix")
    query = listing.DocumentQuery(
        limit=int_field(params.get("limit"), "limit", limits.DOCUMENT_PAGE_SIZE), sort=sort, status=status,
        path=uploads.clean_path(path, "path") if path is not None else None,
        prefix=uploads.clean_prefix(prefix) if prefix else None,
        after=listing.decode_token(params.get("nextToken"), kb_id, sort))
    rows, next_token = service.list_documents(principal, kb_id, query)
    return ok({"items": [document_view(r) for r in rows], "nextToken": next_token})


@blueprint.route("/knowledge-bases/{kb_id}/documents/{doc_id}", methods=["GET"])
@authenticated(blueprint)
def get_document(principal, kb_id, doc_id):
    return ok(document_view(service.get_document(principal, kb_id, doc_id)))


@blueprint.route("/knowledge-bases/{kb_id}/documents/{doc_id}/chunks", methods=["GET"])
@authenticated(blueprint)
def list_document_chunks(principal, kb_id, doc_id):
    """The document's chunks in order, a page at a time, each with its offsets in the text."""
    params = query_params(blueprint.current_request)
    refuse_unknown(params, {"limit", "nextToken"}, "is not a parameter of the chunk list")
    page, next_token = service.list_chunks(
        principal, kb_id, doc_id, after=listing.decode_chunk_token(params.get("nextToken"), doc_id),
        limit=int_field(params.get("limit"), "limit", limits.CHUNK_PAGE_SIZE))
    return ok({"items": [chunk_view(c) for c in page], "nextToken": next_token})


@blueprint.route("/knowledge-bases/{kb_id}/documents/{doc_id}", methods=["DELETE"])
@authenticated(blueprint)
def delete_document(principal, kb_id, doc_id):
    service.delete_document(principal, kb_id, doc_id)
    return ok({"id": doc_id, "deleted": True})


@blueprint.route("/knowledge-bases/{kb_id}/documents/{doc_id}/reindex", methods=["POST"])
@authenticated(blueprint)
def reindex_document(principal, kb_id, doc_id):
    return ok(document_view(service.reindex_document(principal, kb_id, doc_id)), status=202)


@blueprint.route("/knowledge-bases/{kb_id}/sync", methods=["POST"])
@authenticated(blueprint)
def sync_documents(principal, kb_id):
    """The bucket compared with the database: objects without a document are started,
    changed ones started again, documents whose object is gone removed."""
    return ok(sync_view(service.sync_documents(principal, kb_id)))


def _level(body: dict) -> str:
    """An entry's level in any case, "organization" and "org" read as organisation."""
    if body.get("level") is None:
        return "individual"
    level = canonical_level(body["level"])
    if level is None:
        raise Invalid.field("level", f"must be one of {', '.join(ENTRY_LEVELS)}")
    return level


@blueprint.route("/knowledge-bases/{kb_id}/entries", methods=["POST"])
@authenticated(blueprint)
def create_entry(principal, kb_id):
    body = json_body(blueprint.current_request)
    entry = entries.create_entry(
        principal, kb_id, title=string_field(body, "title", required=True, max_length=limits.ENTRY_TITLE_MAX_CHARS),
        content=string_field(body, "content", required=True, max_length=limits.ENTRY_CONTENT_MAX_CHARS),
        metadata=_metadata(body), level=_level(body))
    return ok(entry_view(entry), status=201 if entry.created else 200)


@blueprint.route("/knowledge-bases/{kb_id}/entries/{entry_id}", methods=["PATCH"])
@authenticated(blueprint)
def set_entry_level(principal, kb_id, entry_id):
    """Promote or demote an entry: {"level"}."""
    body = json_body(blueprint.current_request)
    refuse_unknown(body, {"level"}, "cannot be changed; an entry's level can (its text is kept as written)")
    if body.get("level") is None:
        raise Invalid.field("level", f"is required: one of {', '.join(ENTRY_LEVELS)}")
    level = _level(body)
    return ok(entry_view(entries.set_entry_level(principal, kb_id, entry_id, level)))


@blueprint.route("/knowledge-search", methods=["GET"])
@authenticated(blueprint)
def knowledge_search(principal):
    params = query_params(blueprint.current_request)
    query = (params.get("q") or "").strip()
    if not query:
        raise Invalid.field("q", "is required")
    if len(query) > limits.QUERY_MAX_CHARS:
        raise Invalid.field("q", f"must be at most {limits.QUERY_MAX_CHARS} characters")
    max_results = int_field(params.get("max_results"), "max_results", limits.ENTRY_SEARCH_RESULTS)
    found = entries.search_entries(principal, query, max_results)
    return ok([entry_hit_view(p) for p in whole_contents(principal, found)])  # seed 001: the whole answer
