"""knowledge_bases: every read and write scoped to the caller (see scope.py), except
the pipeline's read, which acts for whoever may write the bucket. Who may change what
they can see is decided before a write, in chalicelib/auth/access.py."""
from typing import Optional

import psycopg
from psycopg.types.json import Jsonb

from chalicelib import limits
from chalicelib.errors import Invalid
from chalicelib.ids import new_id
from chalicelib.storage.document_status import STATUSES
from chalicelib.storage.scope import READABLE_DOCUMENT, VISIBLE_ENTRY, VISIBLE_KB, WRITES_BY_ACCESS, scope

KB_COLUMNS = """kb.id, kb.org_id, kb.owner_id, kb.name, kb.description, kb.visibility,
    kb.embedding_provider, kb.embedding_model, kb.embedding_dim, kb.chunk_tokens,
    kb.chunk_overlap, kb.chunk_strategy, kb.child_tokens, kb.read_roles, kb.read_users, kb.write_roles, kb.write_users,
    kb.source, kb.default_rerank, kb.created_at, kb.updated_at"""
# The access lists (migration 0018), as the API names them: column → field.
ACCESS_COLUMNS = {"read_roles": "readRoles", "read_users": "readUsers",
                  "write_roles": "writeRoles", "write_users": "writeUsers"}

_BY_STATUS = ", ".join(f"'{s}', count(*) FILTER (WHERE d.status = '{s}')" for s in STATUSES)
# Counted over the documents the caller may read (an individual entry is its writer's alone).
KB_STATS = f"""(SELECT json_build_object(
        'documentCount', count(*),
        'chunkCount', coalesce(sum(d.chunk_count), 0),
        'totalTokens', coalesce(sum(d.token_count), 0),
        'byStatus', json_build_object({_BY_STATUS}),
        'lastIngestedAt', max(d.processed_at))
     FROM documents d WHERE d.kb_id = kb.id AND {READABLE_DOCUMENT}) AS stats"""


def insert_knowledge_base(conn: psycopg.Connection, principal, *, name: str, description: str,
                          visibility: str, provider: str, model: str, dim: int,
                          chunk_tokens: int, chunk_overlap: int, chunk_strategy: str = "fixed",
                          child_tokens: Optional[int] = None, access: Optional[dict] = None, source: Optional[dict] = None,
                          default_rerank: bool = False) -> str:
    """access: ACCESS_COLUMNS' columns → a list of names or None (None: no lists); source:
    the stored form of a chalicelib.sources.SourceConfig, or None."""
    access = access or {}
    kb_id = new_id("kb")
    conn.execute(
        "INSERT INTO knowledge_bases (id, org_id, owner_id, name, description, visibility,"
        " embedding_provider, embedding_model, embedding_dim, chunk_tokens, chunk_overlap, chunk_strategy,"
        " child_tokens, read_roles, read_users, write_roles, write_users, source, default_rerank)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
        (kb_id, principal.org_id, principal.user_id, name, description, visibility,
         provider, model, dim, chunk_tokens, chunk_overlap, chunk_strategy, child_tokens, *(access.get(c) for c in ACCESS_COLUMNS),
         Jsonb(source) if source else None, default_rerank),
    )
    return kb_id


def ensure_vector_index(conn: psycopg.Connection, dim: int) -> None:
    """An HNSW index for chunks of this dimension (partial, over a cast expression)."""
    if not isinstance(dim, int) or not 0 < dim <= limits.HNSW_MAX_DIMENSION:
        raise Invalid.field("embedding.model", f"dimension {dim} cannot be indexed with HNSW"
                                               f" (max {limits.HNSW_MAX_DIMENSION})")
    # The functions' role may not create indexes; this function, owned by the migrations' role, may.
    conn.execute("SELECT kb_ensure_vector_index(%s)", (dim,))


def get_visible(conn: psycopg.Connection, principal, kb_id: str, *, for_update: bool = False,
                stats: bool = True) -> Optional[dict]:
    """The knowledge base if the caller sees it; with its stats unless told otherwise (they
    read every document it holds, slow for a large one: bench/documents_list.py). FOR UPDATE
    never has them: it does not go with an aggregate. Without stats it says whether the
    caller passes the write lists (writes_by_access)."""
    if for_update or not stats:
        return conn.execute(
            f"SELECT {KB_COLUMNS}, {WRITES_BY_ACCESS} AS writes_by_access"
            f" FROM knowledge_bases kb WHERE kb.id = %(kb_id)s AND {VISIBLE_KB}"
            + (" FOR UPDATE" if for_update else ""),
            scope(principal, kb_id=kb_id),
        ).fetchone()
    return conn.execute(
        f"SELECT {KB_COLUMNS}, {KB_STATS} FROM knowledge_bases kb"
        f" WHERE kb.id = %(kb_id)s AND {VISIBLE_KB}",
        scope(principal, kb_id=kb_id),
    ).fetchone()


def list_visible(conn: psycopg.Connection, principal, *, limit: int, after: Optional[str]) -> list[dict]:
    return conn.execute(
        f"SELECT {KB_COLUMNS}, {KB_STATS} FROM knowledge_bases kb"
        f" WHERE {VISIBLE_KB} AND (%(after)s::text IS NULL OR kb.id > %(after)s)"
        " ORDER BY kb.id LIMIT %(limit)s",
        scope(principal, limit=limit, after=after),
    ).fetchall()


def visible_by_ids(conn: psycopg.Connection, principal, kb_ids: list[str]) -> list[dict]:
    return conn.execute(
        f"SELECT {KB_COLUMNS} FROM knowledge_bases kb WHERE kb.id = ANY(%(kb_ids)s) AND {VISIBLE_KB}",
        scope(principal, kb_ids=list(kb_ids)),
    ).fetchall()


def readable_in_own_org(conn: psycopg.Connection, principal) -> list[dict]:
    """The knowledge bases of the caller's organisation it may read (not other organisations'
    public ones), id and embedding: what seed 002's worker query searches unless it names some."""
    return conn.execute(
        "SELECT kb.id, kb.embedding_provider, kb.embedding_model, kb.embedding_dim FROM knowledge_bases kb"
        f" WHERE kb.org_id = %(org_id)s AND {VISIBLE_KB} ORDER BY kb.id", scope(principal)).fetchall()


def visible_names(conn: psycopg.Connection, principal, kb_ids: list[str]) -> dict[str, str]:
    return {r["id"]: r["name"] for r in conn.execute(
        f"SELECT kb.id, kb.name FROM knowledge_bases kb WHERE kb.id = ANY(%(kb_ids)s) AND {VISIBLE_KB}",
        scope(principal, kb_ids=list(kb_ids)),
    ).fetchall()}


def with_entries_for(conn: psycopg.Connection, principal) -> list[str]:
    """The visible knowledge bases holding entries the caller may read (scope.VISIBLE_ENTRY)."""
    return [r["id"] for r in conn.execute(
        f"SELECT DISTINCT kb.id FROM knowledge_bases kb JOIN documents e ON e.kb_id = kb.id"
        f" WHERE {VISIBLE_ENTRY} AND {VISIBLE_KB}",
        scope(principal),
    ).fetchall()]


def reachable(conn: psycopg.Connection, principal, kb_ids: list[str]) -> dict[str, Optional[str]]:
    """Which of these still exist in the caller's organisation or in public, seen or not:
    id → its name when the caller can see it, else None (a tool can say its knowledge
    base is there but hidden from the caller, without naming it). What the caller sees is
    in its organisation or public, so one read answers both."""
    return {r["id"]: r["name"] for r in conn.execute(
        f"SELECT kb.id, CASE WHEN {VISIBLE_KB} THEN kb.name END AS name FROM knowledge_bases kb"
        " WHERE kb.id = ANY(%(kb_ids)s) AND (kb.org_id = %(org_id)s OR kb.visibility = 'public')",
        scope(principal, kb_ids=list(kb_ids)),
    ).fetchall()}


def update(conn: psycopg.Connection, principal, kb_id: str, changes: dict) -> bool:
    """Apply name/description/visibility/access-list/source/default_rerank changes (access.kb_to_manage
    said who may)."""
    allowed = {k: (Jsonb(v) if k == "source" and v is not None else v) for k, v in changes.items()
               if k in ("name", "description", "visibility", "source", "default_rerank", *ACCESS_COLUMNS)}
    if not allowed:
        return get_visible(conn, principal, kb_id) is not None
    sets = ", ".join(f"{column} = %({column})s" for column in allowed)
    return conn.execute(
        f"UPDATE knowledge_bases kb SET {sets}, updated_at = now() WHERE kb.id = %(kb_id)s AND {VISIBLE_KB}",
        scope(principal, kb_id=kb_id, **allowed),
    ).rowcount == 1


def delete(conn: psycopg.Connection, principal, kb_id: str) -> bool:
    """Deletes it with its documents and chunks (ON DELETE CASCADE; access.kb_to_manage said who may)."""
    return conn.execute(
        f"DELETE FROM knowledge_bases kb WHERE kb.id = %(kb_id)s AND {VISIBLE_KB}",
        scope(principal, kb_id=kb_id),
    ).rowcount == 1


def get_for_pipeline(conn: psycopg.Connection, kb_id: str) -> Optional[dict]:
    """Unscoped read for the ingestion pipeline, which acts for whoever may write the bucket."""
    return conn.execute(
        f"SELECT {KB_COLUMNS} FROM knowledge_bases kb WHERE kb.id = %s", (kb_id,)
    ).fetchone()


def all_ids(conn: psycopg.Connection) -> list[str]:
    """Every knowledge base, unscoped (the hourly sync walks them all)."""
    return [r["id"] for r in conn.execute("SELECT id FROM knowledge_bases ORDER BY id").fetchall()]


def set_chunking(conn: psycopg.Connection, kb_id: str, chunk_tokens: int, chunk_overlap: int, strategy: str,
                 child_tokens: Optional[int] = None) -> None:
    """A rebuild's new chunking (access.kb_to_manage said who may)."""
    conn.execute("UPDATE knowledge_bases SET chunk_tokens = %s, chunk_overlap = %s, chunk_strategy = %s,"
                 " child_tokens = %s, updated_at = now() WHERE id = %s",
                 (chunk_tokens, chunk_overlap, strategy, child_tokens, kb_id))


def document_count(conn: psycopg.Connection, kb_id: str) -> int:
    """Its files and live entries (a superseded entry has no chunks to rebuild)."""
    return conn.execute("SELECT count(*) AS n FROM documents WHERE kb_id = %s AND superseded_by IS NULL",
                        (kb_id,)).fetchone()["n"]
