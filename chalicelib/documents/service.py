"""Reading, listing, deleting and re-indexing a knowledge base's documents, scoped to
the caller through its knowledge base. Returns storage rows."""
from dataclasses import replace
from typing import Optional

from chalicelib import freshness
from chalicelib.auth import Principal
from chalicelib.auth.access import kb_to_read, kb_to_write
from chalicelib.aws import client
from chalicelib.config import load_settings
from chalicelib.documents.listing import DocumentQuery, encode_chunk_token, encode_token, row_key
from chalicelib.documents.runs import start_ingestion
from chalicelib.documents.sync import SyncReport, sync_knowledge_base
from chalicelib.errors import Invalid, NotFound
from chalicelib.ingestion.objects import SIDECAR_SUFFIX
from chalicelib.sources import SourceRules, parse_source
from chalicelib.sources.mirror import mirror
from chalicelib.retrieval.model import StoredChunk
from chalicelib.storage import audit, chunks, connection, documents


def _document(conn, principal: Principal, kb_id: str, doc_id: str, *, action: str = "") -> dict:
    """The document, in a knowledge base the caller sees (and may write, given an action)."""
    try:
        kb_to_write(conn, principal, kb_id, action) if action else kb_to_read(conn, principal, kb_id)
    except NotFound:
        raise NotFound.thing("document", doc_id) from None
    doc = documents.get_in(conn, principal, kb_id, doc_id)
    if doc is None:
        raise NotFound.thing("document", doc_id)
    return doc


def list_documents(principal: Principal, kb_id: str, query: DocumentQuery) -> tuple[list[dict], Optional[str]]:
    """A page of the documents the caller may read, and the token of the next (None at the end)."""
    with connection() as conn:
        kb_to_read(conn, principal, kb_id)
        rows = documents.list_page(conn, principal, kb_id, replace(query, limit=query.limit + 1))
    page = rows[:query.limit]
    more = len(rows) > query.limit
    return page, (encode_token(kb_id, query.sort, row_key(query.sort, page[-1])) if more else None)


def get_document(principal: Principal, kb_id: str, doc_id: str) -> dict:
    with connection() as conn:
        return _document(conn, principal, kb_id, doc_id)


def list_chunks(principal: Principal, kb_id: str, doc_id: str, *, after: int,
                limit: int) -> tuple[list[StoredChunk], Optional[str]]:
    """A page of the document's chunks in order (of its current version), for whoever may
    read the document, and the token of the next page (None at the end)."""
    with connection() as conn:
        _document(conn, principal, kb_id, doc_id)
        rows = chunks.document_page(conn, principal, kb_id, doc_id, after=after, limit=limit + 1)
    page = [StoredChunk.of(r) for r in rows[:limit]]
    more = len(rows) > limit
    return page, (encode_chunk_token(doc_id, page[-1].chunk_index) if more else None)


def delete_document(principal: Principal, kb_id: str, doc_id: str) -> None:
    """The row and its chunks, then the file and its metadata sidecar in S3."""
    with connection() as conn, conn.transaction():
        doc = _document(conn, principal, kb_id, doc_id, action="delete documents")
        documents.delete(conn, doc_id)
        audit.write(conn, principal, "delete_document", "document", doc_id,
                    before={"knowledgeBaseId": kb_id, "path": doc["path"], "filename": doc["filename"],
                            "kind": doc["kind"]})
    freshness.bump(kb_id)
    if doc["kind"] == "file":
        client("s3").delete_objects(Bucket=load_settings().bucket, Delete={"Quiet": True, "Objects": [
            {"Key": doc["s3_key"]}, {"Key": doc["s3_key"] + SIDECAR_SUFFIX}]})


def reindex_document(principal: Principal, kb_id: str, doc_id: str) -> dict:
    """Run the pipeline again and embed anew, even if the bytes did not change."""
    with connection() as conn, conn.transaction():
        doc = _document(conn, principal, kb_id, doc_id, action="reindex documents")
        if doc["kind"] != "file":
            raise Invalid("entries are indexed when they are written; write it again", code="NOT_A_FILE")
        documents.forget_indexed_version(conn, doc_id)
        audit.write(conn, principal, "reindex_document", "document", doc_id,
                    after={"knowledgeBaseId": kb_id, "path": doc["path"]})
    start_ingestion(load_settings().bucket, doc["s3_key"], kb_id, doc["size_bytes"])
    with connection() as conn:
        return documents.get(conn, doc_id)


def sync_documents(principal: Principal, kb_id: str) -> SyncReport:
    """The bucket compared with the knowledge base's documents, now (see sync.py)."""
    with connection() as conn:
        kb = kb_to_write(conn, principal, kb_id, "sync documents")
    settings = load_settings()
    rules = SourceRules.of(settings)
    # parsed again, not trusted as stored: the deployment's rules and the names' addresses may have changed
    source = parse_source(kb["source"], kb["org_id"], settings.bucket, rules)
    mirrored = mirror(kb_id, source, rules) if source else None  # copies land first, and their events start runs
    report = replace(sync_knowledge_base(kb_id), source=mirrored)
    with connection() as conn:
        audit.write(conn, principal, "sync_knowledge_base", "knowledge_base", kb_id,
                    after={"added": report.added, "changed": report.changed, "removed": report.removed,
                           "failed": report.failed})
    return report
