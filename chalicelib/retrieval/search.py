"""Semantic, keyword and hybrid search over one or more knowledge bases.

Scores per strategy (a passage's `similarity`, the order of the results):
- semantic: cosine similarity of the query and passage embeddings, 0..1 in practice;
- keyword: BM25 (chalicelib/retrieval/bm25.py: k1 1.2, b 0.75, exact) as a share of the most a
  chunk could score for this question (every term, often), 0..1;
- hybrid: each list's scores min-max normalised over its candidates, then weighted
  (hybridWeights, semantic 0.7 and keyword 0.3 unless asked), summed and divided by the
  weights of the lists that found anything, so 1.0 means "ranked first by every list that
  found something" (see fuse).

minScore has one meaning whatever the strategy: the cosine similarity of the passage
to the question (scores.vector). A fused or keyword score says where a passage ranks
among the others, not how well it answers; a threshold on it dropped the right passage
("How can I get my money back?" against a refund policy: cosine 0.51, hybrid 0.5 when
only the meaning matched, below the 0.7 a quick-added tool used to apply).
"""
import functools
import hashlib
import math
import time
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import replace
from datetime import datetime, timezone
from typing import Optional

from chalicelib import limits, metrics
from chalicelib.auth import Principal, access
from chalicelib.config import reranker_configured
from chalicelib.embeddings import get_provider
from chalicelib.errors import Invalid, NotFound, Transient, Unavailable
from chalicelib.retrieval import bm25, dedupe, parents, policy, rerank, results_cache
from chalicelib.retrieval.cache import cached_embedding
from chalicelib.retrieval.context import Fitted, excerpt, pack, summarise
from chalicelib.retrieval.model import AlsoIn, Candidate, DebugView, Passage, Scores, SearchRequest, SearchResult
from chalicelib.storage import acting_for, chunks, connection, db, term_blocks, terms
from chalicelib.storage.chunks import Hit
from chalicelib.storage.db import shared_snapshot

RRF_K = 60
RECENCY_HALF_LIFE_DAYS = 30.0
# Work a search runs beside its keyword list: the embedding, or hybrid's semantic list.
_BESIDE = ThreadPoolExecutor(max_workers=4, thread_name_prefix="beside")


def search(principal: Principal, request: SearchRequest) -> SearchResult:
    """Raises NotFound naming the first knowledge base the caller cannot see. The caller's
    view of the knowledge bases is checked before a cached answer is used (access.searchable:
    from the database, or as the worker remembers it under the counters the answer was read
    with), so a knowledge base it may no longer see is a 404 even while an answer about it is
    cached."""
    started = time.monotonic()
    read = results_cache.lookup(principal, request)
    kbs = access.searchable(principal, request.knowledge_base_ids, read.generations if read is not None else None)
    missing = set(request.knowledge_base_ids) - {kb["id"] for kb in kbs}
    if missing:
        raise NotFound.thing("knowledge base", sorted(missing)[0])
    result = read.found if read is not None else None
    if result is None:
        result = _search(principal, request, kbs)
        results_cache.store_result(read, result)
    took_ms = (time.monotonic() - started) * 1000
    result = replace(result, took_ms=int(took_ms))
    metrics.record_search(metrics.SearchEvent(
        query_hash=hashlib.sha256(request.query.encode("utf-8")).hexdigest()[:16], strategy=request.strategy,
        result_count=len(result.passages), average_similarity=_average_similarity(result.passages),
        took_ms=took_ms, results_cached=result.results_cached, org_id=principal.org_id,
        knowledge_base_ids=request.knowledge_base_ids))
    return result


def _search(principal: Principal, request: SearchRequest, kbs: list[dict]) -> SearchResult:
    request = replace(request, rerank=reranks(request, kbs))
    # Several children of one parent, and repeats of one text, answer once: when that leaves
    # fewer passages than asked while a list stopped at its depth (more lay beyond it), the
    # lists are read again parents.DEPTH times deeper, once, and answer as a search that deep
    # would. A reranked search is not read again: the reranker was sent as many as it takes.
    for depth in (1, parents.DEPTH):
        candidates, hit, views, cut = _candidates(principal, request, kbs, depth)
        cached = hit if depth == 1 else cached  # the second read finds the first's embedding
        groups = _answers(principal, request, kbs, candidates)
        if len(groups) >= request.top_k or not cut or request.rerank:
            break
    candidates = [g.kept for g in groups]
    repeats = {g.kept.chunk_id: g.repeats for g in groups if g.repeats}
    ordered = _prioritise(candidates, request.prioritize_by)
    if request.summaries:  # the budget then holds the summaries, not the passages they stand for
        ordered = [h._replace(content=summarise(h.content, limits.PASSAGE_SUMMARY_TOKENS), tokens=None)
                   for h in ordered]
    kept, used, omitted = pack(ordered, request.max_tokens)
    names = {kb["id"]: kb["name"] for kb in kbs}
    passages = tuple(replace(_passage(i + 1, f), summarised=request.summaries,
                             also_in=_also_in(f.item, repeats.get(f.item.chunk_id, ())))
                     for i, f in enumerate(kept))
    return SearchResult(
        query=request.query, knowledge_base_ids=request.knowledge_base_ids,
        knowledge_base_names=tuple(names[k] for k in request.knowledge_base_ids),
        passages=passages, summary=_summary(passages, used, omitted), tokens_used=used, omitted=omitted,
        cached=cached if request.strategy != "keyword" else False, strategy=request.strategy,
        took_ms=0, debug=request.debug, debug_view=_merged_views(views) if request.debug else None)


def reranks(request: SearchRequest, kbs: list[dict]) -> bool:
    """Whether the search reranks: as it asks, else as a knowledge base it reads defaults
    (search.rerank), where the deployment has a reranker."""
    if request.rerank is not None:
        return request.rerank
    return reranker_configured() and any(kb.get("default_rerank") for kb in kbs)


def _candidates(principal: Principal, request: SearchRequest, kbs: list[dict],
                depth: int) -> tuple[list[Hit], bool, list[Optional[DebugView]], bool]:
    """Every model group's candidates, best first; whether every query embedding was cached;
    the debug views; and whether some list stopped at its depth (policy.candidate_pool times
    depth)."""
    candidates, cached, views, cut = [], True, [], False
    # Knowledge bases with the same model share one query embedding and one SQL query.
    groups: dict[tuple, list[dict]] = {}
    for kb in kbs:
        groups.setdefault((kb["embedding_provider"], kb["embedding_model"], kb["embedding_dim"]), []).append(kb)
    for (provider_name, model, dim), members in groups.items():
        found, hit, view, full = _search_group(principal, request, provider_name, model, dim,
                                               [kb["id"] for kb in members], depth)
        candidates.extend(found)
        cached, cut = cached and hit, cut or full
        views.append(view)
    candidates.sort(key=lambda h: h.ranking_score, reverse=True)
    return candidates, cached, views, cut


def _answers(principal: Principal, request: SearchRequest, kbs: list[dict],
             candidates: list[Hit]) -> list[dedupe.Group[Hit]]:
    """The candidates as up to top_k answers (dedupe groups): held to minScore, reranked if
    asked, each hit's parent once, a repeated text once."""
    if request.min_score > 0:
        candidates = [h for h in candidates if (h.vector or 0.0) >= request.min_score]
    # A few more than asked, to take the place of passages that repeat a better one's text.
    wanted = request.top_k + policy.DEDUPE_SPARE
    if request.rerank:  # the top candidates re-ordered by the reranker (Hit.rerank), as deep as parents look
        candidates = rerank.rerank(request.query, candidates, wanted * parents.DEPTH)
    candidates = _parents(principal, candidates, kbs, wanted)
    # K different answers: a text repeated in other documents (an included block, a page beside
    # its source) answers once, at its best rank, naming the others (Passage.also_in).
    return dedupe.distinct(candidates, _content, request.top_k)


def _content(hit: Hit) -> str:
    return hit.content


def _also_in(kept: Hit, repeats) -> tuple[AlsoIn, ...]:
    """The other documents holding the kept hit's text, each once."""
    seen, found = {kept.document_id}, []
    for h in repeats:
        if h.document_id not in seen:
            seen.add(h.document_id)
            found.append(AlsoIn(document_id=h.document_id, knowledge_base_id=h.kb_id, source=_source(h), path=h.path,
                                chunk_id=h.chunk_id))
    return tuple(found)


def _parents(principal: Principal, candidates: list[Hit], kbs: list[dict], top_k: int) -> list[Hit]:
    """The top_k passages: each hit's parent, one per parent (retrieval/parents.py)."""
    by_id = {kb["id"]: kb for kb in kbs}
    pool = candidates[: top_k * parents.DEPTH]
    if not any(parents.reach(by_id[h.kb_id]) for h in pool):
        return candidates[:top_k]
    with acting_for(principal.org_id, principal.user_id), connection() as conn:
        return parents.parents(conn, pool, by_id, top_k)


def _merged_views(views: list[Optional[DebugView]]) -> DebugView:
    """One debug view of every model group's lists (each list by its own score)."""
    views = [v for v in views if v is not None]
    return DebugView(
        semantic=tuple(sorted((c for v in views for c in v.semantic), key=lambda c: -c.score)),
        keyword=tuple(sorted((c for v in views for c in v.keyword), key=lambda c: -c.score)),
        query_vectors=tuple(q for v in views for q in v.query_vectors))


def _debug_view(request: SearchRequest, semantic: list[Hit], keyword: list[Hit], model: str,
                vector) -> Optional[DebugView]:
    if not request.debug:
        return None

    def listed(hits: list[Hit]) -> tuple[Candidate, ...]:
        return tuple(Candidate(h.chunk_id, h.document_id, round(h.ranking_score, 6),
                               excerpt(h.content, limits.DEBUG_CANDIDATE_TEXT_CHARS)) for h in hits)

    return DebugView(semantic=listed(semantic), keyword=listed(keyword),
                     query_vectors=((model, tuple(float(x) for x in vector)),)
                     if request.debug_query_vector and vector is not None else ())


def _average_similarity(passages: tuple[Passage, ...]) -> Optional[float]:
    """Seed 003's average similarity: of the passages' cosine to the query where known."""
    cosines = [p.scores.vector for p in passages if p.scores.vector is not None]
    return round(sum(cosines) / len(cosines), 6) if cosines else None


def _search_group(principal, request: SearchRequest, provider_name: str, model: str, dim: int,
                  kb_ids: list[str], depth: int = 1) -> tuple[list[Hit], bool, Optional[DebugView], bool]:
    """The group's candidates, whether its query embedding was cached, its debug view, and
    whether a list stopped at the pool's depth (more may lie beyond it)."""
    pool = policy.candidate_pool(request.top_k, request.strategy, request.rerank) * depth
    semantic, keyword, embed = [], [], None
    # Keyword search embeds the question only to hold its hits to a minScore.
    if request.strategy in ("semantic", "hybrid") or request.min_score > 0:
        try:
            provider = get_provider(provider_name, model)
        except Invalid as err:  # the knowledge base's provider is not set up in this deployment
            raise Unavailable(f"the knowledge base's embedding provider is not available: {err.message}") from None
        embed = functools.partial(cached_embedding, provider.name, model, request.query, provider.embed_query)
    # Both lists from the same data, even while a document is replaced; acting for the
    # caller's organisation also in-process (tests, benchmarks), as keyword search's GIN
    # path reads chunks_visible, which shows only what that organisation may read.
    hybrid = request.strategy == "hybrid"
    with acting_for(principal.org_id, principal.user_id), shared_snapshot(share=hybrid) as (conn, snapshot_name):
        side = db.side_connection() if hybrid and snapshot_name else None
        if side is not None:
            # Hybrid's semantic list (the embedding, then the graph) is read on a second
            # connection in the same snapshot while the keyword list is read on the first, so
            # the two lists' times overlap instead of adding up.
            beside = _BESIDE.submit(_embedded_semantic, side, snapshot_name, principal, request, kb_ids, dim,
                                    pool, embed)
            try:
                keyword, _ = _bm25(conn, principal, request, kb_ids, pool)
            except BaseException:
                wait([beside])  # the side transaction ends before the one it reads the snapshot of
                raise
            vector, hit, semantic = beside.result()
            if semantic is None:  # the side connection failed: read it here, in the same snapshot
                semantic = _semantic(conn, principal, request, kb_ids, dim, pool, vector)
        else:
            # Embedded while the keyword list is read: a miss (the local model's time, or a
            # round trip to Bedrock or OpenAI) no longer adds to the database's.
            embedding = _BESIDE.submit(embed) if embed is not None else None
            kb_chunks = None
            if request.strategy in ("keyword", "hybrid"):
                keyword, kb_chunks = _bm25(conn, principal, request, kb_ids, pool)
            vector, hit = embedding.result() if embedding is not None else (None, False)
            if request.strategy in ("semantic", "hybrid"):
                semantic = _semantic(conn, principal, request, kb_ids, dim, pool, vector, kb_chunks)
        if keyword and vector is not None:  # the cosine of keyword hits the semantic list lacks
            known = {h.chunk_id: h.vector for h in semantic}
            missing = [h.chunk_id for h in keyword if h.chunk_id not in known]
            known.update(chunks.similarities(conn, missing, vector, dim) if missing else {})
            keyword = [h._replace(vector=known.get(h.chunk_id)) for h in keyword]
    view = _debug_view(request, semantic, keyword, f"{provider_name}:{model}", vector)
    cut = len(semantic) >= pool or len(keyword) >= pool
    if request.strategy == "semantic":
        return semantic, hit, view, cut
    if request.strategy == "keyword":
        return keyword, hit, view, cut
    return fuse(semantic, keyword, request.hybrid_weights, request.fusion), hit, view, cut


def _embedded_semantic(side, snapshot_name: str, principal, request: SearchRequest, kb_ids: list[str], dim: int,
                       pool: int, embed) -> tuple[list[float], bool, Optional[list[Hit]]]:
    """(vector, cache hit, semantic list) on the side connection, in the snapshot of that
    name; no list when that connection failed (it is re-opened for the next search)."""
    vector, hit = embed()
    try:
        with db.beside(side, snapshot_name) as conn:
            return vector, hit, _semantic(conn, principal, request, kb_ids, dim, pool, vector)
    except Transient:
        return vector, hit, None


def _semantic(conn, principal, request: SearchRequest, kb_ids: list[str], dim: int, pool: int, vector,
              kb_chunks: Optional[int] = None) -> list[Hit]:
    """The semantic list, `pool` deep: exact in a small knowledge base, through the graph
    in a larger one (policy.exact_vector_scan); kb_chunks when the keyword list read it."""
    if kb_chunks is None:
        kb_chunks = terms.chunk_count(conn, kb_ids)
    return chunks.semantic_search(conn, principal, kb_ids=kb_ids, dim=dim, query_vector=vector, top_k=pool,
                                  ef_search=policy.ef_search_for(pool, chunks.vector_index_rows(conn, dim)),
                                  filters=request.filters, exact=policy.exact_vector_scan(kb_chunks))


def _bm25(conn, principal, request: SearchRequest, kb_ids: list[str], pool: int) -> tuple[list[Hit], int]:
    """The keyword list, `pool` deep, and the knowledge bases' chunk count it read; scores as
    a share of the best. BM25's exact top (bm25.top) over the postings, of which the rows
    the caller may read and the filters keep; when they keep fewer than `pool` even of a
    deeper ranking, or the question is in web-search syntax, every matching chunk is scored
    (the GIN path), which is exact under any filter."""
    words = terms.query_terms(conn, request.query)
    stats = terms.statistics(conn, kb_ids, words)
    query = bm25.query(stats, words)
    match = policy.web_query(request.query)
    if match is None:
        source = term_blocks.BlockPostings(conn, kb_ids, query.terms, stats.blocks_versions, stats.document_frequency)
        depth = pool
        for _ in range(2):
            ranked = bm25.top(query, source, depth)
            rows = chunks.keyword_rows(conn, principal, kb_ids=kb_ids, top_k=pool, filters=request.filters,
                                       ranked=list(zip(ranked.ids.tolist(), ranked.scores.tolist())))
            if len(rows) == pool or len(ranked.ids) < depth:
                break
            # Some of the best are chunks the caller may not read (entries' levels, a version
            # being replaced) or the filters drop: once deeper, then every match.
            depth = pool * bm25.DEEPER
        else:
            rows = chunks.keyword_matches(conn, principal, kb_ids=kb_ids, query=query, top_k=pool,
                                          filters=request.filters)
    else:
        rows = chunks.keyword_matches(conn, principal, kb_ids=kb_ids, query=query, top_k=pool, match=match,
                                      filters=request.filters)
    return [h._replace(keyword=h.bm25 / query.best) for h in rows], stats.chunks


def fuse(semantic: list[Hit], keyword: list[Hit], weights: tuple[float, float] = limits.HYBRID_WEIGHTS,
         method: str = "score") -> list[Hit]:
    """Both candidate lists as one (`fused`), scored 0..1: 1.0 is first in every list that
    found anything, so a list that found nothing (a question none of whose words a chunk
    holds) does not halve the best passage's score.

    "score" (the service's): each list's scores min-max normalised over its candidates,
    weighted, summed, and divided by the weights of the lists that found anything (the
    same divisor for every passage of a search, so the order is the weighted sum's); a
    passage missing from a list gets 0 there. "rank": reciprocal-rank fusion (k = 60),
    each list's term weighted, divided by its maximum over those lists. On the SciFact
    train queries fusion by score ranks better (make bench: the fusion table).

    Each list is scaled by its own score (the cosine; BM25's share of the best); a keyword
    hit the semantic list lacks keeps the cosine it carries (`vector`), if any."""
    w_semantic, w_keyword = weights
    in_semantic, in_keyword = {h.chunk_id: h for h in semantic}, {h.chunk_id: h for h in keyword}
    found = {**in_keyword, **in_semantic}
    lists = [(w, hits) for w, hits in ((w_semantic, semantic), (w_keyword, keyword)) if hits]
    if method == "rank":
        parts = [(w, _ranks(hits)) for w, hits in lists]
        best = sum(w / (RRF_K + 1) for w, _ in parts) or 1.0
        fused = {chunk_id: sum(w / (RRF_K + ranks[chunk_id]) for w, ranks in parts if chunk_id in ranks) / best
                 for chunk_id in found}
    else:
        scale = _spread if method == "distribution" else _min_max
        parts = [(w, scale(hits)) for w, hits in lists]
        best = sum(w for w, _ in parts) or 1.0
        fused = {chunk_id: sum(w * scaled.get(chunk_id, 0.0) for w, scaled in parts) / best for chunk_id in found}
    # Equal fused scores (first in one list and second in the other, when each holds two) are
    # ordered by the two raw scores' sum: the passage both lists rate higher overall comes first.
    return sorted((h._replace(vector=in_semantic[i].vector if i in in_semantic else h.vector,
                             keyword=in_keyword[i].keyword if i in in_keyword else None, fused=fused[i])
                   for i, h in found.items()), key=lambda h: (-h.fused, -((h.vector or 0.0) + (h.keyword or 0.0)),
                                                               h.chunk_id))


def _spread(hits: list[Hit]) -> dict[int, float]:
    """Distribution-based scaling: each score placed between the list's mean less and plus three
    standard deviations (clipped to 0..1), so a list whose best stands far above the rest
    weighs more than one whose scores are all alike."""
    if not hits:
        return {}
    scores = [h.ranking_score for h in hits]
    mean = sum(scores) / len(scores)
    sigma = math.sqrt(sum((s - mean) ** 2 for s in scores) / len(scores))
    if sigma == 0:
        return {h.chunk_id: 0.5 for h in hits}
    low, span = mean - 3 * sigma, 6 * sigma
    return {h.chunk_id: min(1.0, max(0.0, (s - low) / span)) for h, s in zip(hits, scores)}


def _ranks(hits: list[Hit]) -> dict[int, int]:
    return {h.chunk_id: rank for rank, h in enumerate(hits, start=1)}


def _min_max(hits: list[Hit]) -> dict[int, float]:
    if not hits:
        return {}
    scores = [h.ranking_score for h in hits]
    low, span = min(scores), max(scores) - min(scores)
    return {h.chunk_id: (s - low) / span if span > 0 else 1.0 for h, s in zip(hits, scores)}


def _recency(hit: Hit) -> float:
    if hit.indexed_at is None:
        return 0.0
    age_days = max(0.0, (datetime.now(timezone.utc) - hit.indexed_at).total_seconds() / 86400)
    return math.exp(-math.log(2) * age_days / RECENCY_HALF_LIFE_DAYS)


def _prioritise(hits: list[Hit], prioritize_by: str) -> list[Hit]:
    if prioritize_by == "recency":
        return sorted(hits, key=lambda h: (h.indexed_at or datetime.min.replace(tzinfo=timezone.utc), h.ranking_score),
                      reverse=True)
    if prioritize_by == "balanced":
        top = max((h.ranking_score for h in hits), default=1.0) or 1.0
        return sorted(hits, key=lambda h: 0.7 * h.ranking_score / top + 0.3 * _recency(h), reverse=True)
    return hits


def _source(hit: Hit) -> str:
    """An entry's title, a file's name."""
    return (hit.title if hit.kind == "entry" else None) or hit.filename


def _passage(rank: int, fitted: Fitted[Hit]) -> Passage:
    hit = fitted.item
    return Passage(
        rank=rank, content=fitted.content, source=_source(hit),
        path=hit.path,
        document_id=hit.document_id, knowledge_base_id=hit.kb_id, chunk_index=hit.chunk_index,
        page=hit.page, headers=hit.headers, similarity=round(hit.ranking_score, 6),
        metadata=hit.metadata, tokens=fitted.tokens, truncated=fitted.truncated,
        scores=Scores(*(round(s, 6) if s is not None else None for s in (hit.vector, hit.keyword, hit.fused))),
        rerank_score=hit.rerank, chunk_id=hit.chunk_id, span=hit.span, filesize=hit.size,
        uploaded_at=hit.uploaded_at.isoformat() if hit.uploaded_at is not None else None,
        uploaded_by=hit.uploaded_by, total_chunks=hit.total_chunks)


def _summary(passages: tuple[Passage, ...], used: int, omitted: int) -> str:
    if not passages:
        return "No passages matched the query."
    sources = sorted({p.source for p in passages})
    text = (f"{len(passages)} passage{'s' if len(passages) != 1 else ''} from {len(sources)} "
            f"source{'s' if len(sources) != 1 else ''} ({', '.join(sources[:5])}"
            f"{', …' if len(sources) > 5 else ''}), {used} tokens")
    return text + (f"; {omitted} more left out to fit the token budget." if omitted else ".")
