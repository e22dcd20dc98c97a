"""How a query becomes SQL: the full-text query and the HNSW candidate list. Storage
runs what this decides."""
import math
import re
from typing import Optional

from chalicelib.storage.chunks import TextQuery
from chalicelib.storage.terms import Bm25Query, TermStatistics

# HNSW's candidate list: 40 (pgvector's default) lost a quarter of the true top 10
# at 100k chunks in bench/retrieval.py; 200 kept 94% of it, for about 4 ms more a query.
# With graphs of m 24 and ef_construction 128 (migration 0013) on bench/retrieval.py's
# synthetic chunks: at 100k, 100 kept 99.5% (4.0 ms a scan, 200: 6.7 ms); at a million,
# 100 kept 95.4%, 200 98.0% and 400 99.0%, at p95 5.5, 11.0 and 21.9 ms with the index in
# shared buffers. By the index's rows:
HNSW_EF_SEARCH_BY_SIZE = ((200_000, 100), (2_000_000, 200))
HNSW_EF_SEARCH_LARGEST = 400
# Knowledge bases holding this many chunks or fewer are searched by an exact scan of
# their rows, never through the graph: in an index that mostly holds other knowledge
# bases' vectors, the iterative scan would read up to 20,000 of them to find a small
# one's top 10. Above it the graph always serves (storage.chunks.semantic_search).
VECTOR_EXACT_MAX = 2_000
# BM25 as Lucene and rank_bm25 default to.
BM25_K1, BM25_B = 1.2, 0.75
# A question's terms beyond these (the commonest) are left out: each costs one index scan.
KEYWORD_TERMS_MAX = 32
# Postings read per term in the first pass, in impact order, before the exact scoring of
# the best candidates; the second pass reads the terms that could still change the top
# whole, when they hold KEYWORD_POSTINGS_MAX postings or fewer. Reading and summing a
# posting costs ~1 us (EXPLAIN ANALYZE at a million chunks: 27k postings, 24 ms) however
# the query is shaped or parallelised. On the benchmark's million chunks, as kb_app
# (issue 12's closing note: share of the exact top 10 over 20 questions, p95 over 30 x 2):
# 40,000 found 0.560 at keyword p95 49.5 ms, 30,000 0.520 at 46.2 ms, 20,000 0.485 at
# 32.3 ms; hybrid, which reads the same keyword list, had p95 47-54 ms at 40,000 and
# 29-38 ms at 20,000 (several runs, the embedding cached or computed).
KEYWORD_PER_TERM = 400
KEYWORD_POSTINGS_MAX = 20_000
# Candidates scored exactly from their tsv: in the first pass, and in the second, whose
# candidates are ordered by their essential terms alone. At a million chunks 200 found
# as much of the exact top 10 as 500 (0.520 against 0.525, 20 questions) and cut keyword
# p95 by a quarter (81 to 59 ms, machine loaded): scoring from the tsv costs ~30 us a candidate.
KEYWORD_RESCORED, KEYWORD_RESCORED_EXACT = 100, 200
_WEB_SYNTAX = re.compile(r'"|\bOR\b|(^|\s)-\w')


def ef_search_for(top_k: int, index_rows: float = 0) -> int:
    """The candidate list for a search of top_k in an HNSW index of index_rows vectors
    (every knowledge base of the dimension shares it)."""
    base = next((ef for rows, ef in HNSW_EF_SEARCH_BY_SIZE if index_rows <= rows), HNSW_EF_SEARCH_LARGEST)
    return min(1000, max(base, top_k * 4))


def exact_vector_scan(kb_chunks: int) -> bool:
    return kb_chunks <= VECTOR_EXACT_MAX


def web_query(query: str) -> Optional[TextQuery]:
    """A question in web-search syntax ("phrase", OR, -word) is held to it: only the
    chunks it matches are ranked. Any other question is a bag of words for BM25."""
    return TextQuery("websearch_to_tsquery", query) if _WEB_SYNTAX.search(query) else None


def bm25_query(stats: TermStatistics, terms: list[str], top_k: int) -> Bm25Query:
    """The first pass: the question's terms that occur in the knowledge bases, weighted
    by BM25's inverse document frequency (Lucene's, never negative), the KEYWORD_TERMS_MAX
    rarest when a long question has more; each term's KEYWORD_PER_TERM postings of
    highest impact."""
    n = stats.chunks
    idf = {t: math.log(1 + (n - df + 0.5) / (df + 0.5)) for t, df in stats.document_frequency.items()}
    kept = sorted((t for t in dict.fromkeys(terms) if t in idf), key=lambda t: -idf[t])[:KEYWORD_TERMS_MAX]
    per_term = max(KEYWORD_PER_TERM, 2 * top_k)
    return Bm25Query(terms=tuple(kept), idfs=tuple(idf[t] for t in kept),
                     average_length=stats.length / n if n else 1.0, k1=BM25_K1, b=BM25_B,
                     limits=tuple(per_term for _ in kept), rescored=max(3 * top_k, KEYWORD_RESCORED))


def bm25_exact_pass(first: Bm25Query, stats: TermStatistics, found: list[float],
                    top_k: int) -> Optional[Bm25Query]:
    """The second pass that makes the first one's top_k exact (MaxScore), None when the
    first pass was exact already.

    `found`: the first pass's exact scores, best first. Its top_k-th is a floor: a chunk
    that beats it must hold at least one term outside the largest set of terms whose
    bounds (idf x Bm25Query.bound) sum below the floor. Those "essential"
    terms' postings are read whole, and only candidates whose essential postings plus the
    other terms' bounds reach the floor are scored. The stop rule: when the essential
    terms hold more than KEYWORD_POSTINGS_MAX postings, the first pass's answer stands
    (at a million chunks a question's common words hold hundreds of thousands; reading
    20,000 of them by impact bought little for its 50 ms)."""
    if len(found) < top_k:  # every candidate there is was read (or, filtered, scored by the full scan)
        return None
    floor = found[top_k - 1]
    bound = {t: idf * first.bound(stats, t) for t, idf in zip(first.terms, first.idfs)}
    optional, rest = set(), 0.0
    for t in sorted(first.terms, key=lambda t: bound[t]):
        if rest + bound[t] >= floor:
            break
        optional.add(t)
        rest += bound[t]
    essential = [t for t in first.terms if t not in optional]
    df = stats.document_frequency
    if all(df[t] <= n for t, n in zip(first.terms, first.limits) if t in essential):
        return None  # every posting that could matter was read
    if sum(df[t] for t in essential) > KEYWORD_POSTINGS_MAX:
        return None  # the stop rule: more than a search may read; the first pass's answer stands
    limits = tuple(0 if t in optional else df[t] for t in first.terms)
    return Bm25Query(terms=first.terms, idfs=first.idfs, average_length=first.average_length, k1=first.k1,
                     b=first.b, limits=limits, rescored=max(3 * top_k, KEYWORD_RESCORED_EXACT),
                     prune_below=floor - rest)
