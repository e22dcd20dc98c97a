"""Seed 003's lazy loading: a search answers summaries and chunk ids; this reads one
chunk's whole text when the client asks for it."""
from chalicelib.auth import Principal
from chalicelib.errors import NotFound
from chalicelib.retrieval.model import StoredChunk, chunk_row_id
from chalicelib.storage import chunks, connection


def read_chunk(principal: Principal, kb_id: str, chunk_id: str) -> StoredChunk:
    """NotFound unless the chunk is in the knowledge base's current version and the caller
    may read it (the knowledge base and, for an entry, its level)."""
    row_id = chunk_row_id(chunk_id)
    with connection() as conn:
        row = chunks.get_readable(conn, principal, kb_id, row_id) if row_id is not None else None
    if row is None:
        raise NotFound.thing("chunk", chunk_id)
    return StoredChunk.of(row)
