"""OpenAI's vector-store API on the product's knowledge bases: a vector store is a knowledge
base (the same kb_ id), a file attached to one is a document at the path {fileId}/{filename}
(files.py holds the file until then), its attributes are the document's metadata, and a
search is the product's search with OpenAI's filters, result count and score threshold
mapped onto it. Answers are OpenAI's objects; errors are OpenAI's error object
(error_body), with the statuses the openai SDK turns into its own exception classes."""
import json
from dataclasses import replace
from typing import Any, Optional

from chalicelib import errors, knowledge_bases as kbs, limits
from chalicelib.auth import Principal
from chalicelib.auth.access import kb_to_write
from chalicelib.aws import client
from chalicelib.compat import files
from chalicelib.config import load_settings
from chalicelib.documents import service as documents_service
from chalicelib.documents.listing import DocumentQuery
from chalicelib.documents.uploads import UploadRequest, clean_path, upload
from chalicelib.errors import Invalid, NotFound
from chalicelib.ingestion.objects import SIDECAR_SUFFIX, document_key
from chalicelib.retrieval import SearchRequest, SearchResult, search
from chalicelib.retrieval.request import parse_filter
from chalicelib.storage import connection
from chalicelib.storage.document_status import DocumentStatus
from chalicelib.validate import int_field, number_field, refuse_unknown, string_field

# OpenAI's comparison and compound filter types, and the product's (Bedrock's) operators.
COMPARISONS = {"eq": "equals", "ne": "notEquals", "gt": "greaterThan", "gte": "greaterThanOrEquals",
               "lt": "lessThan", "lte": "lessThanOrEquals", "in": "in", "nin": "notIn"}
COMPOUNDS = {"and": "andAll", "or": "orAll"}
# ranker: "auto" is the product's search as the knowledge base is set to (hybrid, reranked when
# its search.rerank says), "none" never reranks, OpenAI's named ranker asks for the product's
# reranker (retrieval/rerank.py).
RANKERS = {"auto": None, "none": False, "default-2024-11-15": True}
# A document's status, as a vector store file's.
STATUSES = {DocumentStatus.PENDING: "in_progress", DocumentStatus.PROCESSING: "in_progress",
            DocumentStatus.PROCESSED: "completed", DocumentStatus.FAILED: "failed"}
FILE_FILTERS = ("in_progress", "completed", "failed", "cancelled")
# The product's error codes of a failed document, as OpenAI's last_error codes.
_INVALID_FILE = {"CORRUPT_FILE", "ENCRYPTED", "NO_TEXT", "TOO_MANY_PAGES", "FILE_TOO_LARGE",
                 "UNCOMPRESSED_TOO_LARGE", "INVALID_METADATA", "TOO_MANY_SECTIONS", "TOO_MANY_CHUNKS"}
VECTOR_STORE_FIELDS = ("name", "description", "file_ids", "chunking_strategy", "metadata", "expires_after")
SEARCH_FIELDS = ("query", "filters", "max_num_results", "ranking_options", "rewrite_query")
UNSUPPORTED = {
    "expires_after": "vector stores here do not expire; leave expires_after out",
    "metadata": "vector stores here hold no metadata; leave it out or empty (a file's attributes are supported)",
}


# ---- errors ---------------------------------------------------------------------------------

_TYPES = {401: "authentication_error", 403: "permission_error", 404: "invalid_request_error",
          429: "rate_limit_error"}


def error_body(err: errors.ServiceError, status: int) -> dict:
    """OpenAI's error object: {"error": {"message", "type", "param", "code"}}; param is the
    field an Invalid names (its message starts "field: why")."""
    param = None
    if isinstance(err, Invalid) and ": " in err.message:
        head = err.message.split(": ", 1)[0]
        param = head if " " not in head else None
    kind = _TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    code = "invalid_api_key" if status == 401 else err.code.lower()
    return {"error": {"message": err.message, "type": kind, "param": param, "code": code}}


# ---- values -------------------------------------------------------------------------------

def _unix(value) -> Optional[int]:
    return int(value.timestamp()) if value is not None else None


def check_attributes(value: Any, field: str = "attributes") -> dict:
    """OpenAI's attributes: up to 16 keys of 64 characters, values strings of 512, numbers or booleans."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise Invalid.field(field, "must be an object of key-value pairs")
    if len(value) > limits.OPENAI_ATTRIBUTES_MAX:
        raise Invalid.field(field, f"must hold at most {limits.OPENAI_ATTRIBUTES_MAX} keys")
    for key, item in value.items():
        if not isinstance(key, str) or not 0 < len(key) <= limits.OPENAI_ATTRIBUTE_KEY_MAX_CHARS:
            raise Invalid.field(field, f"keys must be strings of 1 to {limits.OPENAI_ATTRIBUTE_KEY_MAX_CHARS}"
                                       " characters")
        if isinstance(item, str):
            if len(item) > limits.OPENAI_ATTRIBUTE_VALUE_MAX_CHARS:
                raise Invalid.field(f"{field}.{key}", f"must be at most {limits.OPENAI_ATTRIBUTE_VALUE_MAX_CHARS}"
                                                      " characters")
        elif not isinstance(item, (int, float, bool)):
            raise Invalid.field(f"{field}.{key}", "must be a string, number or boolean")
    return value


def _check_chunking(value: Any, kb: Optional[dict], field: str = "chunking_strategy") -> Optional[tuple[int, int]]:
    """{"type": "auto"} or {"type": "static", "static": {max_chunk_size_tokens, chunk_overlap_tokens}}:
    (tokens, overlap) of a static one. A knowledge base's chunking is fixed at its creation, so a
    file's static strategy must be the store's own."""
    if value is None:
        return None
    if not isinstance(value, dict) or value.get("type") not in ("auto", "static"):
        raise Invalid.field(field, 'must be {"type": "auto"} or {"type": "static", "static": {...}}')
    if value["type"] == "auto":
        refuse_unknown(value, ("type",), "is not a field of the auto strategy", prefix=f"{field}.")
        return None
    refuse_unknown(value, ("type", "static"), "is not a field of the static strategy", prefix=f"{field}.")
    static = value.get("static")
    if not isinstance(static, dict) or set(static) != {"max_chunk_size_tokens", "chunk_overlap_tokens"}:
        raise Invalid.field(f"{field}.static", "must be {max_chunk_size_tokens, chunk_overlap_tokens}")
    tokens, overlap = static["max_chunk_size_tokens"], static["chunk_overlap_tokens"]
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (tokens, overlap)):
        raise Invalid.field(f"{field}.static", "takes whole numbers of tokens")
    if kb is not None and (tokens, overlap) != (kb["chunk_tokens"], kb["chunk_overlap"]):
        raise Invalid.field(field, f"a vector store's chunking is fixed when it is created: this one cuts"
                                   f" {kb['chunk_tokens']} tokens with {kb['chunk_overlap']} of overlap;"
                                   " leave chunking_strategy out or give the store's own")
    return tokens, overlap


# ---- filters ------------------------------------------------------------------------------

def translate_filter(node: Any, where: str = "filters") -> dict:
    """OpenAI's ComparisonFilter/CompoundFilter as the product's RetrievalFilter (Bedrock's grammar):
    {"type": "eq", "key": "team", "value": "x"} -> {"equals": {"key": "team", "value": "x"}};
    {"type": "and", "filters": [...]} -> {"andAll": [...]} (a compound of one is that one)."""
    if not isinstance(node, dict) or not isinstance(node.get("type"), str):
        raise Invalid.field(where, "must be a filter object with a type (eq, ne, gt, gte, lt, lte, in, nin,"
                                   " and, or)", code="INVALID_FILTER")
    kind = node["type"]
    if kind in COMPOUNDS:
        refuse_unknown(node, ("type", "filters"), "is not a field of a compound filter", prefix=f"{where}.")
        members = node.get("filters")
        if not isinstance(members, list) or not members:
            raise Invalid.field(f"{where}.filters", "must be a non-empty list of filters", code="INVALID_FILTER")
        translated = [translate_filter(m, f"{where}.filters[{i}]") for i, m in enumerate(members)]
        return translated[0] if len(translated) == 1 else {COMPOUNDS[kind]: translated}
    if kind not in COMPARISONS:
        raise Invalid.field(f"{where}.type", f"{kind!r} is not a filter type; use one of"
                                             f" {', '.join(list(COMPARISONS) + list(COMPOUNDS))}", code="INVALID_FILTER")
    refuse_unknown(node, ("type", "key", "value"), "is not a field of a comparison filter", prefix=f"{where}.")
    key, value = node.get("key"), node.get("value")
    if not isinstance(key, str) or not 0 < len(key) <= limits.FILTER_KEY_MAX_CHARS:
        raise Invalid.field(f"{where}.key", f"must be a string of 1 to {limits.FILTER_KEY_MAX_CHARS} characters",
                            code="INVALID_FILTER")
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind in ("gt", "gte", "lt", "lte") and not number:
        raise Invalid.field(f"{where}.value", f"must be a number for {kind}", code="INVALID_FILTER")
    if kind in ("in", "nin") and not (isinstance(value, list) and value and all(
            isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value)):
        raise Invalid.field(f"{where}.value", f"must be a non-empty list of strings or numbers for {kind}",
                            code="INVALID_FILTER")
    if kind in ("eq", "ne") and not isinstance(value, (str, int, float, bool)):
        raise Invalid.field(f"{where}.value", f"must be a string, number or boolean for {kind}", code="INVALID_FILTER")
    return {COMPARISONS[kind]: {"key": key, "value": value}}


# ---- search -------------------------------------------------------------------------------

def _queries(value: Any) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if (not isinstance(value, list) or not value or len(value) > limits.OPENAI_QUERIES_MAX
            or not all(isinstance(q, str) and q.strip() for q in value)):
        raise Invalid.field("query", f"must be a non-empty string or a list of 1 to {limits.OPENAI_QUERIES_MAX}"
                                     " non-empty strings")
    if sum(len(q) for q in value) > limits.QUERY_MAX_CHARS:
        raise Invalid.field("query", f"must be at most {limits.QUERY_MAX_CHARS} characters in all")
    return [q.strip() for q in value]


def search_request(kb_id: str, body: dict) -> tuple[SearchRequest, list[str], bool, float]:
    """(the product's search, the queries as asked, whether to rewrite the query first, the
    score_threshold: OpenAI's, on the `score` each result shows, search_page applies it)."""
    refuse_unknown(body, SEARCH_FIELDS, f"is not a search field (use {', '.join(SEARCH_FIELDS)})")
    queries = _queries(body.get("query"))
    ranking = body.get("ranking_options") or {}
    if not isinstance(ranking, dict):
        raise Invalid.field("ranking_options", "must be an object {ranker, score_threshold}")
    refuse_unknown(ranking, ("ranker", "score_threshold"), "is not a ranking option (ranker, score_threshold)",
                   prefix="ranking_options.")
    ranker = ranking.get("ranker", "auto")
    if ranker not in RANKERS:
        raise Invalid.field("ranking_options.ranker", f"must be one of {', '.join(RANKERS)}")
    rewrite = body.get("rewrite_query", False)
    if not isinstance(rewrite, bool):
        raise Invalid.field("rewrite_query", "must be true or false")
    expression = parse_filter(translate_filter(body["filters"]), "filters") if body.get("filters") is not None else None
    request = SearchRequest(
        knowledge_base_ids=(kb_id,), query=" ".join(queries),
        top_k=int_field(body.get("max_num_results"), "max_num_results", limits.OPENAI_SEARCH_RESULTS),
        max_tokens=limits.COMPAT_MAX_TOKENS, rerank=RANKERS[ranker])
    if expression is not None:
        request = replace(request, filters=replace(request.filters, expression=expression))
    threshold = number_field(ranking.get("score_threshold"), "ranking_options.score_threshold", limits.MIN_SCORE)
    return request, queries, rewrite, threshold


REWRITE_PROMPT = ("Rewrite the user's search query for a document search engine: keep its meaning, drop"
                  " filler words, expand abbreviations you are sure of. Answer JSON: {\"query\": \"...\"}.")


def rewrite_query(query: str, model=None) -> str:
    """The query rewritten by the deployment's chat model; without one, a 400 naming rewrite_query."""
    from chalicelib.llm import NOT_CONFIGURED, Message, chat_model

    try:
        model = model or chat_model()
    except errors.Unavailable as err:
        if err.code == NOT_CONFIGURED:
            raise Invalid.field("rewrite_query", "needs a language model and none is configured here"
                                                 " (LLM_PROVIDER, LLM_MODEL); search with rewrite_query false",
                                code="REWRITE_NOT_AVAILABLE") from None
        raise
    answer = model.complete(REWRITE_PROMPT, [Message("user", query)])
    try:
        rewritten = json.loads(answer).get("query")
    except (ValueError, AttributeError):
        rewritten = None
    if not isinstance(rewritten, str) or not rewritten.strip():
        raise errors.BadUpstream("the language model did not answer a rewritten query")
    return rewritten.strip()[:limits.QUERY_MAX_CHARS]


def file_id_of(path: Optional[str], document_id: str) -> str:
    """A document's file id: the file_ segment its path starts with when it came through /v1/files,
    else its own id (a document uploaded through the product's API, or a text entry)."""
    head = (path or "").split("/", 1)[0]
    return head if files.is_file_id(head) and "/" in (path or "") else document_id


def _score(passage) -> float:
    """The score the results are ordered by, as OpenAI's are: the reranker's relevance when it
    ranked, else the search's (hybrid's fused score by default, 1.0 first in every list that
    found something); score_threshold applies to it."""
    if passage.rerank_score is not None:
        return passage.rerank_score
    return passage.similarity


def _attributes(passage) -> dict:
    """The document's attributes; with, when other files hold the same text or nearly, their
    file ids in also_in (comma-separated: an attribute is a string of up to 512 characters, a
    number or a boolean; as many as fit)."""
    attributes = dict(passage.metadata or {})
    ids: list[str] = []
    for also in passage.also_in:
        file_id = file_id_of(also.path, also.document_id)
        if len(",".join([*ids, file_id])) > limits.OPENAI_ATTRIBUTE_VALUE_MAX_CHARS:
            break
        ids.append(file_id)
    if ids:
        attributes["also_in"] = ",".join(ids)
    return attributes


def search_page(result: SearchResult, queries: list[str], threshold: float = 0.0) -> dict:
    return {
        "object": "vector_store.search_results.page", "search_query": queries,
        "data": [{"file_id": file_id_of(p.path, p.document_id), "filename": p.source,
                  "score": _score(p),
                  "attributes": _attributes(p), "content": [{"type": "text", "text": p.content}]}
                 for p in result.passages if _score(p) >= threshold],
        "has_more": False, "next_page": None,
    }


def run_search(principal: Principal, kb_id: str, body: dict) -> dict:
    request, queries, rewrite, threshold = search_request(kb_id, body)
    if rewrite:
        queries = [rewrite_query(request.query)]
        request = replace(request, query=queries[0])
    return search_page(search(principal, request), queries, threshold)


# ---- vector stores ------------------------------------------------------------------------

def vector_store_view(row: dict) -> dict:
    stats = row.get("stats") or {}
    by_status = stats.get("byStatus") or {}
    in_progress = by_status.get("PENDING", 0) + by_status.get("PROCESSING", 0)
    counts = {"in_progress": in_progress, "completed": by_status.get("PROCESSED", 0),
              "failed": by_status.get("FAILED", 0), "cancelled": 0, "total": stats.get("documentCount", 0)}
    return {"id": row["id"], "object": "vector_store", "name": row["name"], "description": row["description"],
            "created_at": _unix(row["created_at"]), "last_active_at": _unix(row["updated_at"]),
            "usage_bytes": 0, "file_counts": counts, "status": "in_progress" if in_progress else "completed",
            "metadata": {}, "expires_after": None, "expires_at": None}


def _refuse_unsupported(body: dict) -> None:
    for name, why in UNSUPPORTED.items():
        if body.get(name):
            raise Invalid.field(name, why, code="UNSUPPORTED_PARAMETER")


def create_vector_store(principal: Principal, body: dict) -> dict:
    refuse_unknown(body, VECTOR_STORE_FIELDS, f"is not a field of a vector store ({', '.join(VECTOR_STORE_FIELDS)})")
    _refuse_unsupported(body)
    file_ids = body.get("file_ids") or []
    if not isinstance(file_ids, list) or not all(isinstance(f, str) for f in file_ids):
        raise Invalid.field("file_ids", "must be a list of file ids")
    for file_id in file_ids:  # before anything is created
        files.get(principal, file_id)
    chunking = _check_chunking(body.get("chunking_strategy"), None)
    kb = kbs.create_knowledge_base(
        principal, name=string_field(body, "name", required=False, max_length=limits.NAME_MAX_CHARS)
        or "vector store", description=string_field(body, "description", required=False,
                                                     max_length=limits.DESCRIPTION_MAX_CHARS),
        chunking={"chunkTokens": chunking[0], "chunkOverlap": chunking[1]} if chunking else None)
    for file_id in file_ids:
        attach_file(principal, kb["id"], {"file_id": file_id})
    return kbs.get_knowledge_base(principal, kb["id"])


def update_vector_store(principal: Principal, kb_id: str, body: dict) -> dict:
    refuse_unknown(body, ("name", "metadata", "expires_after"), "is not a field a vector store update takes"
                                                                " (name)")
    _refuse_unsupported(body)
    changes = {}
    if body.get("name") is not None:
        changes["name"] = string_field(body, "name", required=True, max_length=limits.NAME_MAX_CHARS)
    if not changes:
        return kbs.get_knowledge_base(principal, kb_id)
    return kbs.update_knowledge_base(principal, kb_id, changes)


# ---- vector store files -------------------------------------------------------------------

def vector_store_file_view(row: dict) -> dict:
    status = STATUSES.get(row["status"], "in_progress")
    error = None
    if status == "failed":
        code = row.get("error_code") or ""
        kind = ("unsupported_file" if code == "UNSUPPORTED_TYPE" else "invalid_file" if code in _INVALID_FILE
                else "server_error")
        error = {"code": kind, "message": f"{code}: {row.get('error_message') or ''}".strip(": ")}
    return {"id": file_id_of(row["path"], row["id"]), "object": "vector_store.file", "vector_store_id": row["kb_id"],
            "created_at": _unix(row["created_at"]), "usage_bytes": row["size_bytes"] or 0, "status": status,
            "last_error": error, "attributes": row["metadata"] or {}, "chunking_strategy": None}


def find_file(principal: Principal, kb_id: str, file_id: str) -> dict:
    """The document a vector store holds for a file id (file_…, or a document's own doc_… id)."""
    if file_id.startswith("doc_"):
        return documents_service.get_document(principal, kb_id, file_id)
    if not files.is_file_id(file_id):
        raise NotFound.thing("file", file_id)
    rows, _ = documents_service.list_documents(principal, kb_id, DocumentQuery(limit=1, prefix=f"{file_id}/"))
    if not rows:
        raise NotFound(f"file {file_id} is not in vector store {kb_id}")
    return rows[0]


def attach_file(principal: Principal, kb_id: str, body: dict) -> dict:
    """The file's bytes copied into the knowledge base at {fileId}/{filename}: the S3 trigger
    ingests them as any upload. Attaching the same file again keeps one document."""
    refuse_unknown(body, ("file_id", "attributes", "chunking_strategy"),
                   "is not a field of a vector store file (file_id, attributes, chunking_strategy)")
    file_id = string_field(body, "file_id", required=True, max_length=limits.ID_MAX_CHARS)
    attributes = check_attributes(body.get("attributes"))
    kb = kbs.get_knowledge_base(principal, kb_id)
    _check_chunking(body.get("chunking_strategy"), kb)
    stored = files.get(principal, file_id)
    path = clean_path(f"{file_id}/{stored.filename}", "file_id")
    content_type = stored.content_type if stored.content_type not in ("", "application/octet-stream") else None
    registered = upload(principal, kb_id, UploadRequest(path=path, content_type=content_type, size=stored.bytes,
                                                        metadata=attributes))
    settings = load_settings()
    if registered.put is not None:
        # REPLACE: the staged object's own metadata (its name, purpose) is not the document's.
        client("s3").copy_object(Bucket=settings.bucket, Key=document_key(kb_id, path),
                                 CopySource={"Bucket": settings.bucket, "Key": files.source_key(principal, file_id)},
                                 MetadataDirective="REPLACE", ContentType=registered.put.content_type)
    return registered.document


def update_file_attributes(principal: Principal, kb_id: str, file_id: str, body: dict) -> dict:
    """New attributes: a new metadata sidecar, which re-runs the document's ingestion without
    embedding it again (documents/trigger.py)."""
    refuse_unknown(body, ("attributes",), "is not a field a vector store file update takes (attributes)")
    attributes = check_attributes(body.get("attributes"))
    doc = find_file(principal, kb_id, file_id)
    if doc["kind"] != "file":
        raise Invalid.field("file_id", "is a text entry; its metadata is set when it is written", code="NOT_A_FILE")
    with connection() as conn:
        kb_to_write(conn, principal, kb_id, "change a file's attributes")
    client("s3").put_object(Bucket=load_settings().bucket, Key=doc["s3_key"] + SIDECAR_SUFFIX,
                            ContentType="application/json",
                            Body=json.dumps({"metadataAttributes": attributes}).encode())
    return {**doc, "metadata": attributes, "status": "PENDING"}


def list_files(principal: Principal, kb_id: str, params: dict) -> dict:
    """A page of the store's files by path (file id order for files of /v1/files), after the
    file id the previous page ended with."""
    limit = int_field(params.get("limit"), "limit", limits.OPENAI_LIST_PAGE)
    wanted = params.get("filter")
    if wanted is not None and wanted not in FILE_FILTERS:
        raise Invalid.field("filter", f"must be one of {', '.join(FILE_FILTERS)}")
    after = (find_file(principal, kb_id, params["after"])["s3_key"],) if params.get("after") else None
    if wanted == "cancelled":  # nothing is ever cancelled here
        return _list_page([], False)
    status = {"completed": DocumentStatus.PROCESSED, "failed": DocumentStatus.FAILED}.get(wanted)
    rows, more = [], True
    while more and len(rows) <= limit:
        page, token = documents_service.list_documents(
            principal, kb_id, DocumentQuery(limit=limit + 1, status=status, after=after))
        if wanted == "in_progress":
            rows += [r for r in page if STATUSES[r["status"]] == "in_progress"]
        else:
            rows += page
        more = token is not None or len(page) > limit
        after = (page[-1]["s3_key"],) if page else after
        if wanted != "in_progress":
            break
    return _list_page([vector_store_file_view(r) for r in rows[:limit]], len(rows) > limit)


def _list_page(data: list[dict], has_more: bool) -> dict:
    return {"object": "list", "data": data, "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None, "has_more": has_more}


def list_page(data: list[dict], has_more: bool) -> dict:
    return _list_page(data, has_more)


def refuse_list_order(params: dict) -> None:
    """Lists here are paged forward in one order (ids, or paths for a store's files)."""
    if params.get("before"):
        raise Invalid.field("before", "is not supported: lists here are paged forward with after",
                            code="UNSUPPORTED_PARAMETER")
    if params.get("order") not in (None, "asc"):
        raise Invalid.field("order", "only asc is supported: lists here come in one order (by id; a vector"
                                     " store's files by path)", code="UNSUPPORTED_PARAMETER")
