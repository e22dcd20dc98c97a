"""chunks: a document's passages with their embeddings, and the two searches over
them. Vectors travel in pgvector's binary format (register_vector on connection
open, %b placeholders). The search policy (which tsquery, how wide the HNSW
candidate list) is the caller's: chalicelib.retrieval decides it."""
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, NamedTuple, Optional, Protocol, Sequence

import numpy as np
import psycopg

from chalicelib.records import Chunk, StepClock
from chalicelib.storage import chunk_versions
from chalicelib.storage.filters import SearchFilters, filter_sql
from chalicelib.storage.scope import READABLE_CHUNK, VISIBLE_KB, scope


class KeywordQuery(Protocol):
    """A question as BM25 scores it (retrieval/bm25.py's Bm25Query, which owns the formula):
    its terms, the SQL of its term-frequency factor and that SQL's parameters."""
    terms: tuple[str, ...]

    def sql_saturation(self, tf: str, dl: str) -> str: ...

    def sql_params(self) -> dict: ...


@dataclass(frozen=True)
class TextQuery:
    """A full-text query: the PostgreSQL parser and the text it parses."""
    parser: Literal["to_tsquery", "websearch_to_tsquery"]
    text: str

    def __post_init__(self):
        if self.parser not in ("to_tsquery", "websearch_to_tsquery"):  # it is spliced into the SQL
            raise ValueError(f"unknown tsquery parser {self.parser!r}")


def as_vector(values: Sequence[float]) -> np.ndarray:
    return np.asarray(values, dtype=np.float32)


def replace_document_chunks(conn: psycopg.Connection, *, doc_id: str, kb_id: str, dim: int,
                            chunks: list[Chunk], page_count: Optional[int],
                            run_id: Optional[str] = None, content_hash: Optional[str] = None,
                            note: Optional[str] = None, clock: Optional[StepClock] = None) -> bool:
    """Swap a document's chunks and mark it PROCESSED, so a search sees the old version
    or the new one, never a mix or a gap (in committed batches and one short switch:
    chunk_versions.py). Returns False (and changes nothing) when a newer run owns the
    document. note: why it has no chunks; clock: the step whose time PROCESSED carries."""
    return chunk_versions.replace(conn, doc_id=doc_id, kb_id=kb_id, dim=dim, chunks=chunks, page_count=page_count,
                                  run_id=run_id, content_hash=content_hash, note=note, clock=clock)


_INDEX_ROWS: dict[int, tuple[float, float]] = {}  # dim -> (rows, when read)


def vector_index_rows(conn: psycopg.Connection, dim: int, max_age: float = 300.0) -> float:
    """About how many vectors the HNSW index of this dimension holds (the planner's
    estimate, kept by ANALYZE and autovacuum), read at most every max_age seconds."""
    rows, at = _INDEX_ROWS.get(dim, (0.0, -max_age))
    if time.monotonic() - at >= max_age:
        found = conn.execute("SELECT reltuples FROM pg_class WHERE relname = %s",
                             (f"chunks_embedding_{int(dim)}_hnsw",)).fetchone()
        rows = max(0.0, float(found["reltuples"])) if found else 0.0
        _INDEX_ROWS[dim] = (rows, time.monotonic())
    return rows


# Who uploaded a document is shown to readers of its knowledge base's organisation only
# (another organisation reads a public knowledge base without its users' ids).
RESULT_COLUMNS = """c.id AS chunk_id, c.kb_id, c.content, c.chunk_index, c.page, c.headers,
    c.metadata, c.document_id, c.token_count, c.title, d.filename, d.path, d.kind,
    coalesce(d.processed_at, d.updated_at) AS indexed_at, d.size_bytes, d.created_at AS uploaded_at,
    CASE WHEN kb.org_id = %(org_id)s THEN d.created_by END AS uploaded_by, d.chunk_count AS total_chunks"""


class Hit(NamedTuple):
    """A chunk a search found, from its row (RESULT_COLUMNS and a score) to the passage it
    becomes. Each score field keeps one meaning from SQL to the view: `vector` the cosine,
    `bm25` BM25 as SQL or bm25.top computed it, `keyword` that as a share of the most a chunk
    could score, `fused` hybrid's fusion of both lists, `rerank` the reranker's relevance.
    Retrieval fills them in with _replace as it learns them; `ranking_score` names the one
    the hit's list is ordered by.

    A NamedTuple rather than a frozen dataclass for the copies: a hybrid search makes about
    150, and dataclasses.replace costs several times what _replace does."""
    chunk_id: int
    kb_id: str
    content: str
    chunk_index: int
    page: Optional[int]
    headers: list
    metadata: dict
    document_id: str
    title: Optional[str]  # an entry's
    filename: str
    path: Optional[str]
    kind: str
    indexed_at: Optional[datetime]
    tokens: Optional[int]  # counted when the chunk was cut; None once the content changes
    vector: Optional[float] = None  # cosine similarity to the question
    bm25: Optional[float] = None  # BM25 (retrieval/bm25.py), unscaled
    keyword: Optional[float] = None  # BM25 as a share of the most a chunk could score
    fused: Optional[float] = None  # hybrid's fusion of both lists
    rerank: Optional[float] = None  # the reranker's relevance
    span: Optional[tuple] = None  # (first, last) chunk index of the parent it answers with (retrieval/parents.py)
    # The document's: its size in bytes, when and by whom it was first added (None outside
    # the knowledge base's organisation), its chunks.
    size: Optional[int] = None
    uploaded_at: Optional[datetime] = None
    uploaded_by: Optional[str] = None
    total_chunks: Optional[int] = None

    @property
    def ranking_score(self) -> float:
        """The score the hit's list is ordered by: hybrid's fused score once fused, else the
        keyword list's share of the best, else the cosine, else (straight from SQL) BM25."""
        for score in (self.fused, self.keyword, self.vector, self.bm25):
            if score is not None:
                return score
        return 0.0

    @classmethod
    def of(cls, row: dict, cosine: bool = False) -> "Hit":
        """The hit of a search's row; `cosine`: its score is the cosine similarity, else BM25."""
        score = float(row["score"])
        return cls(chunk_id=row["chunk_id"], kb_id=row["kb_id"], content=row["content"],
                   chunk_index=row["chunk_index"], page=row["page"], headers=row["headers"],
                   metadata=row["metadata"], document_id=row["document_id"], title=row["title"],
                   filename=row["filename"], path=row["path"], kind=row["kind"], indexed_at=row["indexed_at"],
                   tokens=row["token_count"], vector=score if cosine else None, bm25=None if cosine else score,
                   size=row["size_bytes"], uploaded_at=row["uploaded_at"], uploaded_by=row["uploaded_by"],
                   total_chunks=row["total_chunks"])


# A chunk read by itself: the search's columns and where it sits in its document's text.
CHUNK_COLUMNS = f"{RESULT_COLUMNS}, c.start_char, c.end_char"


def get_readable(conn: psycopg.Connection, principal, kb_id: str, chunk_id: int) -> Optional[dict]:
    """One chunk of the knowledge base's current version, if the caller may read it."""
    return conn.execute(
        f"""SELECT {CHUNK_COLUMNS}
              FROM chunks c
              JOIN documents d ON d.id = c.document_id
              JOIN knowledge_bases kb ON kb.id = c.kb_id
             WHERE c.id = %(chunk_id)s AND c.kb_id = %(kb_id)s AND {VISIBLE_KB} AND {READABLE_CHUNK}
               AND {chunk_versions.CURRENT_CHUNK}""",
        scope(principal, kb_id=kb_id, kb_ids=[kb_id], chunk_id=chunk_id)).fetchone()


# Each child's neighbours of its own section read through (document_id, version, chunk_index)
# with the index range as the index condition. As a plain join the planner, expecting a row or
# two a document, kept the range as a filter and read every chunk of the child's document: 195 ms
# a search whose hits lay in a document of 10,000 chunks, 2.6 ms this way (OFFSET 0 keeps the
# subquery apart). The section is compared here, so no row of another section is sent.
NEIGHBOURS = """SELECT w.child, n.chunk_index, n.content, n.token_count
                  FROM unnest(%(children)s::bigint[], %(reaches)s::int[]) AS w(child, reach)
                  JOIN chunks c ON c.id = w.child AND c.kb_id = ANY(%(kb_ids)s)
                 CROSS JOIN LATERAL (
                       SELECT n.chunk_index, n.content, n.token_count FROM chunks n
                        WHERE n.document_id = c.document_id AND n.version = c.version AND n.kb_id = c.kb_id
                          AND n.chunk_index BETWEEN c.chunk_index - w.reach AND c.chunk_index + w.reach
                          AND n.headers IS NOT DISTINCT FROM c.headers
                       OFFSET 0) n"""


def neighbours(conn: psycopg.Connection, children: list[int], reaches: list[int], kb_ids: list[str]) -> list[dict]:
    """For each child chunk, the chunks of its document's version and its section within `reach`
    of its index (itself included): rows of child, chunk_index, content, token_count."""
    return conn.execute(NEIGHBOURS, {"children": children, "reaches": reaches, "kb_ids": kb_ids}).fetchall()


def document_page(conn: psycopg.Connection, principal, kb_id: str, doc_id: str, *, after: int,
                  limit: int) -> list[dict]:
    """Up to limit chunks of the document's current version after chunk_index `after`, in
    order, that the caller may read (the document's own rules: storage/documents.get_in).
    The version the document names, so the (document_id, version, chunk_index) index serves
    the order without a sort."""
    return conn.execute(
        f"""SELECT {CHUNK_COLUMNS}
              FROM documents d
              JOIN chunks c ON c.document_id = d.id AND c.version = d.chunks_version
              JOIN knowledge_bases kb ON kb.id = c.kb_id
             WHERE d.id = %(doc_id)s AND d.kb_id = %(kb_id)s AND {VISIBLE_KB} AND {READABLE_CHUNK}
               AND c.chunk_index > %(after)s
             ORDER BY c.chunk_index
             LIMIT %(limit)s""",
        scope(principal, kb_id=kb_id, doc_id=doc_id, after=after, limit=limit)).fetchall()


def semantic_search(conn: psycopg.Connection, principal, *, kb_ids: list[str], dim: int,
                    query_vector: Sequence[float], top_k: int, ef_search: int,
                    filters: SearchFilters = SearchFilters(), exact: bool = False) -> list[Hit]:
    """Cosine search through the HNSW index of this dimension, scoped to what the
    caller may see. The index serves every knowledge base of the dimension and the
    filters apply to what it returns, so the scan goes on past ef_search until top_k
    rows pass them (pgvector 0.8's iterative scan, up to hnsw.max_scan_tuples, 20,000);
    a still short answer is topped up by an exact scan. `exact`: the exact scan alone
    (knowledge bases small enough that it costs less than walking the graph)."""
    params = scope(principal, kb_ids=list(kb_ids), dim=dim, q=as_vector(query_vector), k=top_k)
    where = filter_sql(filters, params)
    distance = f"c.embedding::vector({dim}) <=> %(q)b::vector({dim})"
    # The nearest chunks come from a single-table scan the planner serves from the
    # HNSW index; joins and the tenant check wrap it (inside, they make the
    # planner under-estimate the rows and sort the whole knowledge base instead).
    sql = f"""
        SELECT {RESULT_COLUMNS}, 1 - c.distance AS score
          FROM (SELECT c.*, {distance} AS distance
                  FROM chunks c
                 WHERE c.kb_id = ANY(%(kb_ids)s) AND c.embedding_dim = %(dim)s AND {READABLE_CHUNK}
                   AND {chunk_versions.CURRENT_CHUNK}{where}
                 ORDER BY {{order}}
                 LIMIT %(k)s) c
          JOIN documents d ON d.id = c.document_id
          JOIN knowledge_bases kb ON kb.id = c.kb_id
         WHERE {VISIBLE_KB}
         ORDER BY c.distance, c.id"""
    exact_order = f"({distance}) + 0"
    if exact:
        return [Hit.of(r, cosine=True) for r in conn.execute(sql.format(order=exact_order), params).fetchall()]
    with conn.transaction():
        conn.execute("SET LOCAL hnsw.ef_search = %s" % int(ef_search))
        # relaxed_order: the few rows out of order are put back in order outside.
        conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        # The graph, not a sort of the knowledge base's rows: pgvector's cost estimate
        # grows with m, and for graphs of m 24 (migration 0013) the planner sorted all of
        # a 10,000-chunk knowledge base instead, many times slower.
        conn.execute("SET LOCAL enable_sort = off")
        rows = conn.execute(sql.format(order=distance), params).fetchall()
        if len(rows) < top_k:
            # "+ 0" hides the expression from the HNSW index: an exact scan of the
            # knowledge base's own rows (found through chunks_kb_idx).
            rows = conn.execute(sql.format(order=exact_order), params).fetchall()
    return [Hit.of(r, cosine=True) for r in rows]


def keyword_rows(conn: psycopg.Connection, principal, *, kb_ids: list[str], ranked: Sequence[tuple[int, float]],
                 top_k: int, filters: SearchFilters = SearchFilters()) -> list[Hit]:
    """BM25's ranked chunks (id, score), best first, that the caller may read and the
    filters keep, at most top_k; `score` is BM25's."""
    if not ranked:
        return []
    params = scope(principal, kb_ids=list(kb_ids), k=top_k, ids=[int(i) for i, _ in ranked],
                   scores=[float(s) for _, s in ranked])
    where = filter_sql(filters, params)
    # The candidates' rows by primary key, apart from the other joins: with them (and the
    # policies' conditions) in one query, the planner walked all of chunks as kb_app (1.3 s
    # at a million chunks instead of a few ms).
    return [Hit.of(r) for r in conn.execute(f"""
        WITH ranked AS MATERIALIZED (
            SELECT c.*, r.score
              FROM unnest(%(ids)s::bigint[], %(scores)s::float8[]) r(id, score)
              JOIN chunks c ON c.id = r.id)
        SELECT {RESULT_COLUMNS}, c.score
          FROM ranked c
          JOIN documents d ON d.id = c.document_id
          JOIN knowledge_bases kb ON kb.id = c.kb_id
         WHERE c.kb_id = ANY(%(kb_ids)s) AND {VISIBLE_KB} AND {READABLE_CHUNK}
           AND {chunk_versions.CURRENT_CHUNK}{where}
         ORDER BY c.score DESC, c.id
         LIMIT %(k)s""", params).fetchall()]


def keyword_matches(conn: psycopg.Connection, principal, *, kb_ids: list[str], query: KeywordQuery, top_k: int,
                    match: Optional[TextQuery] = None, filters: SearchFilters = SearchFilters()) -> list[Hit]:
    """BM25 over every chunk the match (web-search syntax: phrases, OR, -word; else any of
    the query's terms) finds through the GIN index, that the caller may read and the
    filters keep: exact for any filter, and as slow as the matches are many."""
    if not query.terms:
        return []
    params = scope(principal, kb_ids=list(kb_ids), k=top_k, **query.sql_params())
    where = filter_sql(filters, params)
    if match is not None:
        params["tsquery"] = match.text
        matches = f"{match.parser}('english', %(tsquery)s)"
    else:  # any of the terms, taken as they are (they are stemmed already)
        matches = "(SELECT string_agg(quote_literal(term), ' | ') FROM q)::tsquery"
    # Ranked in a single-table scan of the GIN matches: with the joins inside, the
    # planner under-estimates the matches and walks the whole table in document order.
    # Through the chunks_visible view, so the GIN index serves under row-level security
    # (migration 0010).
    return [Hit.of(r) for r in conn.execute(
        f"""WITH q(term, idf) AS (SELECT * FROM unnest(%(terms)s::text[], %(idfs)s::float8[]))
            SELECT {RESULT_COLUMNS}, c.score
              FROM (SELECT c.*, s.score
                      FROM chunks_visible c, (SELECT {matches} AS tq) m,
                           LATERAL (SELECT sum(t.tf) AS dl FROM kb_bm25_terms(c.tsv) t) l,
                           LATERAL (SELECT coalesce(sum(q.idf * {query.sql_saturation("t.tf", "l.dl")}), 0) AS score
                                      FROM kb_bm25_terms(c.tsv) t JOIN q ON q.term = t.term) s
                     WHERE c.kb_id = ANY(%(kb_ids)s) AND {READABLE_CHUNK} AND {chunk_versions.CURRENT_CHUNK}
                       AND c.tsv @@ m.tq{where}
                     ORDER BY s.score DESC, c.id
                     LIMIT %(k)s) c
              JOIN documents d ON d.id = c.document_id
              JOIN knowledge_bases kb ON kb.id = c.kb_id
             WHERE {VISIBLE_KB}
             ORDER BY c.score DESC, c.id""",
        params,
    ).fetchall()]


def similarities(conn: psycopg.Connection, chunk_ids: list[int], query_vector: Sequence[float],
                 dim: int) -> dict[int, float]:
    """The cosine similarity of each of these chunks (found by a search, so readable) to the query."""
    rows = conn.execute(f"SELECT id, 1 - (embedding::vector({int(dim)}) <=> %s::vector({int(dim)})) AS similarity"
                        " FROM chunks WHERE id = ANY(%s) AND embedding_dim = %s",
                        (as_vector(query_vector), chunk_ids, dim)).fetchall()
    return {r["id"]: r["similarity"] for r in rows}
