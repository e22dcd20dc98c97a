"""One PostgreSQL connection per warm Lambda worker, re-opened after a fault, and the
organisation its statements act for (row-level security, migration 0008)."""
import functools
import json
import logging
import os
import time
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Callable, Iterator, Optional

import psycopg
import psycopg.conninfo
from psycopg import sql
from pgvector.psycopg.vector import register_vector_info
from psycopg.rows import dict_row
from psycopg.types import TypeInfo

from chalicelib import limits
from chalicelib.config import load_settings
from chalicelib.errors import Transient

logger = logging.getLogger(__name__)

# The organisation the database lets the functions' role see (the policies read it as
# kb.org_id), and the user within it (kb.user_id: whose individual entries it reads,
# migration 0014). Nothing is set by default, and then nothing is visible: a request acts
# for its caller (api/http.py), the pipeline and the key lookup for all.
EVERY_ORGANISATION = "*"
_acting_for: ContextVar[tuple[str, str]] = ContextVar("kb_acting_for", default=("", ""))


@contextmanager
def acting_for(org_id: str, user_id: str = "") -> Iterator[None]:
    """Statements inside the block see (and write) only this organisation's rows, and
    public knowledge bases, and of entries below public only the user's and the
    organisation's; EVERY_ORGANISATION for the pipeline and the key lookup."""
    token = _acting_for.set((org_id, user_id))
    try:
        yield
    finally:
        _acting_for.reset(token)


def for_every_organisation(handler: Callable) -> Callable:
    """A Lambda entry point that acts for the whole bucket (the pipeline, its sweeps)."""
    @functools.wraps(handler)
    def wrapper(*args, **kwargs):
        with acting_for(EVERY_ORGANISATION):
            return handler(*args, **kwargs)
    return wrapper


def functions_login(url: str) -> str:
    """The same database as the functions' own login, kb_app (migration 0008), without a
    password: a server that trusts its local socket (the local stack, the suite, the benchmarks)."""
    from urllib.parse import urlsplit, urlunsplit

    return urlunsplit(urlsplit(url)._replace(netloc="kb_app@"))


def database_conninfo() -> str:
    """DATABASE_URL where the database already exists (the local stack); on AWS the
    RDS Proxy endpoint with credentials read from Secrets Manager once per worker, so
    no password sits in the functions' environment. The proxy requires TLS."""
    settings = load_settings()
    if settings.database_url:
        return settings.database_url
    if not settings.database_secret_arn:
        raise RuntimeError("neither DATABASE_URL nor DATABASE_SECRET_ARN is set")
    secret = _secret(settings.database_secret_arn)
    return psycopg.conninfo.make_conninfo(
        host=settings.database_host or secret.get("host"), port=secret.get("port", 5432),
        dbname=settings.database_name, user=secret["username"], password=secret["password"],
        sslmode="require")


@functools.lru_cache(maxsize=4)
def _secret(arn: str) -> dict:
    from chalicelib.aws import client

    return json.loads(client("secretsmanager").get_secret_value(SecretId=arn)["SecretString"])


def timeouts_profile() -> str:
    """The path this function serves, for its sessions' timeouts (limits.DATABASE_TIMEOUTS_MS):
    DATABASE_TIMEOUTS, set for every function in infra/template.yaml. Unset (the suite's
    fixtures, the benchmarks' bulk loads, scripts), the pipeline's longer ones."""
    profile = os.environ.get("DATABASE_TIMEOUTS", "pipeline")
    if profile not in limits.DATABASE_TIMEOUTS_MS:
        raise RuntimeError(f"DATABASE_TIMEOUTS={profile!r}: expected one of {', '.join(limits.DATABASE_TIMEOUTS_MS)}")
    return profile


def session_settings(profile: str) -> dict[str, str]:
    """What each session of the profile sets: its statement, lock and idle-in-transaction
    timeouts, and how soon the server notices a client gone (a Lambda killed while its
    statement waited: the issue saw such a session queued for a lock 189 s later)."""
    statement, lock, idle = limits.DATABASE_TIMEOUTS_MS[profile]
    return {"statement_timeout": str(statement), "lock_timeout": str(lock),
            "idle_in_transaction_session_timeout": str(idle),
            "client_connection_check_interval": str(limits.DATABASE_CLIENT_CHECK_MS),
            "tcp_keepalives_idle": "30", "tcp_keepalives_interval": "10", "tcp_keepalives_count": "3"}


def open_connection(url: str, profile: Optional[str] = None) -> psycopg.Connection:
    # Keepalives: this side notices a server gone within ~1 minute instead of hanging.
    conn = psycopg.connect(url, row_factory=dict_row, autocommit=True, connect_timeout=10,
                           keepalives=1, keepalives_idle=30, keepalives_interval=10, keepalives_count=3)
    # Set with set_config, not the startup packet's options (RDS Proxy pins the session
    # either way: _act_for's kb.org_id already does), in one round trip.
    settings = session_settings(profile or timeouts_profile())
    if conn.info.server_version < 140000:  # client_connection_check_interval came in 14
        settings.pop("client_connection_check_interval")
    conn.execute("SELECT " + ", ".join(["set_config(%s, %s, false)"] * len(settings)),
                 [value for pair in settings.items() for value in pair])
    # pgvector-python's binary vector format; only the vector type (register_vector
    # looks up four types, one round trip each). A database without the extension
    # yet (before its first migration) gets none.
    info = TypeInfo.fetch(conn, "vector")
    if info is not None:
        register_vector_info(conn, info)
    return conn


# A connection idle this long is pinged before use: a database restart (or a proxy's
# idle timeout) meanwhile would otherwise fail the next request's first statement.
# One round trip, only after a pause; a busy worker skips it.
IDLE_PING_SECONDS = 10.0
# A worker's connections by use: MAIN for everything; SIDE only for a hybrid search's
# semantic list, read beside the keyword list in the same snapshot (beside()).
MAIN, SIDE = "main", "side"
_conns: dict[str, psycopg.Connection] = {}
_last_used: dict[str, float] = {}


def _alive(conn: psycopg.Connection) -> bool:
    try:
        conn.execute("SELECT 1")
        return True
    except psycopg.OperationalError:
        return False


_on_new_connection: list[Callable[[], None]] = []


def on_new_connection(hook: Callable[[], None]) -> None:
    """Runs hook whenever the worker opens its main connection anew: what a worker keeps from
    one database (terms.CACHE) is not valid for another that the new connection may reach."""
    _on_new_connection.append(hook)


def _current(slot: str = MAIN) -> psycopg.Connection:
    conn = _conns.get(slot)
    stale = conn is not None and time.monotonic() - _last_used.get(slot, 0.0) > IDLE_PING_SECONDS and not _alive(conn)
    if conn is None or conn.closed or conn.broken or stale:
        if stale:
            reset(slot)
        conn = _conns[slot] = open_connection(database_conninfo())
        if slot == MAIN:
            for hook in _on_new_connection:
                hook()
    _last_used[slot] = time.monotonic()
    return conn


def reset(slot: Optional[str] = None) -> None:
    """Drop the cached connection (every one when no slot is named: tests point the
    service at another database)."""
    for name in [slot] if slot else list(_conns):
        conn = _conns.pop(name, None)
        if conn is not None and not conn.closed:
            conn.close()


@contextmanager
def connection(*, keep_caller: bool = False) -> Iterator[psycopg.Connection]:
    """The worker's connection in autocommit mode. A connection that the server
    dropped (restart, idle timeout) is replaced on the next call; meanwhile the
    fault is a Transient error (a 503, a retried pipeline step) whose message names
    no host, socket or SQL. keep_caller: the statements read nothing row-level security
    limits (the key lookup's security-definer function), so the session keeps acting for
    whoever it last did (nothing, on a new connection) instead of a setting each way."""
    try:
        conn = _current()
        if not keep_caller:
            _act_for(conn, _acting_for.get())
    except psycopg.OperationalError as exc:
        logger.warning("could not connect to the database: %s", exc)
        raise Transient("the database is unavailable; retry shortly",
                        retry_after=limits.DATABASE_RETRY_AFTER_SECONDS) from exc
    with _reopened_after_fault("database connection"):
        yield conn


@contextmanager
def _reopened_after_fault(what: str, slot: Optional[str] = None) -> Iterator[None]:
    """A fault inside the block drops the connection (every one when no slot is named),
    so the next call opens a new one, and becomes a Transient error."""
    try:
        yield
    except (psycopg.errors.QueryCanceled, psycopg.errors.LockNotAvailable) as exc:
        # The session's statement or lock timeout: the connection is sound, the database busy.
        logger.warning("%s: %s", what, exc)
        raise Transient("the database is busy; retry shortly",
                        retry_after=limits.DATABASE_RETRY_AFTER_SECONDS) from exc
    except psycopg.OperationalError as exc:
        logger.warning("%s failed; it will be re-opened", what, exc_info=True)
        reset(slot)
        raise Transient("the database is unavailable; retry shortly",
                        retry_after=limits.DATABASE_RETRY_AFTER_SECONDS) from exc


def _act_for(conn: psycopg.Connection, caller: tuple[str, str]) -> None:
    """Set kb.org_id and kb.user_id for the session when they change (a worker serves one
    caller at a time, so usually once per worker and caller). A session setting, not SET LOCAL:
    the connections are in autocommit mode. Behind RDS Proxy it pins the connection,
    which costs nothing extra: a Lambda worker keeps its connections (one, and a second
    once it has served a hybrid search) for its lifetime anyway."""
    if getattr(conn, "_kb_acting_for", None) != caller:
        conn.execute("SELECT set_config('kb.org_id', %s, false), set_config('kb.user_id', %s, false)", caller)
        conn._kb_acting_for = caller


@contextmanager
def transaction() -> Iterator[psycopg.Connection]:
    """A connection inside one transaction: everything in the block commits or nothing."""
    with connection() as conn:
        with conn.transaction():
            yield conn


@contextmanager
def snapshot() -> Iterator[psycopg.Connection]:
    """A read-only transaction whose statements all see the same committed data
    (REPEATABLE READ): a search's semantic and keyword queries never straddle the
    swap of a document's chunks."""
    with shared_snapshot(share=False) as (conn, _):
        yield conn


@contextmanager
def shared_snapshot(share: bool = True) -> Iterator[tuple[psycopg.Connection, Optional[str]]]:
    """snapshot(), and (when asked to share) the name under which another connection can
    read the same data (beside()); None inside a transaction the caller opened, whose
    own writes another connection would not see."""
    with connection() as conn:
        if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            yield conn, None  # already inside the caller's transaction, which sets the isolation
            return
        with conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield conn, (conn.execute("SELECT pg_export_snapshot() AS name").fetchone()["name"] if share else None)


def side_connection() -> Optional[psycopg.Connection]:
    """The worker's second connection, acting for the same organisation; None when it
    cannot be opened (the server's connections are all taken, say), and the caller then
    runs its queries one after the other on the first."""
    try:
        conn = _current(SIDE)
        _act_for(conn, _acting_for.get())
        return conn
    except psycopg.OperationalError as exc:
        logger.warning("no second database connection; queries run one after the other: %s", exc)
        reset(SIDE)
        return None


@contextmanager
def beside(conn: psycopg.Connection, snapshot_name: str) -> Iterator[psycopg.Connection]:
    """conn (side_connection()) in a read-only transaction that sees exactly what the
    exporting transaction sees (SET TRANSACTION SNAPSHOT), which must stay open until
    the block ends. May run in another thread than the exporter's."""
    with _reopened_after_fault("side database connection", SIDE), conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        conn.execute(sql.SQL("SET TRANSACTION SNAPSHOT {}").format(sql.Literal(snapshot_name)))
        yield conn
