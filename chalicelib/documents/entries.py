"""Text entries: prior answers kept as knowledge, searchable as soon as they are written.
An entry's content is stored once per knowledge base: posting it again answers the
entry that holds it."""
import hashlib
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Optional

import psycopg

from chalicelib import freshness, indexing, limits
from chalicelib.auth import Principal
from chalicelib.auth.access import ENTRY_LEVELS, kb_to_write, widest_entry_level
from chalicelib.documents.entry_text import rebuild
from chalicelib.embeddings import get_provider
from chalicelib.errors import Conflict, Forbidden, NotFound
from chalicelib.ids import new_id
from chalicelib.ingestion.chunk import chunk_document
from chalicelib.ingestion.context import fitting_overlap, fitting_tokens, within_window
from chalicelib.ingestion.extract import TEXT, Extracted, Section
from chalicelib.retrieval import Passage, SearchRequest, search
from chalicelib.storage import chunks as chunk_rows
from chalicelib.storage import audit, connection, document_status, documents, entry_chunks, knowledge_bases
from chalicelib.storage.filters import SearchFilters


@dataclass(frozen=True)
class Entry:
    id: str
    knowledge_base_id: str
    title: str
    chunks: int
    tokens: int
    metadata: dict
    created: bool = True  # False: the knowledge base held this content already
    level: Optional[str] = None
    type: Optional[str] = None
    confidence: Optional[float] = None


@dataclass(frozen=True)
class Knowledge:
    """What an entry says and what is known of it (extraction fills the optional part)."""
    title: str
    content: str
    metadata: dict = field(default_factory=dict)
    level: Optional[str] = None
    type: Optional[str] = None
    confidence: Optional[float] = None
    agent_id: Optional[str] = None
    provenance: Optional[dict] = None


def entry_url(entry_id: str) -> str:
    return f"knowledge://entries/{entry_id}"


def content_hash(content: str) -> str:
    """The same content, whatever its surrounding and repeated whitespace."""
    return hashlib.sha256(" ".join(content.split()).encode("utf-8")).hexdigest()


def _existing(row: dict) -> Entry:
    return Entry(id=row["id"], knowledge_base_id=row["kb_id"], title=row["title"], chunks=row["chunk_count"] or 0,
                 tokens=row["token_count"] or 0, metadata=row["metadata"], created=False, level=row["level"],
                 type=row["entry_type"], confidence=row["confidence"])


def create_entry(principal: Principal, kb_id: str, *, title: str, content: str, metadata: dict,
                 level: str = "individual") -> Entry:
    """An entry posted directly: its writer's alone unless it names a wider level, which an
    editor may give up to its organisation and only an admin up to public (as extraction)."""
    widest = widest_entry_level(principal)
    if ENTRY_LEVELS.index(level) > ENTRY_LEVELS.index(widest):
        raise Forbidden(f"a {principal.role} writes entries up to the level {widest}, not {level}")
    return store_entry(principal, kb_id, Knowledge(title=title, content=content, metadata=metadata, level=level))


def set_entry_level(principal: Principal, kb_id: str, entry_id: str, level: str) -> Entry:
    """Promote or demote an entry (issue 31): an admin any entry it may read, to any level;
    a writer its own entries, up to the level it could post them at."""
    with connection() as conn, conn.transaction():
        kb_to_write(conn, principal, kb_id, "change an entry's level")
        row = documents.readable_entry(conn, principal, kb_id, entry_id)
        if row is None:
            raise NotFound.thing("entry", entry_id)
        if not principal.is_admin:
            if row["created_by"] != principal.user_id:
                raise Forbidden("only an admin of the organisation changes the level of another user's entry")
            widest = widest_entry_level(principal)
            if ENTRY_LEVELS.index(level) > ENTRY_LEVELS.index(widest):
                raise Forbidden(f"a {principal.role} gives entries a level up to {widest}, not {level}")
        if (row["level"] or "individual") == level:
            return _existing(row)
        try:
            with conn.transaction():
                documents.set_entry_level(conn, entry_id, level)  # the row is locked and readable: it changes
        except psycopg.errors.UniqueViolation:
            raise Conflict(f"the level {level} of this knowledge base holds an entry of the same text already",
                           code="ENTRY_EXISTS") from None
        audit.write(conn, principal, "set_entry_level", "document", entry_id,
                    before={"level": row["level"] or "individual"}, after={"level": level})
    freshness.bump(kb_id)  # who may read the entry's passages changed
    return replace(_existing(row), level=level)


def store_entry(principal: Principal, kb_id: str, item: Knowledge, kb: Optional[dict] = None) -> Entry:
    """Chunk, embed and store an entry within the request (access.kb_to_write says who
    may); the entry that holds the same content already, when there is one."""
    digest = content_hash(item.content)
    with connection() as conn:
        kb = kb or kb_to_write(conn, principal, kb_id, "write entries")
        found = documents.entry_by_content(conn, principal, kb_id, digest)
    if found is not None:
        return _existing(found)
    chunks = within_window(chunk_document(Extracted(TEXT, [Section(item.content)]), fitting_tokens(kb),
                                          fitting_overlap(kb), item.metadata), kb["embedding_provider"], item.title)
    vectors = get_provider(kb["embedding_provider"], kb["embedding_model"]).embed_documents(
        [f"{item.title}\n{c.content}" for c in chunks])
    chunks = [replace(c, embedding=v, title=item.title) for c, v in zip(chunks, vectors)]
    entry_id = new_id("entry")
    with connection() as conn, conn.transaction():
        inserted = document_status.insert_entry(
            conn, entry_id=entry_id, kb_id=kb_id, title=item.title, user_id=principal.user_id,
            metadata=item.metadata, size_bytes=len(item.content.encode("utf-8")), content_hash=digest,
            level=item.level, entry_type=item.type, confidence=item.confidence, agent_id=item.agent_id,
            provenance=[item.provenance] if item.provenance else [])
        if not inserted:  # the same content, written by a concurrent request
            return _existing(documents.entry_by_content(conn, principal, kb_id, digest))
        chunk_rows.replace_document_chunks(conn, doc_id=entry_id, kb_id=kb_id, dim=kb["embedding_dim"],
                                           chunks=chunks, page_count=None)
        audit.write(conn, principal, "create_entry", "document", entry_id,
                    after={"knowledgeBaseId": kb_id, "title": item.title, "level": item.level or "individual"})
    indexing.after_store(kb_id)
    return Entry(id=entry_id, knowledge_base_id=kb_id, title=item.title, chunks=len(chunks),
                 tokens=sum(c.token_count for c in chunks), metadata=item.metadata, level=item.level,
                 type=item.type, confidence=item.confidence)


def rewrite_entry(principal: Principal, kb: dict, entry_id: str, *, title: str, content: str, level: str,
                  provenance: dict, supersede: tuple[str, ...] = ()) -> Optional[Entry]:
    """Seed 003's "merged": the entry holds the merged content from now on (re-chunked,
    re-embedded, re-indexed for keyword search), what it said before kept in its history;
    the entries in `supersede` leave search, their text kept in the same history. None,
    with nothing changed, when the caller may not rewrite them all (below), an entry is gone
    from its sight, or the audience holds the merged text already: the caller records a
    sighting instead. A merge rewrites only what the caller could change by hand (an admin
    any entry it reads, a writer its own: set_entry_level's rule) and never carries an
    item's knowledge to a wider level than the item's own (`level`)."""
    chunks = within_window(chunk_document(Extracted(TEXT, [Section(content)]), fitting_tokens(kb),
                                          fitting_overlap(kb), {}), kb["embedding_provider"], title)
    vectors = get_provider(kb["embedding_provider"], kb["embedding_model"]).embed_documents(
        [f"{title}\n{c.content}" for c in chunks])
    chunks = [replace(c, embedding=v, title=title) for c, v in zip(chunks, vectors)]
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    try:
        with connection() as conn, conn.transaction():
            row = documents.readable_entry(conn, principal, kb["id"], entry_id)
            if row is None or row["superseded_by"]:
                return None
            others = [o for o in (documents.readable_entry(conn, principal, kb["id"], i) for i in supersede
                                  if i != entry_id) if o is not None and not o["superseded_by"]]
            if not all(_may_merge(principal, r, level) for r in (row, *others)):
                return None
            by_entry: dict[str, list[dict]] = {}
            for chunk in entry_chunks.of_entries(conn, principal, [kb["id"]], [entry_id, *(o["id"] for o in others)]):
                by_entry.setdefault(chunk["document_id"], []).append(chunk)
            history = [{"title": row["title"], "content": rebuild(by_entry.get(entry_id, [])), "replacedAt": now,
                        "reason": "merged"}]
            history += [{"title": o["title"], "content": rebuild(by_entry.get(o["id"], [])), "replacedAt": now,
                         "reason": "superseded", "supersededEntry": o["id"]} for o in others]
            documents.add_entry_version(conn, entry_id, title=title, history=history, provenance=provenance)
            chunk_rows.replace_document_chunks(conn, doc_id=entry_id, kb_id=kb["id"], dim=kb["embedding_dim"],
                                               chunks=chunks, page_count=None, content_hash=content_hash(content))
            for other in others:
                documents.supersede_entry(conn, other["id"], entry_id)
                chunk_rows.replace_document_chunks(conn, doc_id=other["id"], kb_id=kb["id"], dim=kb["embedding_dim"],
                                                   chunks=[], page_count=None)
            audit.write(conn, principal, "merge_entries", "document", entry_id,
                        before={"title": row["title"]}, after={"title": title, "superseded": [o["id"] for o in others]})
    except psycopg.errors.UniqueViolation:
        return None
    freshness.bump(kb["id"])
    return Entry(id=entry_id, knowledge_base_id=kb["id"], title=title, chunks=len(chunks),
                 tokens=sum(c.token_count for c in chunks), metadata=row["metadata"], created=False,
                 level=row["level"], type=row["entry_type"], confidence=row["confidence"])


def rechunk_entries(kb: dict) -> int:
    """A rebuild's entries: each one's text (rebuilt from its chunks) chunked with the knowledge
    base's settings, embedded and switched in. Acts for the whole bucket; returns how many."""
    from itertools import groupby

    with connection() as conn:
        rows = entry_chunks.of_knowledge_base(conn, kb["id"])
    provider = get_provider(kb["embedding_provider"], kb["embedding_model"])
    done = 0
    for entry_id, group in groupby(rows, key=lambda r: r["document_id"]):
        group = list(group)
        title, text = group[0]["title"], rebuild(group)
        chunks = within_window(chunk_document(Extracted(TEXT, [Section(text)]), fitting_tokens(kb),
                                              fitting_overlap(kb), {}), kb["embedding_provider"], title)
        vectors = provider.embed_documents([f"{title}\n{c.content}" for c in chunks])
        chunks = [replace(c, embedding=v, title=title) for c, v in zip(chunks, vectors)]
        with connection() as conn, conn.transaction():
            chunk_rows.replace_document_chunks(conn, doc_id=entry_id, kb_id=kb["id"], dim=kb["embedding_dim"],
                                               chunks=chunks, page_count=None)
        done += 1
    if done:
        indexing.after_store(kb["id"])
    return done


def _may_merge(principal: Principal, row: dict, level: str) -> bool:
    own = principal.is_admin or row["created_by"] == principal.user_id
    return own and ENTRY_LEVELS.index(row["level"] or "individual") <= ENTRY_LEVELS.index(level)


def search_entries(principal: Principal, query: str, max_results: int,
                   min_score: float = limits.KNOWLEDGE_MIN_SCORE.default) -> list[Passage]:
    """The entries the caller may read (their own, their organisation's, public ones:
    storage.scope.VISIBLE_ENTRY), the best passage per entry. Ordered and scored by the
    passage's cosine similarity to the query, so a score means relevance whatever else
    the knowledge bases hold, and nothing below min_score is answered."""
    with connection() as conn:
        kb_ids = knowledge_bases.with_entries_for(conn, principal)
    if not kb_ids:
        return []
    answer = search(principal, SearchRequest(
        knowledge_base_ids=tuple(kb_ids), query=query, top_k=int(limits.TOP_K.high), strategy="hybrid",
        min_score=min_score, filters=SearchFilters(entries=True), max_tokens=int(limits.MAX_TOKENS.high)))
    best: dict[str, Passage] = {}
    for passage in sorted(answer.passages, key=lambda p: -(p.scores.vector or 0.0)):
        best.setdefault(passage.document_id, passage)
    return list(best.values())[:max_results]
