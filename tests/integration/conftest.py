"""Integration tests: the service code in-process against the real PostgreSQL + pgvector
and Redis of the local stack, in a database of their own."""
import os
import secrets
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
import redis

from chalicelib.storage import connection, db
from chalicelib.storage.migrate import migrate


def _with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + name))


@pytest.fixture(scope="session")
def database_url(local_env):
    name = f"kb_it_{secrets.token_hex(4)}"
    admin = local_env["DATABASE_URL"]
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    url = _with_database(admin, name)
    yield url
    db.reset()
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(scope="session")
def migrated(database_url):
    first = migrate(database_url)
    return first


# Redis databases the integration tests may empty, a pytest-xdist worker each: not 0 (the
# stack's) nor 14 (the benchmarks', bench/common.py, which make test's harness check runs).
REDIS_DATABASES = (15, 13, 12, 11)


@pytest.fixture
def service_env(monkeypatch, migrated, database_url, local_env):
    """Point the service at the test database and a Redis database of its own, one per
    pytest-xdist worker (tests here empty it)."""
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0")[2:])
    redis_url = local_env["REDIS_URL"].rsplit("/", 1)[0] + f"/{REDIS_DATABASES[worker]}"
    monkeypatch.setenv("DATABASE_URL", database_url)
    monkeypatch.setenv("REDIS_URL", redis_url)
    db.reset()
    redis.Redis.from_url(redis_url).flushdb()
    yield {"DATABASE_URL": database_url, "REDIS_URL": redis_url}
    db.reset()


def org_name(principal) -> str:
    with connection() as conn:
        return conn.execute("SELECT name FROM organizations WHERE id = %s", (principal.org_id,)).fetchone()["name"]


@pytest.fixture
def tenant(service_env):
    from chalicelib.auth import issue_key

    return issue_key(f"org-{secrets.token_hex(4)}", "alice")


# Commands that name several keys, and where the keys are: on ElastiCache Serverless (a
# cluster) they must all lie in one hash slot, or the command fails with CROSSSLOT. The
# local Redis is one node and accepts any, so every integration test checks this itself.
def _keys_of(args: tuple) -> list:
    name = str(args[0]).upper()
    if name in ("MGET", "DEL", "UNLINK", "EXISTS", "TOUCH", "SUNION", "SINTER", "SDIFF", "WATCH"):
        return list(args[1:])
    if name == "MSET":
        return list(args[1::2])
    if name in ("EVAL", "EVALSHA"):
        return list(args[3:3 + int(args[2])])
    return []


@pytest.fixture(autouse=True)
def redis_keys_share_a_slot(monkeypatch):
    from redis.client import Pipeline, Redis
    from redis.crc import key_slot

    crossing = []

    def spied(real):
        def execute(self, *args, **options):
            keys = _keys_of(args)
            if len({key_slot(k.encode() if isinstance(k, str) else k) for k in keys}) > 1:
                crossing.append(args)
            return real(self, *args, **options)
        return execute

    monkeypatch.setattr(Redis, "execute_command", spied(Redis.execute_command))
    monkeypatch.setattr(Pipeline, "pipeline_execute_command", spied(Pipeline.pipeline_execute_command))
    yield
    assert not crossing, f"commands whose keys lie in different hash slots (CROSSSLOT on a cluster): {crossing}"
