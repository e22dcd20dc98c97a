"""The deployment's migration step (Custom::DatabaseMigration): it applies what is pending
on a real database and always answers CloudFormation at the ResponseURL, failures included."""
import secrets

import psycopg
import pytest

from chalicelib.storage import db
from chalicelib.storage.migrate import MIGRATIONS_DIR, handle_custom_resource
from tests.integration.conftest import _with_database
from tests.local_http import LocalJsonServer


class ResponseUrl(LocalJsonServer):
    """Stands in for the presigned S3 URL CloudFormation waits on: records each answer."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/response"

    @property
    def answers(self) -> list[dict]:
        return self.requests

    def reply(self, body: dict) -> tuple[int, dict]:
        return 200, {}


@pytest.fixture
def response_url():
    with ResponseUrl() as server:
        yield server


@pytest.fixture
def empty_database(local_env, monkeypatch):
    name = f"kb_mig_{secrets.token_hex(4)}"
    admin = local_env["DATABASE_URL"]
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    url = _with_database(admin, name)
    monkeypatch.setenv("DATABASE_URL", url)
    db.reset()
    yield url
    db.reset()
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _event(kind: str, url: str) -> dict:
    return {"RequestType": kind, "ResponseURL": url, "StackId": "arn:aws:cloudformation:us-east-1:0:stack/kb/1",
            "RequestId": secrets.token_hex(8), "LogicalResourceId": "DatabaseMigration",
            "ResourceProperties": {"MigrationsVersion": "abc"}}


def test_create_applies_every_migration_and_update_finds_nothing_pending(empty_database, response_url):
    handle_custom_resource(_event("Create", response_url.url), None)
    handle_custom_resource(_event("Update", response_url.url), None)
    first, second = response_url.answers
    assert first["Status"] == second["Status"] == "SUCCESS", first
    assert first["Data"]["Applied"].split(",") == sorted(p.stem for p in MIGRATIONS_DIR.glob("*.sql"))
    assert second["Data"]["Applied"] == "none"
    assert first["PhysicalResourceId"] == "database-migrations"
    with psycopg.connect(empty_database) as conn:
        tables = {r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
    assert {"knowledge_bases", "documents", "chunks", "schema_migrations"} <= tables


def test_delete_keeps_the_data(empty_database, response_url):
    handle_custom_resource(_event("Create", response_url.url), None)
    handle_custom_resource({**_event("Delete", response_url.url), "PhysicalResourceId": "database-migrations"}, None)
    assert [a["Status"] for a in response_url.answers] == ["SUCCESS", "SUCCESS"]
    with psycopg.connect(empty_database) as conn:
        assert conn.execute("SELECT count(*) FROM schema_migrations").fetchone()[0] > 0


def test_a_failure_is_reported_to_cloudformation_not_raised(monkeypatch, response_url):
    """An unreachable database fails the deployment with a reason, instead of leaving
    CloudFormation waiting an hour for an answer that never comes."""
    monkeypatch.setenv("DATABASE_URL", "postgresql://nobody@127.0.0.1:1/none?connect_timeout=2")
    db.reset()
    handle_custom_resource(_event("Create", response_url.url), None)
    (answer,) = response_url.answers
    assert answer["Status"] == "FAILED"
    assert answer["Reason"].startswith("migration failed: OperationalError")
