"""Every SQL statement of the service.

Tenant scoping lives here: a caller reaches a knowledge base only through
VISIBLE_KB, so another tenant's rows never leave the database.
"""
import json
import re
from typing import Iterable, Optional

import psycopg

from chalicelib.ids import new_id

# A knowledge base is visible to its owner, to its organisation when shared with
# it, and to everyone when public.
VISIBLE_KB = """(kb.owner_id = %(user_id)s
     OR (kb.visibility = 'org' AND kb.org_id = %(org_id)s)
     OR kb.visibility = 'public')"""
WRITABLE_KB = """(kb.owner_id = %(user_id)s
     OR (kb.visibility = 'org' AND kb.org_id = %(org_id)s))"""

KB_COLUMNS = """kb.id, kb.org_id, kb.owner_id, kb.name, kb.description, kb.visibility,
    kb.embedding_provider, kb.embedding_model, kb.embedding_dim, kb.chunk_tokens,
    kb.chunk_overlap, kb.created_at, kb.updated_at"""

KB_STATS = """(SELECT json_build_object(
        'documentCount', count(*),
        'chunkCount', coalesce(sum(d.chunk_count), 0),
        'totalTokens', coalesce(sum(d.token_count), 0),
        'byStatus', json_build_object(
            'PENDING', count(*) FILTER (WHERE d.status = 'PENDING'),
            'PROCESSING', count(*) FILTER (WHERE d.status = 'PROCESSING'),
            'PROCESSED', count(*) FILTER (WHERE d.status = 'PROCESSED'),
            'FAILED', count(*) FILTER (WHERE d.status = 'FAILED')),
        'lastIngestedAt', max(d.processed_at))
     FROM documents d WHERE d.kb_id = kb.id) AS stats"""

DOC_COLUMNS = """id, kb_id, s3_key, filename, content_type, size_bytes, content_hash, status,
    error_code, error_message, page_count, chunk_count, token_count, metadata,
    step_durations, created_at, updated_at, processed_at, indexed_hash, current_run_id, kind, title"""


def _scope(principal, **params) -> dict:
    return {"user_id": principal.user_id, "org_id": principal.org_id, **params}


# --- tenants and keys -------------------------------------------------------

def ensure_organization(conn: psycopg.Connection, name: str) -> str:
    row = conn.execute(
        "INSERT INTO organizations (id, name) VALUES (%s, %s)"
        " ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name RETURNING id",
        (new_id("org"), name),
    ).fetchone()
    return row["id"]


def ensure_user(conn: psycopg.Connection, org_id: str, name: str) -> str:
    row = conn.execute(
        "INSERT INTO users (id, org_id, name) VALUES (%s, %s, %s)"
        " ON CONFLICT (org_id, name) DO UPDATE SET name = EXCLUDED.name RETURNING id",
        (new_id("user"), org_id, name),
    ).fetchone()
    return row["id"]


def insert_api_key(conn: psycopg.Connection, user_id: str, key_hash: str, key_prefix: str) -> str:
    key_id = new_id("key")
    conn.execute(
        "INSERT INTO api_keys (id, user_id, key_hash, key_prefix) VALUES (%s, %s, %s, %s)",
        (key_id, user_id, key_hash, key_prefix),
    )
    return key_id


def find_principal(conn: psycopg.Connection, key_hash: str) -> Optional[dict]:
    return conn.execute(
        "SELECT u.id AS user_id, u.org_id, k.id AS key_id FROM api_keys k"
        " JOIN users u ON u.id = k.user_id"
        " WHERE k.key_hash = %s AND k.revoked_at IS NULL",
        (key_hash,),
    ).fetchone()


# --- knowledge bases --------------------------------------------------------

def insert_knowledge_base(conn: psycopg.Connection, principal, *, name: str, description: str,
                          visibility: str, provider: str, model: str, dim: int,
                          chunk_tokens: int, chunk_overlap: int) -> str:
    kb_id = new_id("kb")
    conn.execute(
        "INSERT INTO knowledge_bases (id, org_id, owner_id, name, description, visibility,"
        " embedding_provider, embedding_model, embedding_dim, chunk_tokens, chunk_overlap)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
        (kb_id, principal.org_id, principal.user_id, name, description, visibility,
         provider, model, dim, chunk_tokens, chunk_overlap),
    )
    return kb_id


def ensure_vector_index(conn: psycopg.Connection, dim: int) -> None:
    """An HNSW index for chunks of this dimension (partial, over a cast expression)."""
    if not isinstance(dim, int) or not 0 < dim <= 2000:  # HNSW's limit for vector
        raise ValueError(f"embedding.model: dimension {dim} cannot be indexed with HNSW (max 2000)")
    conn.execute(
        f"CREATE INDEX IF NOT EXISTS chunks_embedding_{dim}_hnsw ON chunks"
        f" USING hnsw ((embedding::vector({dim})) vector_cosine_ops) WHERE embedding_dim = {dim}")


def get_visible_knowledge_base(conn: psycopg.Connection, principal, kb_id: str) -> Optional[dict]:
    return conn.execute(
        f"SELECT {KB_COLUMNS}, {KB_STATS} FROM knowledge_bases kb"
        f" WHERE kb.id = %(kb_id)s AND {VISIBLE_KB}",
        _scope(principal, kb_id=kb_id),
    ).fetchone()


def list_visible_knowledge_bases(conn: psycopg.Connection, principal, *, limit: int,
                                 after: Optional[str]) -> list[dict]:
    return conn.execute(
        f"SELECT {KB_COLUMNS}, {KB_STATS} FROM knowledge_bases kb"
        f" WHERE {VISIBLE_KB} AND (%(after)s::text IS NULL OR kb.id > %(after)s)"
        " ORDER BY kb.id LIMIT %(limit)s",
        _scope(principal, limit=limit, after=after),
    ).fetchall()


def update_knowledge_base(conn: psycopg.Connection, principal, kb_id: str, changes: dict) -> bool:
    """Apply name/description/visibility changes; False when the caller may not write it."""
    allowed = {k: v for k, v in changes.items() if k in ("name", "description", "visibility")}
    if not allowed:
        return conn.execute(f"SELECT 1 FROM knowledge_bases kb WHERE kb.id = %(kb_id)s AND {WRITABLE_KB}",
                            _scope(principal, kb_id=kb_id)).fetchone() is not None
    sets = ", ".join(f"{column} = %({column})s" for column in allowed)
    return conn.execute(
        f"UPDATE knowledge_bases kb SET {sets}, updated_at = now() WHERE kb.id = %(kb_id)s AND {WRITABLE_KB}",
        _scope(principal, kb_id=kb_id, **allowed),
    ).rowcount == 1


def delete_knowledge_base(conn: psycopg.Connection, principal, kb_id: str) -> bool:
    """Deletes it with its documents and chunks (ON DELETE CASCADE)."""
    return conn.execute(
        f"DELETE FROM knowledge_bases kb WHERE kb.id = %(kb_id)s AND {WRITABLE_KB}",
        _scope(principal, kb_id=kb_id),
    ).rowcount == 1


def get_writable_knowledge_base(conn: psycopg.Connection, principal, kb_id: str) -> Optional[dict]:
    return conn.execute(
        f"SELECT {KB_COLUMNS} FROM knowledge_bases kb WHERE kb.id = %(kb_id)s AND {WRITABLE_KB}",
        _scope(principal, kb_id=kb_id),
    ).fetchone()


def get_knowledge_base_for_pipeline(conn: psycopg.Connection, kb_id: str) -> Optional[dict]:
    """Unscoped read for the ingestion pipeline, which acts for whoever may write the bucket."""
    return conn.execute(
        f"SELECT {KB_COLUMNS} FROM knowledge_bases kb WHERE kb.id = %s", (kb_id,)
    ).fetchone()


# --- documents --------------------------------------------------------------

def upsert_pending_document(conn: psycopg.Connection, *, kb_id: str, s3_key: str, filename: str,
                            size_bytes: Optional[int], run_id: Optional[str] = None) -> dict:
    """The document for an S3 key, now PENDING and owned by run_id. Its chunks stay
    searchable until a run replaces them."""
    return conn.execute(
        "INSERT INTO documents (id, kb_id, s3_key, filename, size_bytes, current_run_id)"
        " VALUES (%s, %s, %s, %s, %s, %s)"
        " ON CONFLICT (kb_id, s3_key) DO UPDATE SET status = 'PENDING', size_bytes = EXCLUDED.size_bytes,"
        "   current_run_id = EXCLUDED.current_run_id, error_code = NULL, error_message = NULL,"
        "   updated_at = now()"
        f" RETURNING {DOC_COLUMNS}",
        (new_id("doc"), kb_id, s3_key, filename, size_bytes, run_id),
    ).fetchone()


def find_document_by_key(conn: psycopg.Connection, kb_id: str, s3_key: str) -> Optional[dict]:
    return conn.execute(f"SELECT {DOC_COLUMNS} FROM documents WHERE kb_id = %s AND s3_key = %s",
                        (kb_id, s3_key)).fetchone()


def get_document_in(conn: psycopg.Connection, kb_id: str, doc_id: str) -> Optional[dict]:
    """A document of this knowledge base (the caller's access to the knowledge base is checked first)."""
    return conn.execute(f"SELECT {DOC_COLUMNS} FROM documents WHERE id = %s AND kb_id = %s",
                        (doc_id, kb_id)).fetchone()


def forget_indexed_version(conn: psycopg.Connection, doc_id: str) -> None:
    conn.execute("UPDATE documents SET indexed_hash = NULL WHERE id = %s", (doc_id,))


def delete_document(conn: psycopg.Connection, doc_id: str) -> None:
    conn.execute("DELETE FROM documents WHERE id = %s", (doc_id,))


def insert_entry(conn: psycopg.Connection, *, entry_id: str, kb_id: str, title: str, user_id: str,
                 metadata: dict, size_bytes: int) -> None:
    conn.execute(
        "INSERT INTO documents (id, kb_id, s3_key, filename, title, kind, created_by, metadata,"
        " content_type, size_bytes, status) VALUES (%s, %s, %s, %s, %s, 'entry', %s, %s, 'text/plain', %s,"
        " 'PROCESSING')",
        (entry_id, kb_id, f"entries/{entry_id}", title[:200], title, user_id, json.dumps(metadata), size_bytes),
    )


def knowledge_bases_with_entries_by(conn: psycopg.Connection, principal) -> list[str]:
    return [r["id"] for r in conn.execute(
        f"SELECT DISTINCT kb.id FROM knowledge_bases kb JOIN documents d ON d.kb_id = kb.id"
        f" WHERE d.kind = 'entry' AND d.created_by = %(user_id)s AND {VISIBLE_KB}",
        _scope(principal),
    ).fetchall()]


def get_document(conn: psycopg.Connection, doc_id: str) -> Optional[dict]:
    return conn.execute(f"SELECT {DOC_COLUMNS} FROM documents WHERE id = %s", (doc_id,)).fetchone()


def list_documents(conn: psycopg.Connection, kb_id: str, status: Optional[str]) -> list[dict]:
    return conn.execute(
        f"SELECT {DOC_COLUMNS} FROM documents WHERE kb_id = %s"
        " AND (%s::text IS NULL OR status = %s) ORDER BY created_at, id",
        (kb_id, status, status),
    ).fetchall()


def set_document_execution(conn: psycopg.Connection, doc_id: str, execution_arn: str) -> None:
    conn.execute("UPDATE documents SET execution_arn = %s WHERE id = %s", (execution_arn, doc_id))


def mark_document_processing(conn: psycopg.Connection, doc_id: str, run_id: str, *,
                             content_hash: str, size_bytes: int, metadata: dict) -> bool:
    """False when a newer run owns the document."""
    return conn.execute(
        "UPDATE documents SET status = 'PROCESSING', content_hash = %s, size_bytes = %s,"
        " metadata = %s, error_code = NULL, error_message = NULL, updated_at = now()"
        " WHERE id = %s AND current_run_id = %s",
        (content_hash, size_bytes, json.dumps(metadata), doc_id, run_id),
    ).rowcount == 1


def set_document_content_type(conn: psycopg.Connection, doc_id: str, content_type: str) -> None:
    conn.execute("UPDATE documents SET content_type = %s WHERE id = %s", (content_type, doc_id))


def mark_document_unchanged(conn: psycopg.Connection, doc_id: str, run_id: str, metadata: dict) -> bool:
    """The bytes are the ones already indexed: no new embedding work. Changed
    metadata is copied onto the chunks in the same transaction."""
    with conn.transaction():
        updated = conn.execute(
            "UPDATE documents SET status = 'PROCESSED', error_code = NULL, error_message = NULL,"
            " metadata = %s, updated_at = now() WHERE id = %s AND current_run_id = %s",
            (json.dumps(metadata), doc_id, run_id)).rowcount == 1
        if updated:
            conn.execute("UPDATE chunks SET metadata = %s WHERE document_id = %s AND metadata <> %s::jsonb",
                         (json.dumps(metadata), doc_id, json.dumps(metadata)))
    return updated


def record_step_duration(conn: psycopg.Connection, doc_id: str, step: str, millis: int) -> None:
    conn.execute(
        "UPDATE documents SET step_durations = step_durations || jsonb_build_object(%s::text, %s::int)"
        " WHERE id = %s",
        (step, millis, doc_id),
    )


def mark_document_failed(conn: psycopg.Connection, doc_id: str, run_id: str, code: str,
                         message: str) -> bool:
    """FAILED with a code; the chunks of the last good version stay searchable."""
    return conn.execute(
        "UPDATE documents SET status = 'FAILED', error_code = %s, error_message = %s,"
        " updated_at = now() WHERE id = %s AND current_run_id = %s",
        (code, message[:2000], doc_id, run_id),
    ).rowcount == 1


def unfinished_documents(conn: psycopg.Connection, min_age_seconds: int) -> list[dict]:
    return conn.execute(
        "SELECT id, execution_arn, current_run_id FROM documents"
        " WHERE status IN ('PENDING', 'PROCESSING') AND execution_arn IS NOT NULL"
        " AND updated_at < now() - make_interval(secs => %s) ORDER BY updated_at LIMIT 500",
        (min_age_seconds,),
    ).fetchall()


def delete_document_by_key(conn: psycopg.Connection, kb_id: str, s3_key: str) -> int:
    return conn.execute(
        "DELETE FROM documents WHERE kb_id = %s AND s3_key = %s", (kb_id, s3_key)
    ).rowcount


# --- chunks -----------------------------------------------------------------

def vector_literal(vector: Iterable[float]) -> str:
    return "[" + ",".join(f"{float(x):.7g}" for x in vector) + "]"


def replace_document_chunks(conn: psycopg.Connection, *, doc_id: str, kb_id: str, dim: int,
                            chunks: list[dict], page_count: Optional[int],
                            run_id: Optional[str] = None, content_hash: Optional[str] = None) -> bool:
    """Swap a document's chunks and mark it PROCESSED in one transaction, so a
    search sees the old version or the new one, never a mix or a gap. Returns
    False (and changes nothing) when a newer run owns the document."""
    with conn.transaction():
        conn.execute("SET LOCAL lock_timeout = '5s'")
        owner = conn.execute("SELECT current_run_id FROM documents WHERE id = %s FOR UPDATE",
                             (doc_id,)).fetchone()
        if owner is None or (run_id is not None and owner["current_run_id"] != run_id):
            return False
        conn.execute("DELETE FROM chunks WHERE document_id = %s", (doc_id,))
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO chunks (document_id, kb_id, chunk_index, content, page, headers,"
                " start_char, end_char, token_count, metadata, embedding_dim, embedding, title)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s::vector, %s)",
                [(doc_id, kb_id, c["chunkIndex"], c["content"], c.get("page"),
                  json.dumps(c.get("headers", [])), c["startChar"], c["endChar"],
                  c["tokenCount"], json.dumps(c.get("metadata", {})), dim,
                  vector_literal(c["embedding"]), c.get("title")) for c in chunks],
            )
        conn.execute(
            "UPDATE documents SET status = 'PROCESSED', chunk_count = %s, token_count = %s,"
            " page_count = %s, indexed_hash = coalesce(%s, content_hash), error_code = NULL,"
            " error_message = NULL, processed_at = now(), updated_at = now() WHERE id = %s",
            (len(chunks), sum(c["tokenCount"] for c in chunks), page_count, content_hash, doc_id),
        )
    return True


CHUNK_RESULT_COLUMNS = """c.id AS chunk_id, c.kb_id, c.content, c.chunk_index, c.page, c.headers,
    c.metadata, c.document_id, c.token_count, c.title, d.filename, d.kind,
    coalesce(d.processed_at, d.updated_at) AS indexed_at"""


def _like_pattern(glob: str) -> str:
    escaped = glob.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped.replace("*", "%")


def _filter_sql(filters: dict, params: dict) -> str:
    """SQL conditions on the chunks table alone (c) for the search filters, so the
    vector search can stay a single-table index scan; values travel as parameters."""
    clauses = []
    if filters.get("filename"):
        params["f_filename"] = _like_pattern(filters["filename"])
        clauses.append("c.document_id IN (SELECT f.id FROM documents f WHERE f.kb_id = ANY(%(kb_ids)s)"
                       " AND f.filename LIKE %(f_filename)s)")
    if filters.get("documentIds"):
        params["f_documents"] = list(filters["documentIds"])
        clauses.append("c.document_id = ANY(%(f_documents)s)")
    if filters.get("tags"):
        params["f_tags"] = list(filters["tags"])
        clauses.append("((jsonb_typeof(c.metadata->'tags') = 'array' AND c.metadata->'tags' ?| %(f_tags)s)"
                       " OR c.metadata->>'tags' = ANY(%(f_tags)s))")
    if filters.get("metadata"):
        params["f_metadata"] = json.dumps(filters["metadata"])
        clauses.append("c.metadata @> %(f_metadata)s::jsonb")
    if filters.get("entriesBy"):  # internal: the entries one user wrote
        params["f_entries_by"] = filters["entriesBy"]
        clauses.append("c.document_id IN (SELECT f.id FROM documents f WHERE f.kb_id = ANY(%(kb_ids)s)"
                       " AND f.kind = 'entry' AND f.created_by = %(f_entries_by)s)")
    return "".join(f" AND {clause}" for clause in clauses)


# HNSW's candidate list: 40 (pgvector's default) lost a quarter of the true top 10
# at 100k chunks in bench/retrieval.py; 200 kept 94% of it, for about 4 ms more a query.
HNSW_EF_SEARCH_MIN = 200


def ef_search_for(top_k: int) -> int:
    return min(1000, max(HNSW_EF_SEARCH_MIN, top_k * 4))


def semantic_search(conn: psycopg.Connection, principal, *, kb_ids: list[str], dim: int,
                    query_vector: list[float], top_k: int, filters: Optional[dict] = None) -> list[dict]:
    """Cosine search through the HNSW index of this dimension, scoped to what the
    caller may see. HNSW filters after the scan (pgvector 0.6 has no iterative
    scan), so a short answer from the index is topped up by an exact scan."""
    params = _scope(principal, kb_ids=list(kb_ids), dim=dim, q=vector_literal(query_vector), k=top_k)
    where = _filter_sql(filters or {}, params)
    distance = f"c.embedding::vector({dim}) <=> %(q)s::vector({dim})"
    # The nearest chunks come from a single-table scan the planner serves from the
    # HNSW index; joins and the tenant check wrap it (inside, they make the
    # planner under-estimate the rows and sort the whole knowledge base instead).
    sql = f"""
        SELECT {CHUNK_RESULT_COLUMNS}, 1 - c.distance AS score
          FROM (SELECT c.*, {distance} AS distance
                  FROM chunks c
                 WHERE c.kb_id = ANY(%(kb_ids)s) AND c.embedding_dim = %(dim)s{where}
                 ORDER BY {{order}}
                 LIMIT %(k)s) c
          JOIN documents d ON d.id = c.document_id
          JOIN knowledge_bases kb ON kb.id = c.kb_id
         WHERE {VISIBLE_KB}
         ORDER BY c.distance, c.id"""
    with conn.transaction():
        conn.execute("SET LOCAL hnsw.ef_search = %s" % ef_search_for(top_k))
        rows = conn.execute(sql.format(order=distance), params).fetchall()
        if len(rows) < top_k:
            # "+ 0" hides the expression from the HNSW index: an exact scan of the
            # knowledge base's own rows (found through chunks_kb_idx).
            rows = conn.execute(sql.format(order=f"({distance}) + 0"), params).fetchall()
    return rows


_WEB_SYNTAX = re.compile(r'"|\bOR\b|(^|\s)-\w')


def _tsquery(query: str, params: dict) -> Optional[str]:
    """Natural-language questions rarely contain every word of the passage that
    answers them, so a plain query matches any of its words and the rank sorts it
    out; a query written in web-search syntax ("phrase", OR, -word) keeps it."""
    if _WEB_SYNTAX.search(query):
        params["tsquery"] = query
        return "websearch_to_tsquery('english', %(tsquery)s)"
    words = re.findall(r"[^\W_]+", query)
    if not words:
        return None  # nothing a full-text index could match
    params["tsquery"] = " | ".join(words)
    return "to_tsquery('english', %(tsquery)s)"


def keyword_search(conn: psycopg.Connection, principal, *, kb_ids: list[str], query: str,
                   top_k: int, filters: Optional[dict] = None) -> list[dict]:
    """PostgreSQL full-text search (GIN index). ts_rank with normalisation 32 maps
    the rank into 0..1 (rank / (rank + 1)); titles (weight A) count more than bodies (B)."""
    params = _scope(principal, kb_ids=list(kb_ids), k=top_k)
    where = _filter_sql(filters or {}, params)
    tsquery = _tsquery(query, params)
    if tsquery is None:
        return []
    # Ranked in a single-table scan of the GIN matches, as in semantic_search: with
    # the joins inside, the planner under-estimates the matches and walks the whole
    # table in document order (3 s instead of 1.5 s at a million chunks).
    return conn.execute(
        f"""SELECT {CHUNK_RESULT_COLUMNS}, c.score
              FROM (SELECT c.*, ts_rank('{{0.1, 0.2, 0.4, 1.0}}', c.tsv, q, 32) AS score
                      FROM chunks c, {tsquery} q
                     WHERE c.kb_id = ANY(%(kb_ids)s) AND c.tsv @@ q{where}
                     ORDER BY score DESC, c.id
                     LIMIT %(k)s) c
              JOIN documents d ON d.id = c.document_id
              JOIN knowledge_bases kb ON kb.id = c.kb_id
             WHERE {VISIBLE_KB}
             ORDER BY c.score DESC, c.id""",
        params,
    ).fetchall()


def visible_knowledge_bases(conn: psycopg.Connection, principal, kb_ids: list[str]) -> list[dict]:
    return conn.execute(
        f"SELECT {KB_COLUMNS} FROM knowledge_bases kb WHERE kb.id = ANY(%(kb_ids)s) AND {VISIBLE_KB}",
        _scope(principal, kb_ids=list(kb_ids)),
    ).fetchall()


# --- agents -----------------------------------------------------------------
# Agents belong to an organisation: its members see and manage them.

AGENT_COLUMNS = "id, org_id, owner_id, name, description, available_tools, created_at, updated_at"


def insert_agent(conn: psycopg.Connection, principal, *, agent_id: str, name: str, description: str,
                 tools: list) -> dict:
    return conn.execute(
        f"INSERT INTO agents (id, org_id, owner_id, name, description, available_tools)"
        f" VALUES (%s, %s, %s, %s, %s, %s) RETURNING {AGENT_COLUMNS}",
        (agent_id, principal.org_id, principal.user_id, name, description, json.dumps(tools)),
    ).fetchone()


def get_agent(conn: psycopg.Connection, principal, agent_id: str, *, for_update: bool = False) -> Optional[dict]:
    return conn.execute(
        f"SELECT {AGENT_COLUMNS} FROM agents WHERE id = %s AND org_id = %s" + (" FOR UPDATE" if for_update else ""),
        (agent_id, principal.org_id),
    ).fetchone()


def list_agents(conn: psycopg.Connection, principal) -> list[dict]:
    return conn.execute(f"SELECT {AGENT_COLUMNS} FROM agents WHERE org_id = %s ORDER BY created_at, id",
                        (principal.org_id,)).fetchall()


def update_agent(conn: psycopg.Connection, principal, agent_id: str, changes: dict) -> Optional[dict]:
    allowed = {k: v for k, v in changes.items() if k in ("name", "description", "available_tools")}
    if "available_tools" in allowed:
        allowed["available_tools"] = json.dumps(allowed["available_tools"])
    sets = ", ".join(f"{column} = %({column})s" for column in allowed) or "name = name"
    return conn.execute(
        f"UPDATE agents SET {sets}, updated_at = now() WHERE id = %(id)s AND org_id = %(org_id)s"
        f" RETURNING {AGENT_COLUMNS}",
        {**allowed, "id": agent_id, "org_id": principal.org_id},
    ).fetchone()


def delete_agent(conn: psycopg.Connection, principal, agent_id: str) -> bool:
    return conn.execute("DELETE FROM agents WHERE id = %s AND org_id = %s",
                        (agent_id, principal.org_id)).rowcount == 1


def write_audit(conn: psycopg.Connection, principal, *, agent_id: str, action: str, tool_id: Optional[str],
                before, after) -> None:
    conn.execute(
        "INSERT INTO audit_log (org_id, user_id, agent_id, action, tool_id, before, after)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s)",
        (principal.org_id, principal.user_id, agent_id, action, tool_id,
         json.dumps(before) if before is not None else None, json.dumps(after) if after is not None else None),
    )


def audit_entries(conn: psycopg.Connection, principal, agent_id: str) -> list[dict]:
    return conn.execute(
        "SELECT id, user_id, action, tool_id, before, after, created_at FROM audit_log"
        " WHERE agent_id = %s AND org_id = %s ORDER BY id", (agent_id, principal.org_id),
    ).fetchall()


def visible_knowledge_base_names(conn: psycopg.Connection, principal, kb_ids: list[str]) -> dict[str, str]:
    return {r["id"]: r["name"] for r in conn.execute(
        f"SELECT kb.id, kb.name FROM knowledge_bases kb WHERE kb.id = ANY(%(kb_ids)s) AND {VISIBLE_KB}",
        _scope(principal, kb_ids=list(kb_ids)),
    ).fetchall()}
