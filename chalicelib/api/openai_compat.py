"""OpenAI's vector-store and file routes under /v1, for the openai SDK with base_url set to
{KB_API_URL}/v1 and api_key set to the product's key (it sends Authorization: Bearer). Thin:
the mapping is chalicelib/compat/openai.py; errors are OpenAI's error object."""
import json
from email import policy
from email.parser import BytesParser
from urllib.parse import quote

from chalice import Blueprint, Response

from chalicelib import errors, knowledge_bases as kbs, limits
from chalicelib.api.http import JSON_HEADERS, authenticated, json_body, query_params, status_of
from chalicelib.compat import files, openai as compat, schemas
from chalicelib.documents import service as documents_service
from chalicelib.errors import Invalid, Unsupported
from chalicelib.validate import int_field, refuse_unknown

blueprint = Blueprint(__name__)
PREFIX = "/v1/"
MULTIPART = "multipart/form-data"
# What the SDK's upload_and_poll waits between polls unless told (openai-poll-after-ms):
# a small file is ingested in about a second here.
POLL_AFTER_MS = "500"


def error_response(err: errors.ServiceError) -> Response:
    status = status_of(err)
    headers = dict(JSON_HEADERS)
    if getattr(err, "retry_after", None) is not None:
        headers["Retry-After"] = str(err.retry_after)
    return Response(body=json.dumps(compat.error_body(err, status)), status_code=status, headers=headers)


def answer(data: dict, status: int = 200, headers: dict | None = None) -> Response:
    return Response(body=json.dumps(data, default=str), status_code=status, headers={**JSON_HEADERS, **(headers or {})})


def _authenticated(view):
    return authenticated(blueprint, respond=error_response)(view)


def _body(operation: str) -> dict:
    """The JSON body, its types checked against docs/openapi.yaml's schema of the operation."""
    return schemas.check(operation, json_body(blueprint.current_request))


def _params(allowed: tuple[str, ...]) -> dict:
    params = query_params(blueprint.current_request)
    refuse_unknown(params, allowed, f"is not a parameter here ({', '.join(allowed)})")
    return params


# ---- files ----------------------------------------------------------------------------------

def _file_view(stored: files.StoredFile) -> dict:
    return {"id": stored.id, "object": "file", "bytes": stored.bytes, "created_at": int(stored.created_at.timestamp()),
            "filename": stored.filename, "purpose": stored.purpose, "status": "processed", "expires_at": None,
            "status_details": None}


def _form(request) -> dict:
    """The parts of a multipart/form-data body: {name: (filename or None, content type, bytes)}."""
    raw = request.raw_body or b""
    files.check_size_for_body(len(raw))
    content_type = request.headers.get("content-type") or ""
    message = BytesParser(policy=policy.HTTP).parsebytes(
        b"Content-Type: " + content_type.encode("latin-1", "replace") + b"\r\n\r\n" + raw)
    if not message.is_multipart():
        raise Invalid.field("body", "must be multipart/form-data with a file part and a purpose part")
    parts = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if name:
            parts[name] = (part.get_filename(), part.get_content_type(), part.get_payload(decode=True) or b"")
    return parts


@blueprint.route("/v1/files", methods=["POST"], content_types=[MULTIPART])
@_authenticated
def create_file(principal):
    parts = _form(blueprint.current_request)
    if "file" not in parts:
        raise Invalid.field("file", "is required (a multipart part named file)")
    if parts.get("expires_after") or any(k.startswith("expires_after[") for k in parts):
        raise Invalid.field("expires_after", "files here do not expire; leave expires_after out",
                            code="UNSUPPORTED_PARAMETER")
    filename, content_type, content = parts["file"]
    purpose = parts.get("purpose", (None, None, b""))[2].decode("utf-8", "replace").strip()
    if not purpose:
        raise Invalid.field("purpose", "is required")
    stored = files.create(principal, filename=filename or "file", purpose=purpose, content=content,
                          content_type=content_type)
    return answer(_file_view(stored))


@blueprint.route("/v1/files", methods=["GET"])
@_authenticated
def list_files(principal):
    params = _params(("limit", "after", "order", "purpose"))
    compat.refuse_list_order(params)
    page, more = files.list_files(principal, limit=int_field(params.get("limit"), "limit", limits.OPENAI_LIST_PAGE),
                                  after=params.get("after"), purpose=params.get("purpose") or None)
    return answer(compat.list_page([_file_view(f) for f in page], more))


@blueprint.route("/v1/files/{file_id}", methods=["GET"])
@_authenticated
def get_file(principal, file_id):
    return answer(_file_view(files.get(principal, file_id)))


@blueprint.route("/v1/files/{file_id}", methods=["DELETE"])
@_authenticated
def delete_file(principal, file_id):
    files.delete(principal, file_id)
    return answer({"id": file_id, "object": "file", "deleted": True})


@blueprint.route("/v1/files/{file_id}/content", methods=["GET"])
@_authenticated
def file_content(principal, file_id):
    stored, content = files.content(principal, file_id)
    if len(content) > limits.BODY_MAX_BYTES:
        raise errors.TooLarge(f"file {file_id} has {len(content)} bytes; this API answers at most"
                              f" {limits.BODY_MAX_BYTES}")
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError:
        raise Unsupported(f"file {file_id} is not text; its bytes are not served here") from None
    # Never the uploader's type: served on the console's origin, text/html would be a page of
    # theirs running there. Plain text the browser may not sniff, saved rather than shown.
    return Response(body=text, status_code=200, headers={
        "Content-Type": "text/plain; charset=utf-8", "X-Content-Type-Options": "nosniff",
        "Content-Disposition": f"attachment; filename*=UTF-8''{quote(stored.filename, safe='')}"})


# ---- vector stores --------------------------------------------------------------------------

@blueprint.route("/v1/vector_stores", methods=["POST"])
@_authenticated
def create_vector_store(principal):
    return answer(compat.vector_store_view(compat.create_vector_store(principal, _body("createVectorStore"))))


@blueprint.route("/v1/vector_stores", methods=["GET"])
@_authenticated
def list_vector_stores(principal):
    params = _params(("limit", "after", "before", "order"))
    compat.refuse_list_order(params)
    limit = int_field(params.get("limit"), "limit", limits.OPENAI_LIST_PAGE)
    rows, next_token = kbs.list_knowledge_bases(principal, limit=limit, after=params.get("after"))
    return answer(compat.list_page([compat.vector_store_view(r) for r in rows], next_token is not None))


@blueprint.route("/v1/vector_stores/{vs_id}", methods=["GET"])
@_authenticated
def get_vector_store(principal, vs_id):
    return answer(compat.vector_store_view(kbs.get_knowledge_base(principal, vs_id)))


@blueprint.route("/v1/vector_stores/{vs_id}", methods=["POST"])
@_authenticated
def update_vector_store(principal, vs_id):
    compat.update_vector_store(principal, vs_id, _body("updateVectorStore"))
    return answer(compat.vector_store_view(kbs.get_knowledge_base(principal, vs_id)))


@blueprint.route("/v1/vector_stores/{vs_id}", methods=["DELETE"])
@_authenticated
def delete_vector_store(principal, vs_id):
    kbs.delete_knowledge_base(principal, vs_id)
    return answer({"id": vs_id, "object": "vector_store.deleted", "deleted": True})


@blueprint.route("/v1/vector_stores/{vs_id}/search", methods=["POST"])
@_authenticated
def search_vector_store(principal, vs_id):
    return answer(compat.run_search(principal, vs_id, _body("searchVectorStore")))


# ---- a vector store's files -----------------------------------------------------------------

@blueprint.route("/v1/vector_stores/{vs_id}/files", methods=["POST"])
@_authenticated
def attach_file(principal, vs_id):
    doc = compat.attach_file(principal, vs_id, _body("createVectorStoreFile"))
    return answer(compat.vector_store_file_view(doc), headers={"openai-poll-after-ms": POLL_AFTER_MS})


@blueprint.route("/v1/vector_stores/{vs_id}/files", methods=["GET"])
@_authenticated
def list_vector_store_files(principal, vs_id):
    params = _params(("limit", "after", "before", "order", "filter"))
    compat.refuse_list_order(params)
    return answer(compat.list_files(principal, vs_id, params))


@blueprint.route("/v1/vector_stores/{vs_id}/files/{file_id}", methods=["GET"])
@_authenticated
def get_vector_store_file(principal, vs_id, file_id):
    return answer(compat.vector_store_file_view(compat.find_file(principal, vs_id, file_id)),
                  headers={"openai-poll-after-ms": POLL_AFTER_MS})


@blueprint.route("/v1/vector_stores/{vs_id}/files/{file_id}", methods=["POST"])
@_authenticated
def update_vector_store_file(principal, vs_id, file_id):
    return answer(compat.vector_store_file_view(compat.update_file_attributes(principal, vs_id, file_id, _body("updateVectorStoreFile"))))


@blueprint.route("/v1/vector_stores/{vs_id}/files/{file_id}", methods=["DELETE"])
@_authenticated
def delete_vector_store_file(principal, vs_id, file_id):
    doc = compat.find_file(principal, vs_id, file_id)
    documents_service.delete_document(principal, vs_id, doc["id"])
    return answer({"id": file_id, "object": "vector_store.file.deleted", "deleted": True})
