"""The public JSON of everything the API answers, built from storage rows and the
domain's dataclasses. Field names here are the API's contract (camelCase)."""
from datetime import datetime, timezone
from typing import Optional

from chalicelib.agents import ToolRun
from chalicelib.api.http import error_body, status_of
from chalicelib.auth import Principal
from chalicelib.documents.entries import Entry, entry_url
from chalicelib.documents.sync import SyncReport
from chalicelib.documents.uploads import Upload
from chalicelib.ingestion.context import Chunking
from chalicelib.knowledge.sessions import Session
from chalicelib.retrieval import Passage, SearchResult
from chalicelib.retrieval.model import DebugView
from chalicelib.retrieval.batch import BatchOutcome
from chalicelib.retrieval.model import StoredChunk, public_chunk_id
from chalicelib.storage.document_status import STATUSES
from chalicelib.storage.knowledge_bases import ACCESS_COLUMNS


def _iso(value) -> Optional[str]:
    return value.isoformat() if value is not None else None


def kb_view(row: dict, viewer: Principal) -> dict:
    """A public knowledge base shows another organisation what it is, not who owns it."""
    stats = row.get("stats") or {}
    ours = row["org_id"] == viewer.org_id
    return {
        "id": row["id"], "name": row["name"], "description": row["description"],
        "visibility": row["visibility"],
        **({"ownerId": row["owner_id"], "organizationId": row["org_id"],
            "access": {field: row[column] for column, field in ACCESS_COLUMNS.items()},
            "source": row["source"]} if ours else {}),
        "embedding": {"provider": row["embedding_provider"], "model": row["embedding_model"],
                      "dimension": row["embedding_dim"]},
        "chunking": Chunking.of(row).view(),
        "search": {"rerank": row.get("default_rerank", False)},
        "stats": {
            "documentCount": stats.get("documentCount", 0), "chunkCount": stats.get("chunkCount", 0),
            "totalTokens": stats.get("totalTokens", 0),
            "documentsByStatus": stats.get("byStatus", {s: 0 for s in STATUSES}),
            "lastIngestedAt": stats.get("lastIngestedAt"),
        },
        "createdAt": _iso(row["created_at"]), "updatedAt": _iso(row["updated_at"]),
    }


def available_kb_view(row: dict, linked: set[str], viewer: Principal) -> dict:
    return {**kb_view(row, viewer), "linked": row["id"] in linked}


def document_view(row: dict) -> dict:
    return {
        "id": row["id"], "knowledgeBaseId": row["kb_id"], "path": row["path"], "filename": row["filename"],
        "s3Key": row["s3_key"], "contentType": row["content_type"], "size": row["size_bytes"],
        "contentHash": row["content_hash"], "status": row["status"],
        "error": ({"code": row["error_code"], "message": row["error_message"]}
                  if row["error_code"] else None),
        "note": row["note"],  # why a PROCESSED document has no chunks (a page of navigation alone)
        "pages": row["page_count"], "chunks": row["chunk_count"], "tokens": row["token_count"],
        "metadata": row["metadata"], "stepDurationsMs": row["step_durations"],
        "createdAt": _iso(row["created_at"]), "updatedAt": _iso(row["updated_at"]),
        "processedAt": _iso(row["processed_at"]), "createdBy": row["created_by"], "originalUrl": row["original_url"],
        # an entry's earlier versions, and the entry a merge folded it into (issue 31)
        "history": row["history"], "supersededBy": row["superseded_by"],
    }


def sync_view(report: SyncReport) -> dict:
    source = report.source
    return {"knowledgeBaseId": report.knowledge_base_id, "added": report.added, "changed": report.changed,
            "removed": report.removed, "unchanged": report.unchanged, "failed": report.failed,
            "source": {"copied": source.copied, "unchanged": source.unchanged, "deleted": source.deleted,
                       "skipped": [{"path": s.name, "reason": s.reason} for s in source.skipped],
                       "more": source.more} if source else None}


def upload_view(upload: Upload) -> dict:
    answer = {"result": upload.result, "document": document_view(upload.document)}
    if upload.put is not None:
        answer["upload"] = {"method": "PUT", "headers": {"Content-Type": upload.put.content_type,
                                                         "Content-Length": str(upload.put.size)},
                            "expiresIn": upload.put.expires_in, "url": upload.put.url}
    return answer


def entry_view(entry: Entry) -> dict:
    return {"id": entry.id, "knowledgeBaseId": entry.knowledge_base_id, "title": entry.title,
            "url": entry_url(entry.id), "chunks": entry.chunks, "tokens": entry.tokens,
            "metadata": entry.metadata, "level": entry.level or "individual", "type": entry.type,
            "confidence": entry.confidence}


def entry_hit_view(passage: Passage) -> dict:
    """Seed 001's shape; score is the passage's cosine similarity to the query."""
    return {"title": passage.source, "url": entry_url(passage.document_id), "content": passage.content,
            "score": round(min(1.0, max(0.0, passage.scores.vector or 0.0)), 6)}


def passage_metadata(passage: Passage) -> dict:
    """A passage's metadata: its document's attributes, and the document's size, when and by
    whom it was added and its chunk count (these names over an attribute of the same name)."""
    return {**passage.metadata, "filesize": passage.filesize, "uploadedAt": passage.uploaded_at,
            "uploadedBy": passage.uploaded_by, "totalChunks": passage.total_chunks}


def passage_view(passage: Passage) -> dict:
    view = {
        "rank": passage.rank, "chunkId": public_chunk_id(passage.chunk_id),
        ("summary" if passage.summarised else "content"): passage.content, "source": passage.source,
        "path": passage.path,
        "documentId": passage.document_id, "knowledgeBaseId": passage.knowledge_base_id,
        "chunkIndex": passage.chunk_index, "page": passage.page, "headers": passage.headers,
        "section": passage.section,
        "similarity": passage.similarity, "metadata": passage_metadata(passage), "tokens": passage.tokens,
        "truncated": passage.truncated,
        "alsoIn": [{"documentId": a.document_id, "knowledgeBaseId": a.knowledge_base_id, "path": a.path,
                    "source": a.source, "chunkId": public_chunk_id(a.chunk_id)} for a in passage.also_in],
    }
    if passage.span:
        view["parent"] = {"firstChunkIndex": passage.span[0], "lastChunkIndex": passage.span[1]}
    if passage.rerank_score is not None:
        view["rerankScore"] = passage.rerank_score
    # Always: minScore applies to vectorScore, so the score a threshold reads is shown.
    view["scores"] = {"vectorScore": passage.scores.vector, "keywordScore": passage.scores.keyword,
                      "fusedScore": passage.scores.fused}
    return view


def search_view(result: SearchResult) -> dict:
    return {
        "query": result.query,
        "knowledgeBaseId": result.knowledge_base_ids[0],
        "knowledgeBaseName": result.knowledge_base_name,
        "resultCount": len(result.passages),
        "results": [passage_view(p) for p in result.passages],
        "summary": result.summary,
        "metadata": {"totalTokensUsed": result.tokens_used, "omittedCount": result.omitted,
                     "cached": result.cached, "resultsCached": result.results_cached, "strategy": result.strategy,
                     "tookMs": result.took_ms,
                     **({"debug": debug_view(result.debug_view)} if result.debug_view else {})},
    }


def debug_view(view: DebugView) -> dict:
    """Seed 003's debug view: both candidate lists before fusion, each by its own score, and
    the query's embedding per model when asked ({"queryVector": true})."""
    def listed(candidates):
        return [{"chunkId": public_chunk_id(c.chunk_id), "documentId": c.document_id, "score": c.score,
                 "text": c.text} for c in candidates]
    answer = {"candidates": {"semantic": listed(view.semantic), "keyword": listed(view.keyword)}}
    if view.query_vectors:
        answer["queryVectors"] = [{"model": model, "vector": list(vector)} for model, vector in view.query_vectors]
    return answer


def batch_view(outcomes: list[BatchOutcome]) -> dict:
    """Each query's answer in its place: the single search's, or its own error and status."""
    items = [{"index": i, "success": True, "data": search_view(o.result)} if o.result is not None else
             {"index": i, "success": False, "status": status_of(o.error), "error": error_body(o.error)}
             for i, o in enumerate(outcomes)]
    failed = sum(not item["success"] for item in items)
    return {"results": items, "metadata": {"queryCount": len(items), "succeeded": len(items) - failed,
                                           "failed": failed}}


def chunk_view(chunk: StoredChunk) -> dict:
    return {"chunkId": public_chunk_id(chunk.chunk_id), "knowledgeBaseId": chunk.knowledge_base_id,
            "documentId": chunk.document_id, "content": chunk.content, "source": chunk.source, "path": chunk.path,
            "chunkIndex": chunk.chunk_index, "page": chunk.page, "headers": chunk.headers, "section": chunk.section,
            "metadata": chunk.metadata, "tokens": chunk.tokens, "startOffset": chunk.start_offset,
            "endOffset": chunk.end_offset}


def bare_view(passages) -> list[dict]:
    """The bare answer existing agent workers expect: [{"text", "metadata": {"source", "page"}}], and the path
    (and the other documents' paths, an entry's title, when others hold the same text)."""
    return [{"text": p.content, "metadata": {"source": p.source, "page": p.page, "path": p.path,
                                             **({"alsoIn": [a.path or a.source for a in p.also_in]}
                                                if p.also_in else {})}}
            for p in passages]


KB_MISSING = {"success": False, "error": True, "message": "Knowledge base not found. It may have been deleted."}


def tool_result_view(run: ToolRun) -> dict:
    """What a tool answers the model."""
    if run.entries is not None:  # knowledge_search: seed 001's results
        return {"success": True, "query": run.query, "resultCount": len(run.entries),
                "results": [entry_hit_view(p) for p in run.entries]}
    if run.added is not None:  # a read-write knowledge-base tool's entry
        entry = run.added
        return {"success": True, "knowledgeBaseName": run.knowledge_base_name,
                "entry": {"id": entry.id, "title": entry.title, "url": entry_url(entry.id), "created": entry.created,
                          "chunks": entry.chunks}}
    if run.result is None:
        return dict(KB_MISSING)
    result = run.result
    return {
        "success": True, "query": run.query, "knowledgeBaseName": result.knowledge_base_name,
        "resultCount": len(result.passages),
        "results": [{"rank": p.rank, "content": p.content, "source": p.source, "path": p.path, "page": p.page,
                     "section": p.section, "chunkIndex": p.chunk_index, "similarity": p.similarity,
                     "vectorScore": p.scores.vector,
                     # seed 000's ContextWindowManager marks a cut passage in its metadata
                     "metadata": {**passage_metadata(p), "truncated": True} if p.truncated else passage_metadata(p),
                     "truncated": p.truncated,
                     **({"rerankScore": p.rerank_score} if p.rerank_score is not None else {}),
                     **({"alsoIn": [{"source": a.source, "path": a.path} for a in p.also_in]} if p.also_in else {})}
                    for p in result.passages],
        "summary": result.summary,
        "metadata": {"totalTokensUsed": result.tokens_used, "cached": result.cached},
    }


def agent_view(row: dict) -> dict:
    return {"id": row["id"], "name": row["name"], "description": row["description"],
            "ownerId": row["owner_id"], "availableTools": row["available_tools"],
            "knowledgeMode": row["knowledge_mode"],
            "createdAt": _iso(row["created_at"]), "updatedAt": _iso(row["updated_at"])}


def audit_view(row: dict) -> dict:
    return {"id": row["id"], "userId": row["user_id"], "keyId": row["key_id"], "action": row["action"],
            "targetType": row["target_type"], "targetId": row["target_id"], "agentId": row["agent_id"],
            "toolId": row["tool_id"], "before": row["before"], "after": row["after"],
            "redacted": row.get("redacted", False), "at": _iso(row["created_at"])}


def key_view(row: dict) -> dict:
    """A key as listed: never the key itself (only its first characters) nor its hash."""
    return {"id": row["id"], "name": row["name"], "prefix": row["key_prefix"], "userId": row["user_id"],
            "userName": row["user_name"], "createdAt": _iso(row["created_at"]),
            "lastUsedAt": _iso(row["last_used_at"]), "expiresAt": _iso(row["expires_at"]),
            "revokedAt": _iso(row["revoked_at"]),
            "status": "revoked" if row["revoked_at"] else ("expired" if _expired(row) else "active")}


def _expired(row: dict) -> bool:
    return row["expires_at"] is not None and row["expires_at"] <= datetime.now(timezone.utc)


def job_view(job: dict) -> dict:
    """An extraction job; its result is the extraction's JSON (Extraction.as_json)."""
    return {"jobId": job["id"], "agentId": job["agent_id"], "status": job["status"],
            "statusUrl": f"/agents/{job['agent_id']}/knowledge/extract/{job['id']}",
            "result": job["result"], "error": job["error"],
            "createdAt": job["created_at"].isoformat(), "updatedAt": job["updated_at"].isoformat()}


def context_view(context) -> dict:
    """An agent's assembled context (chalicelib.agents.context.AssembledContext)."""
    from chalicelib.agents.context import render

    return {"message": context.message, "maxTokens": context.max_tokens, "totalTokens": context.total_tokens,
            "allocation": context.budgets,
            "passages": [{k: v for k, v in {
                "source": p.source, "title": p.title, "content": p.content, "score": p.score, "tokens": p.tokens,
                "truncated": p.truncated, "toolId": p.tool_id, "knowledgeBaseId": p.knowledge_base_id,
                "url": p.url}.items() if v is not None} for p in context.passages],
            "context": render(context)}


def session_view(session: Session) -> dict:
    return {"id": session.id, "agentId": session.agent_id, "userId": session.user_id,
            "knowledgeBaseId": session.knowledge_base_id, "status": session.status,
            "messageCount": len(session.messages), "messages": list(session.messages),
            "extraction": job_view(session.job) if session.job else None,
            "createdAt": _iso(session.created_at), "updatedAt": _iso(session.updated_at),
            "completedAt": _iso(session.completed_at)}


def rebuild_view(row: dict) -> dict:
    """A knowledge base's rebuild: RUNNING until every document it counted has been processed
    (or failed) since it began; FAILED when handing them out stopped."""
    settled = row["done"] + row["failed"]
    status = ("FAILED" if row["error"] else
              "SUCCEEDED" if row["fanned_out_at"] is not None and settled >= row["total"] else "RUNNING")
    return {"id": row["id"], "knowledgeBaseId": row["kb_id"], "status": status, "chunking": row["chunking"],
            "documents": {"total": row["total"], "started": row["started"], "processed": row["done"],
                          "failed": row["failed"]},
            "error": row["error"], "createdAt": _iso(row["created_at"]), "fannedOutAt": _iso(row["fanned_out_at"])}
