"""Seed 003's rebuildKnowledgeIndex: every document of a knowledge base chunked and embedded
again, optionally with new chunk sizes (which otherwise stay as created). The request checks
and records the rebuild; the jobs function (chalicelib/jobs.py) hands the files to the pipeline (as a reindex does)
and re-chunks the entries. Search answers from each document's old chunks until its new ones
are switched in; progress is read from the documents (storage/rebuilds.py)."""
import logging
from typing import Optional

from chalicelib.auth import Principal
from chalicelib.auth.access import kb_to_manage
from chalicelib.config import load_settings
from chalicelib.documents.entries import rechunk_entries
from chalicelib.documents.runs import start_ingestion
from chalicelib.errors import Conflict, NotFound, Transient
from chalicelib.ids import new_id
from chalicelib.ingestion.context import Chunking, settle_chunking
from chalicelib.jobs import handles, invoke_later, jobs_function
from chalicelib.storage import EVERY_ORGANISATION, acting_for, audit, connection, documents, knowledge_bases
from chalicelib.storage import rebuilds as rebuild_rows

logger = logging.getLogger(__name__)
STARTED_BATCH = 50  # documents handed to the pipeline between two progress writes


def start_rebuild(principal: Principal, kb_id: str, *, chunking: Optional[dict] = None) -> dict:
    """The rebuild's row with its progress. Its owner and the organisation's admins may
    (it may change the chunking: the API's `chunking` fields, those left out kept while the
    strategy stays); one at a time while its documents are being handed out."""
    jobs_function()
    with connection() as conn, conn.transaction():
        kb = kb_to_manage(conn, principal, kb_id, "rebuild it", for_update=True)
        if rebuild_rows.running(conn, kb_id):
            raise Conflict(f"knowledge base {kb_id} is being rebuilt; GET .../rebuild shows how far",
                           code="REBUILD_RUNNING")
        before = Chunking.of(kb)
        settings = load_settings()
        settled = settle_chunking(chunking or {}, kb["embedding_provider"], base=before,
                                  sizes=(settings.default_chunk_tokens, settings.default_chunk_overlap))
        knowledge_bases.set_chunking(conn, kb_id, settled.chunk_tokens, settled.chunk_overlap, settled.strategy,
                                     settled.child_tokens)
        rebuild_id = new_id("rebuild")
        rebuild_rows.insert(conn, principal, rebuild_id=rebuild_id, kb_id=kb_id, chunking=settled.view(),
                            total=knowledge_bases.document_count(conn, kb_id))
        audit.write(conn, principal, "rebuild_knowledge_base", "knowledge_base", kb_id,
                    before=before.view(), after={**settled.view(), "rebuildId": rebuild_id})
    try:
        invoke_later({"rebuildId": rebuild_id, "orgId": principal.org_id})
    except Transient:
        with connection() as conn, conn.transaction():  # nothing rebuilt: the old chunking again
            knowledge_bases.set_chunking(conn, kb_id, before.chunk_tokens, before.chunk_overlap, before.strategy,
                                         before.child_tokens)
            rebuild_rows.finish(conn, rebuild_id, error={"code": "NOT_STARTED", "message": "the invocation failed"})
        raise
    return get_rebuild(principal, kb_id)


def get_rebuild(principal: Principal, kb_id: str) -> dict:
    with connection() as conn:
        row = rebuild_rows.latest(conn, principal, kb_id)
    if row is None:
        raise NotFound(f"knowledge base {kb_id} has not been rebuilt (or is not there)")
    return row


@handles("rebuildId")
def run(event: dict) -> dict:
    """The jobs function's part: hand every file to the pipeline, re-chunk every entry."""
    rebuild_id = event.get("rebuildId")
    with acting_for(EVERY_ORGANISATION):
        with connection() as conn:
            row = rebuild_rows.claim(conn, rebuild_id) if isinstance(rebuild_id, str) else None
            if row is None:
                return {"ran": False, "reason": f"rebuild {rebuild_id} is not waiting"}
            kb = knowledge_bases.get_for_pipeline(conn, row["kb_id"])
            files = documents.files_in(conn, row["kb_id"]) if kb else []
        error = None
        try:
            bucket = load_settings().bucket
            for at in range(0, len(files), STARTED_BATCH):
                for doc in files[at:at + STARTED_BATCH]:
                    with connection() as conn:
                        documents.forget_indexed_version(conn, doc["id"])  # the same bytes are embedded anew
                    start_ingestion(bucket, doc["s3_key"], row["kb_id"], doc["size_bytes"])
                with connection() as conn:
                    rebuild_rows.count_started(conn, rebuild_id, len(files[at:at + STARTED_BATCH]))
            entries = rechunk_entries(kb) if kb else 0
            with connection() as conn:
                rebuild_rows.count_started(conn, rebuild_id, entries)
        except Exception as err:  # noqa: BLE001 - the rebuild says so; documents already handed out go on
            logger.exception("rebuild %s stopped", rebuild_id)
            error = {"code": "REBUILD_STOPPED", "message": type(err).__name__}
        with connection() as conn:
            rebuild_rows.finish(conn, rebuild_id, error=error)
    return {"ran": True, "rebuildId": rebuild_id, "files": len(files), "error": error}
