"""Applies the versioned SQL files in migrations/ in order, each once; then the work on data
a migration leaves for later (BM25 blocks in 0026's layout, packed a batch a transaction;
the uploaders of /v1 files stored before 0033, recorded from their objects' metadata).

Safe to run twice and from two processes at once: an advisory lock serialises
runners and schema_migrations records what was applied.
"""
import json
import logging
import sys
import time
import urllib.request
from pathlib import Path
from typing import Optional

import psycopg
from psycopg.rows import dict_row

from chalicelib import limits

logger = logging.getLogger(__name__)

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


def repack_old_blocks(database_url: str, deadline: Optional[float] = None) -> int:
    """Packs the BM25 blocks still in 0026's layout (migration 0028), a batch a transaction,
    until none is left or time.monotonic() passes the deadline; returns the blocks packed.
    Searches read both layouts, so stopping anywhere (or being stopped) loses nothing, and
    each store's fold_tail packs a batch of its knowledge base's."""
    from chalicelib.storage import terms

    packed = 0
    with psycopg.connect(database_url, autocommit=True, row_factory=dict_row) as conn:
        for kb_id in terms.with_old_blocks(conn):
            while deadline is None or time.monotonic() < deadline:
                n = terms.repack(conn, kb_id, limits.BM25_REPACK_BLOCKS)
                packed += n
                if n < limits.BM25_REPACK_BLOCKS:
                    break
            else:
                break
        left = terms.with_old_blocks(conn)
        if left:
            logger.warning("BM25 blocks packed: %d; %d knowledge bases still hold blocks in 0026's layout (their"
                           " stores pack them, as does the next deployment that migrates)", packed, len(left))
        elif packed:
            # The repacked rows' new versions left the directory's index-only reads (0027) to the
            # heap until a vacuum marks the pages all-visible again.
            conn.execute("VACUUM (ANALYZE) term_blocks")
            logger.info("BM25 blocks packed: %d; none is left in 0026's layout", packed)
    return packed


def record_files(database_url: str, deadline: Optional[float] = None) -> int:
    """The uploaders of /v1 files stored before migration 0033, from their objects' metadata."""
    from chalicelib.aws import client
    from chalicelib.config import load_settings
    from chalicelib.storage import files

    return files.record_bucket(database_url, client("s3"), load_settings().bucket, deadline)


def handle_custom_resource(event: dict, context) -> None:
    """The migration step of a deployment (Custom::DatabaseMigration). Create and
    Update apply what is pending; Delete keeps the data. CloudFormation waits for the
    answer at ResponseURL, so every path, failures included, must send one. The data work
    the migrations leave (repack_old_blocks, record_files) runs after the answer, in the function's
    remaining time less limits.MIGRATE_MARGIN_SECONDS: the deployment does not wait for it."""
    from chalicelib.storage.db import database_conninfo

    status, reason, applied = "SUCCESS", "", []
    try:
        if event.get("RequestType") in ("Create", "Update"):
            applied = migrate(database_conninfo())
            logger.info("migrations applied: %s", ", ".join(applied) or "none pending")
            _set_app_password()
    except Exception as exc:  # noqa: BLE001 - reported to CloudFormation, which fails the deploy
        logger.exception("migration failed")
        status, reason = "FAILED", f"migration failed: {type(exc).__name__}: {exc}"[:900]
    _answer(event, context, status, reason, {"Applied": ",".join(applied) or "none"})
    if status == "SUCCESS" and event.get("RequestType") in ("Create", "Update"):
        remaining = getattr(context, "get_remaining_time_in_millis", None)
        deadline = (time.monotonic() + remaining() / 1000 - limits.MIGRATE_MARGIN_SECONDS) if remaining else None
        try:
            repack_old_blocks(database_conninfo(), deadline)
        except Exception:  # noqa: BLE001 - the deployment has its answer; the next one, or a store, goes on
            logger.exception("packing old BM25 blocks failed; searches read them as they are")
        try:
            record_files(database_conninfo(), deadline)
        except Exception:  # noqa: BLE001 - as above; an uploader's own request by id records its file
            logger.exception("recording the uploaders of older /v1 files failed; the next deployment tries again")


def _set_app_password() -> None:
    """On AWS the functions log in as kb_app through RDS Proxy with the password in
    APP_DATABASE_SECRET_ARN; the role gets it here (again on every deploy: it may rotate)."""
    import os

    from psycopg import sql

    from chalicelib.storage.db import _secret, database_conninfo

    arn = os.environ.get("APP_DATABASE_SECRET_ARN")
    if not arn:
        return
    password = _secret(arn)["password"]
    with psycopg.connect(database_conninfo(), autocommit=True) as conn:
        conn.execute(sql.SQL("ALTER ROLE kb_app WITH LOGIN PASSWORD {}").format(sql.Literal(password)))
    logger.info("kb_app's password set from its secret")


def _answer(event: dict, context, status: str, reason: str, data: dict) -> None:
    body = json.dumps({
        "Status": status, "Reason": reason or f"see log stream {getattr(context, 'log_stream_name', '')}",
        "PhysicalResourceId": event.get("PhysicalResourceId") or "database-migrations",
        "StackId": event["StackId"], "RequestId": event["RequestId"],
        "LogicalResourceId": event["LogicalResourceId"], "Data": data,
    }).encode()
    request = urllib.request.Request(event["ResponseURL"], data=body, method="PUT",
                                     headers={"Content-Type": "", "Content-Length": str(len(body))})
    with urllib.request.urlopen(request, timeout=30) as response:
        response.read()


if __name__ == "__main__":
    import os

    url = sys.argv[1] if len(sys.argv) > 1 else os.environ["DATABASE_URL"]
    applied = migrate(url)
    print("applied: " + (", ".join(applied) if applied else "nothing (up to date)"))
    print(f"BM25 blocks packed: {repack_old_blocks(url)}")
    print(f"older /v1 files recorded: {record_files(url)}")
