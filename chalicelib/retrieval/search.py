"""Semantic, keyword and hybrid search over one or more knowledge bases.

Scores (and so minScore) per strategy:
- semantic: cosine similarity of the query and passage embeddings, 0..1 in practice;
- keyword: PostgreSQL's ts_rank normalised as rank / (rank + 1), 0..1;
- hybrid: reciprocal-rank fusion of both lists (k = 60), divided by its maximum
  (first in both lists), so 1.0 means "ranked first by both".
"""
import math
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Optional

from chalicelib.auth import Principal
from chalicelib.embeddings import get_provider
from chalicelib.retrieval import metrics
from chalicelib.retrieval.cache import cached_embedding
from chalicelib.retrieval.context import pack
from chalicelib.storage import connection, queries, snapshot

STRATEGIES = ("semantic", "keyword", "hybrid")
PRIORITIES = ("similarity", "recency", "balanced")
RRF_K = 60
RECENCY_HALF_LIFE_DAYS = 30.0


class KnowledgeBaseNotFound(Exception):
    pass


@dataclass(frozen=True)
class SearchRequest:
    knowledge_base_ids: tuple[str, ...]
    query: str
    top_k: int = 5
    min_score: float = 0.0
    strategy: str = "hybrid"
    filters: dict = field(default_factory=dict)
    max_tokens: int = 4000
    prioritize_by: str = "similarity"
    debug: bool = False

    @property
    def knowledge_base_id(self) -> str:
        return self.knowledge_base_ids[0]


def search(principal: Principal, request: SearchRequest) -> dict:
    started = time.monotonic()
    with connection() as conn:
        kbs = queries.visible_knowledge_bases(conn, principal, list(request.knowledge_base_ids))
    missing = set(request.knowledge_base_ids) - {kb["id"] for kb in kbs}
    if missing:
        raise KnowledgeBaseNotFound(sorted(missing)[0])
    candidates, cached = [], True
    # Knowledge bases with the same model share one query embedding and one SQL query.
    groups: dict[tuple, list[dict]] = {}
    for kb in kbs:
        groups.setdefault((kb["embedding_provider"], kb["embedding_model"], kb["embedding_dim"]), []).append(kb)
    for (provider_name, model, dim), members in groups.items():
        found, hit = _search_group(principal, request, provider_name, model, dim, [kb["id"] for kb in members])
        candidates.extend(found)
        cached = cached and hit
    candidates.sort(key=lambda r: r["score"], reverse=True)
    candidates = [r for r in candidates if r["score"] >= request.min_score][: request.top_k]
    ordered = _prioritise(candidates, request.prioritize_by)
    kept, used, omitted = pack(ordered, request.max_tokens)
    names = {kb["id"]: kb["name"] for kb in kbs}
    results = [_result_view(i + 1, r, names, request.debug) for i, r in enumerate(kept)]
    took_ms = (time.monotonic() - started) * 1000
    metrics.record_search(request.strategy, took_ms)
    return {
        "query": request.query,
        "knowledgeBaseId": request.knowledge_base_id,
        "knowledgeBaseName": ", ".join(names[k] for k in request.knowledge_base_ids),
        "resultCount": len(results),
        "results": results,
        "summary": _summary(results, names, used, omitted),
        "metadata": {"totalTokensUsed": used, "omittedCount": omitted,
                     "cached": cached if request.strategy != "keyword" else False,
                     "strategy": request.strategy, "tookMs": int(took_ms)},
    }


def _search_group(principal, request: SearchRequest, provider_name: str, model: str, dim: int,
                  kb_ids: list[str]) -> tuple[list[dict], bool]:
    pool = max(request.top_k * 4, 40) if request.strategy == "hybrid" else request.top_k
    semantic, keyword, vector, hit = [], [], None, False
    if request.strategy in ("semantic", "hybrid"):
        provider = get_provider(provider_name, model)
        vector, hit = cached_embedding(provider.name, model, request.query, provider.embed_query)
    with snapshot() as conn:  # both lists from the same data, even while a document is replaced
        if vector is not None:
            semantic = queries.semantic_search(conn, principal, kb_ids=kb_ids, dim=dim, query_vector=vector,
                                               top_k=pool, filters=request.filters)
        if request.strategy in ("keyword", "hybrid"):
            keyword = queries.keyword_search(conn, principal, kb_ids=kb_ids, query=request.query,
                                             top_k=pool, filters=request.filters)
    if request.strategy == "semantic":
        return [_scored(r, vector=r["score"]) for r in semantic], hit
    if request.strategy == "keyword":
        return [_scored(r, keyword=r["score"]) for r in keyword], hit
    return fuse(semantic, keyword), hit


def _scored(row: dict, vector=None, keyword=None) -> dict:
    return {**row, "score": float(row["score"]), "vectorScore": vector, "keywordScore": keyword,
            "fusedScore": None}


def fuse(semantic: list[dict], keyword: list[dict]) -> list[dict]:
    """Reciprocal-rank fusion, normalised so that first in both lists scores 1.0."""
    fused: dict[int, dict] = {}
    for rank, row in enumerate(semantic, start=1):
        fused[row["chunk_id"]] = {**row, "vectorScore": float(row["score"]), "keywordScore": None,
                                  "fusedScore": 1.0 / (RRF_K + rank)}
    for rank, row in enumerate(keyword, start=1):
        entry = fused.setdefault(row["chunk_id"], {**row, "vectorScore": None, "fusedScore": 0.0})
        entry["keywordScore"] = float(row["score"])
        entry["fusedScore"] += 1.0 / (RRF_K + rank)
    best = 2.0 / (RRF_K + 1)
    for entry in fused.values():
        entry["score"] = entry["fusedScore"] / best
    return sorted(fused.values(), key=lambda e: e["score"], reverse=True)


def _recency(row: dict) -> float:
    indexed_at: Optional[datetime] = row.get("indexed_at")
    if indexed_at is None:
        return 0.0
    age_days = max(0.0, (datetime.now(timezone.utc) - indexed_at).total_seconds() / 86400)
    return math.exp(-math.log(2) * age_days / RECENCY_HALF_LIFE_DAYS)


def _prioritise(results: list[dict], prioritize_by: str) -> list[dict]:
    if prioritize_by == "recency":
        return sorted(results, key=lambda r: (r.get("indexed_at") or datetime.min.replace(tzinfo=timezone.utc),
                                              r["score"]), reverse=True)
    if prioritize_by == "balanced":
        top = max((r["score"] for r in results), default=1.0) or 1.0
        return sorted(results, key=lambda r: 0.7 * r["score"] / top + 0.3 * _recency(r), reverse=True)
    return results


def _result_view(rank: int, row: dict, names: dict, debug: bool) -> dict:
    view = {
        "rank": rank, "content": row["content"], "source": row["title"] or row["filename"],
        "documentId": row["document_id"], "knowledgeBaseId": row["kb_id"], "chunkIndex": row["chunk_index"],
        "page": row["page"], "headers": row["headers"], "similarity": round(row["score"], 6),
        "metadata": row["metadata"], "tokens": row["tokens"], "truncated": row["truncated"],
    }
    if debug:
        view["scores"] = {k: (round(row[k], 6) if row[k] is not None else None)
                          for k in ("vectorScore", "keywordScore", "fusedScore")}
    return view


def _summary(results: list[dict], names: dict, used: int, omitted: int) -> str:
    if not results:
        return "No passages matched the query."
    sources = sorted({r["source"] for r in results})
    text = (f"{len(results)} passage{'s' if len(results) != 1 else ''} from {len(sources)} "
            f"source{'s' if len(sources) != 1 else ''} ({', '.join(sources[:5])}"
            f"{', …' if len(sources) > 5 else ''}), {used} tokens")
    return text + (f"; {omitted} more left out to fit the token budget." if omitted else ".")

