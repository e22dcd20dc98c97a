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


def _postings(conn, unpack: str) -> set[tuple]:
    return {(r[0], r[1], r[2], r[3]) for r in conn.execute(
        f"SELECT b.term, u.id, u.tf, u.dl FROM term_blocks b CROSS JOIN LATERAL {unpack} u")}


def test_an_upgrade_from_0026_answers_before_packing_and_searches_read_both_layouts(empty_database, response_url):
    """A deployment at 0026 with postings in blocks: 0027 and 0028 apply without rewriting them
    (at a million chunks that took 177 s in one transaction, of this function's 300), the
    answer goes to CloudFormation, and only then are the blocks packed, in the time left."""
    from types import SimpleNamespace

    from psycopg.rows import dict_row

    from chalicelib import limits
    from chalicelib.storage import term_blocks, terms
    from chalicelib.storage.migrate import pending, repack_old_blocks

    words = ["pump", "valve", "seal", "impeller", "water", "boat", "garden", "priming", "bilge", "rain"]
    with psycopg.connect(empty_database, autocommit=True) as conn:
        for path in [p for p in pending(conn) if p.stem[:4] <= "0026"]:
            with conn.transaction():
                conn.execute(path.read_text())
                conn.execute("INSERT INTO schema_migrations (version) VALUES (%s)", (path.stem,))
        conn.execute("INSERT INTO organizations (id, name) VALUES ('org_up', 'Upgraded')")
        conn.execute("INSERT INTO users (id, org_id, name) VALUES ('alice', 'org_up', 'Alice')")
        conn.execute("INSERT INTO knowledge_bases (id, org_id, owner_id, name, embedding_provider, embedding_model,"
                     " embedding_dim, chunk_tokens, chunk_overlap) VALUES ('kb_up', 'org_up', 'alice', 'Pumps',"
                     " 'local', 'minilm', 3, 200, 20)")
        conn.execute("INSERT INTO documents (id, kb_id, s3_key, filename) VALUES ('doc_up', 'kb_up', 'k', 'f.txt')")
        for i in range(300):  # ids 70 apart for some terms, thousands for others: several widths
            text = " ".join(words[(i * j) % len(words)] for j in range(1, 2 + i % 7))
            conn.execute("INSERT INTO chunks (document_id, kb_id, chunk_index, content, start_char, end_char,"
                         " token_count, embedding_dim, embedding) VALUES ('doc_up', 'kb_up', %s, %s, 0, 1, 1, 3,"
                         " '[1,0,0]')", (i, text))
        conn.execute("SELECT kb_bm25_compact('kb_up', 16)")  # 0026's blocks: each id whole
        before = _postings(conn, "kb_bm25_unpack(b.ids, b.tfs, b.dls)")
    assert len(before) > 300
    no_time_left = SimpleNamespace(get_remaining_time_in_millis=lambda: limits.MIGRATE_MARGIN_SECONDS * 1000 - 1,
                                   log_stream_name="migrate")
    handle_custom_resource(_event("Update", response_url.url), no_time_left)
    (answer,) = response_url.answers
    assert answer["Status"] == "SUCCESS"
    assert answer["Data"]["Applied"].split(",")[:2] == ["0027_bm25_packed_blocks", "0028_bm25_repack"]
    unpack = "kb_bm25_unpack(b.first_id, b.id_bytes, b.tf_bytes, b.dl_bytes, b.ids, b.tfs, b.dls)"
    with psycopg.connect(empty_database, autocommit=True, row_factory=dict_row) as conn:
        assert terms.with_old_blocks(conn) == ["kb_up"]  # no time was left to pack them
        assert {tuple(r.values()) for r in conn.execute(
            f"SELECT b.term, u.id, u.tf, u.dl FROM term_blocks b CROSS JOIN LATERAL {unpack} u")} == before
        read = term_blocks.BlockPostings(conn, ["kb_up"]).read(sorted({t for t, *_ in before}))
    assert {(t, i, tf, dl) for t, p in read.items() for i, tf, dl in zip(p.ids.tolist(), p.tfs, p.dls)} == before
    assert repack_old_blocks(empty_database) > 0
    with psycopg.connect(empty_database, autocommit=True, row_factory=dict_row) as conn:
        assert terms.with_old_blocks(conn) == []
        assert {tuple(r.values()) for r in conn.execute(
            f"SELECT b.term, u.id, u.tf, u.dl FROM term_blocks b CROSS JOIN LATERAL {unpack} u")} == before
        widths = conn.execute("SELECT max(id_bytes) AS ids, min(id_bytes) AS least FROM term_blocks").fetchone()
        read = term_blocks.BlockPostings(conn, ["kb_up"]).read(sorted({t for t, *_ in before}))
    assert widths["least"] >= 1 and widths["ids"] <= 2  # steps of a few hundred at most
    assert {(t, i, tf, dl) for t, p in read.items() for i, tf, dl in zip(p.ids.tolist(), p.tfs, p.dls)} == before
