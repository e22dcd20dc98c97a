"""kb_unmarked_changes: knowledge bases whose change Redis was not told of (freshness.py)."""
from dataclasses import dataclass
from typing import Sequence

import psycopg


@dataclass(frozen=True)
class Unmarked:
    rows: tuple[int, ...]
    kb_ids: tuple[str, ...]


def note(conn: psycopg.Connection, kb_ids: Sequence[str]) -> None:
    conn.execute("INSERT INTO kb_unmarked_changes (kb_id) SELECT unnest(%s::text[])", (list(kb_ids),))


def take(conn: psycopg.Connection) -> Unmarked:
    """What is noted, locked until the transaction ends (forget it once Redis is told). Rows
    another session holds are waited for, not skipped: once it has committed they are gone and
    their counters moved, so what this session's caller reads next is current."""
    rows = conn.execute("SELECT id, kb_id FROM kb_unmarked_changes ORDER BY id FOR UPDATE").fetchall()
    return Unmarked(rows=tuple(r["id"] for r in rows), kb_ids=tuple(sorted({r["kb_id"] for r in rows})))


def forget(conn: psycopg.Connection, unmarked: Unmarked) -> None:
    conn.execute("DELETE FROM kb_unmarked_changes WHERE id = ANY(%s)", (list(unmarked.rows),))
