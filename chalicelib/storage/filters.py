"""Search filters as SQL conditions on the chunks table alone (c), so the vector
search stays a single-table index scan; values travel as parameters."""
import json
from dataclasses import dataclass, field
from typing import Optional


@dataclass(frozen=True)
class SearchFilters:
    filename: Optional[str] = None  # a glob: * matches any run of characters
    tags: tuple[str, ...] = ()
    document_ids: tuple[str, ...] = ()
    metadata: dict = field(default_factory=dict)  # attribute values the chunk must contain
    entries_by: Optional[str] = None  # internal: the entries one user wrote


def _like_pattern(glob: str) -> str:
    escaped = glob.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped.replace("*", "%")


def filter_sql(filters: SearchFilters, params: dict) -> str:
    """' AND …' for each filter set; its values are added to params. Expects %(kb_ids)s."""
    clauses = []
    if filters.filename:
        params["f_filename"] = _like_pattern(filters.filename)
        clauses.append("c.document_id IN (SELECT f.id FROM documents f WHERE f.kb_id = ANY(%(kb_ids)s)"
                       " AND f.filename LIKE %(f_filename)s)")
    if filters.document_ids:
        params["f_documents"] = list(filters.document_ids)
        clauses.append("c.document_id = ANY(%(f_documents)s)")
    if filters.tags:
        params["f_tags"] = list(filters.tags)
        clauses.append("((jsonb_typeof(c.metadata->'tags') = 'array' AND c.metadata->'tags' ?| %(f_tags)s)"
                       " OR c.metadata->>'tags' = ANY(%(f_tags)s))")
    if filters.metadata:
        params["f_metadata"] = json.dumps(filters.metadata)
        clauses.append("c.metadata @> %(f_metadata)s::jsonb")
    if filters.entries_by:
        params["f_entries_by"] = filters.entries_by
        clauses.append("c.document_id IN (SELECT f.id FROM documents f WHERE f.kb_id = ANY(%(kb_ids)s)"
                       " AND f.kind = 'entry' AND f.created_by = %(f_entries_by)s)")
    return "".join(f" AND {clause}" for clause in clauses)
