"""Applies the versioned SQL files in migrations/ in order, each once.

Safe to run twice and from two processes at once: an advisory lock serialises
runners and schema_migrations records what was applied.
"""
import sys
from pathlib import Path

import psycopg

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
_LOCK_ID = 74_201_122


def pending(conn: psycopg.Connection) -> list[Path]:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
    )
    applied = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
    return [p for p in sorted(MIGRATIONS_DIR.glob("*.sql")) if p.stem not in applied]


def migrate(database_url: str) -> list[str]:
    """Apply what is pending; returns the versions applied by this call."""
    done = []
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (_LOCK_ID,))
        try:
            for path in pending(conn):
                with conn.transaction():
                    conn.execute(path.read_text())
                    conn.execute("INSERT INTO schema_migrations (version) VALUES (%s)", (path.stem,))
                done.append(path.stem)
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (_LOCK_ID,))
    return done


if __name__ == "__main__":
    import os

    applied = migrate(sys.argv[1] if len(sys.argv) > 1 else os.environ["DATABASE_URL"])
    print("applied: " + (", ".join(applied) if applied else "nothing (up to date)"))
