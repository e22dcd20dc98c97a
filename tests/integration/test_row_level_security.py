"""Isolation in depth (migration 0008): connected as the functions' role, kb_app, a query
that forgets its tenant condition still sees and changes nothing of another organisation."""
import secrets

import psycopg
import pytest
from psycopg.rows import dict_row

from chalicelib.storage.db import functions_login

TABLES = ("users", "api_keys", "knowledge_bases", "documents", "chunks", "agents", "audit_log")


@pytest.fixture
def two_orgs(service_env):
    from chalicelib.agents import service as agents
    from chalicelib.auth import issue_key
    from chalicelib.documents.entries import create_entry
    from chalicelib.knowledge_bases import create_knowledge_base

    made = {}
    for org in ("a", "b"):
        principal, _ = issue_key(f"rls-{org}-{secrets.token_hex(3)}", "owner")
        kbs = {v: create_knowledge_base(principal, name=f"{org} {v}", description="", visibility=v)
               for v in ("private", "org", "public")}
        for kb in kbs.values():
            create_entry(principal, kb["id"], title=f"{org} note", content=f"Secret of {org}: the pump code.",
                         metadata={}, level="public")
            for level in ("individual", "organisation"):  # below public (migration 0014)
                create_entry(principal, kb["id"], title=f"{org} {level}", content=f"{level} note of {org}",
                             metadata={}, level=level)
        agents.create_agent(principal, name=f"{org} bot", description="", tools=[])
        made[org] = (principal, kbs)
    return made


def _as_app(database_url: str, org_id, user_id: str | None = None) -> psycopg.Connection:
    conn = psycopg.connect(functions_login(database_url),
                           autocommit=True, row_factory=dict_row)
    if org_id is not None:
        conn.execute("SELECT set_config('kb.org_id', %s, false)", (org_id,))
    if user_id is not None:
        conn.execute("SELECT set_config('kb.user_id', %s, false)", (user_id,))
    return conn


def _orgs_of(conn, table: str) -> set[str]:
    """The organisations whose rows an unscoped SELECT of the table returns."""
    joins = {
        "users": "SELECT org_id FROM users",
        "api_keys": "SELECT u.org_id FROM api_keys k JOIN users u USING (id)",
        "knowledge_bases": "SELECT org_id FROM knowledge_bases",
        "documents": "SELECT kb.org_id FROM documents d JOIN knowledge_bases kb ON kb.id = d.kb_id",
        "chunks": "SELECT kb.org_id FROM chunks c JOIN knowledge_bases kb ON kb.id = c.kb_id",
        "agents": "SELECT org_id FROM agents",
        "audit_log": "SELECT org_id FROM audit_log",
    }
    return {r["org_id"] for r in conn.execute(joins[table])}


def test_an_unscoped_query_returns_no_foreign_rows(two_orgs, database_url):
    (a, a_kbs), (_, b_kbs) = two_orgs["a"], two_orgs["b"]
    with psycopg.connect(database_url, autocommit=True) as owner:  # BM25's blocks too, not only its tail
        owner.execute("SELECT kb_bm25_compact(id, 1024) FROM knowledge_bases")
    with _as_app(database_url, a.org_id, a.user_id) as conn:
        assert conn.execute("SELECT current_user AS u").fetchone()["u"] == "kb_app"
        for table in ("users", "agents", "audit_log"):
            assert _orgs_of(conn, table) == {a.org_id}, table
        # knowledge bases, documents and chunks: its own, and other organisations' public ones only
        visible = {r["id"] for r in conn.execute("SELECT id FROM knowledge_bases")}
        assert {kb["id"] for kb in a_kbs.values()} <= visible
        assert visible & {kb["id"] for kb in b_kbs.values()} == {b_kbs["public"]["id"]}
        # chunks_visible: the view keyword search's fallback reads; the last four: BM25's (0011, 0026)
        for table in ("documents", "chunks", "chunks_visible", "chunk_terms", "term_blocks", "kb_terms",
                      "kb_text_stats"):
            foreign = {r["kb_id"] for r in conn.execute(f"SELECT kb_id FROM {table}")} - visible
            assert foreign == set(), table
        contents = " ".join(r["content"] for r in conn.execute("SELECT content FROM chunks"))
        assert "Secret of a" in contents and contents.count("Secret of b") == 1  # b's public one
        assert {r["user_id"] for r in conn.execute("SELECT user_id FROM api_keys")} == {a.user_id}


def test_without_an_organisation_nothing_but_public_knowledge_is_visible(two_orgs, database_url):
    with _as_app(database_url, None) as conn:
        for table in ("users", "api_keys", "agents", "audit_log"):
            assert conn.execute(f"SELECT count(*) AS n FROM {table}").fetchone()["n"] == 0, table
        assert {r["visibility"] for r in conn.execute("SELECT visibility FROM knowledge_bases")} == {"public"}
        public = {r["id"] for r in conn.execute("SELECT id FROM knowledge_bases")}
        assert {r["kb_id"] for r in conn.execute("SELECT kb_id FROM chunks_visible")} <= public


def test_writes_to_another_organisation_are_refused_or_touch_nothing(two_orgs, database_url):
    (a, _), (b, b_kbs) = two_orgs["a"], two_orgs["b"]
    public = b_kbs["public"]["id"]
    with _as_app(database_url, a.org_id) as conn:
        assert conn.execute("UPDATE knowledge_bases SET name = 'mine' WHERE id = %s", (public,)).rowcount == 0
        assert conn.execute("DELETE FROM chunks WHERE kb_id = %s", (public,)).rowcount == 0
        assert conn.execute("DELETE FROM documents").rowcount > 0  # its own, only
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # new row violates row-level security
            conn.execute("INSERT INTO documents (id, kb_id, s3_key, filename) VALUES ('doc_x', %s, 'k', 'f')",
                         (public,))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("INSERT INTO agents (id, org_id, owner_id, name) VALUES ('agent_x', %s, %s, 'x')",
                         (b.org_id, b.user_id))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # BM25's rows: the triggers' alone
            conn.execute("INSERT INTO kb_terms (kb_id, term, df, max_tf, min_dl) VALUES (%s, 'pump', 1000, 1, 1)",
                         (public,))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("DELETE FROM term_blocks WHERE kb_id = %s", (public,))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # no DDL either
            conn.execute("DROP TABLE audit_log")
    with _as_app(database_url, b.org_id) as conn:
        names = {r["name"] for r in conn.execute("SELECT name FROM knowledge_bases WHERE org_id = %s", (b.org_id,))}
        assert "mine" not in names
        b_ids = [kb["id"] for kb in b_kbs.values()]
        assert conn.execute("SELECT count(*) AS n FROM documents WHERE kb_id = ANY(%s)",
                            (b_ids,)).fetchone()["n"] == 6  # b's untouched (its writer's own entries unseen)


def test_bm25_maintenance_is_scoped_to_the_organisation_acted_for(two_orgs, database_url):
    """kb_bm25_compact and kb_bm25_repack run as their owner (they write blocks kb_app may only
    read): as kb_app, only for the organisation the session acts for, or for every one as the
    pipeline ('*'); their bodies are not callable by kb_app at all (migration 0031)."""
    (a, a_kbs), (_, b_kbs) = two_orgs["a"], two_orgs["b"]
    theirs, ours = b_kbs["public"]["id"], a_kbs["private"]["id"]

    def blocks(kb_id: str) -> int:
        with psycopg.connect(database_url) as owner:
            return owner.execute("SELECT count(*) FROM term_blocks WHERE kb_id = %s", (kb_id,)).fetchone()[0]

    before = blocks(theirs)
    for org in (a.org_id, None):  # another organisation's, or none set
        with _as_app(database_url, org) as conn:
            for call in ("SELECT kb_bm25_compact(%s, 2)", "SELECT kb_bm25_repack(%s, 10)"):
                with pytest.raises(psycopg.errors.InsufficientPrivilege, match="not of the organisation"):
                    conn.execute(call, (theirs,))
            for call in ("SELECT kb_bm25_compact_any(%s, 2)", "SELECT kb_bm25_repack_any(%s, 10)"):
                with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied"):
                    conn.execute(call, (theirs,))
    assert blocks(theirs) == before  # nothing folded: each entry's store left its tail
    with _as_app(database_url, a.org_id) as conn:  # its own: folded into blocks of 2
        assert conn.execute("SELECT kb_bm25_compact(%s, 2) AS n", (ours,)).fetchone()["n"] > 0
        assert conn.execute("SELECT kb_bm25_repack(%s, 10) AS n", (ours,)).fetchone()["n"] == 0
    with _as_app(database_url, "*") as conn:  # the pipeline's stores fold any knowledge base's tail
        assert conn.execute("SELECT kb_bm25_compact(%s, 2) AS n", (theirs,)).fetchone()["n"] > 0
    assert blocks(theirs) > before


LEVEL_READS = ("SELECT content FROM chunks", "SELECT content FROM chunks_visible",
               "SELECT title AS content FROM documents")


def _levels_read(conn, org: str) -> dict[str, set[str]]:
    """{query: the levels of org's entries it returns}, each query without any condition."""
    return {q: {level for level in ("individual", "organisation")
                if any(f"{level} note of {org}" in (r["content"] or "") or r["content"] == f"{org} {level}"
                       for r in conn.execute(q))} for q in LEVEL_READS}


def test_an_entry_below_public_reaches_its_audience_whatever_the_query_forgets(two_orgs, database_url):
    """Migration 0014: the policies and chunks_visible hold entry levels as they hold tenants:
    an individual entry is its writer's alone, an organisation one its organisation's."""
    (a, a_kbs), (b, _) = two_orgs["a"], two_orgs["b"]
    with _as_app(database_url, a.org_id, a.user_id) as conn:  # the writer
        assert _levels_read(conn, "a") == dict.fromkeys(LEVEL_READS, {"individual", "organisation"})
    with _as_app(database_url, a.org_id, "user_colleague") as conn:  # a colleague, whatever the role
        assert _levels_read(conn, "a") == dict.fromkeys(LEVEL_READS, {"organisation"})
        # nor may it change or remove what it cannot read
        assert conn.execute("UPDATE documents SET title = 'x' WHERE title = 'a individual'").rowcount == 0
        assert conn.execute("DELETE FROM chunks WHERE content = 'individual note of a'").rowcount == 0
    with _as_app(database_url, b.org_id, b.user_id) as conn:  # another organisation: a's public kb
        assert _levels_read(conn, "a") == dict.fromkeys(LEVEL_READS, set())
        assert "Secret of a" in " ".join(r["content"] for r in conn.execute("SELECT content FROM chunks"))
    with _as_app(database_url, "*") as conn:  # the pipeline reads every level
        assert _levels_read(conn, "a") == dict.fromkeys(LEVEL_READS, {"individual", "organisation"})


def test_the_functions_role_is_not_privileged(migrated, database_url):
    with _as_app(database_url, "*") as conn:
        role = conn.execute("SELECT rolsuper, rolbypassrls, rolcreaterole, rolcreatedb FROM pg_roles"
                            " WHERE rolname = current_user").fetchone()
        assert role == {"rolsuper": False, "rolbypassrls": False, "rolcreaterole": False, "rolcreatedb": False}
        owners = {r["tableowner"] for r in conn.execute(
            "SELECT tableowner FROM pg_tables WHERE schemaname = 'public'")}
        assert "kb_app" not in owners


def test_a_key_is_looked_up_before_the_organisation_is_known_and_only_that_key(service_env, database_url):
    from chalicelib.auth import issue_key
    from chalicelib.auth.keys import hash_key

    principal, key = issue_key(f"rls-key-{secrets.token_hex(3)}", "kim")
    with _as_app(database_url, None) as conn:  # acting for no organisation
        found = conn.execute("SELECT * FROM kb_principal(%s)", (hash_key(key),)).fetchall()
        assert [(r["user_id"], r["org_id"], r["key_id"]) for r in found] == [
            (principal.user_id, principal.org_id, principal.key_id)]
        assert conn.execute("SELECT * FROM kb_principal(%s)", (hash_key(key + "x"),)).fetchall() == []
        assert conn.execute("SELECT count(*) AS n FROM api_keys").fetchone()["n"] == 0  # the table stays shut
    # a worker's session still acting for its last caller's organisation (keys._find_principal
    # keeps it) finds the key of another organisation all the same
    other, _ = issue_key(f"rls-key-{secrets.token_hex(3)}", "lee")
    with _as_app(database_url, other.org_id, other.user_id) as conn:
        found = conn.execute("SELECT * FROM kb_principal(%s)", (hash_key(key),)).fetchall()
        assert [r["org_id"] for r in found] == [principal.org_id]


def test_entry_levels_hold_in_sql_alone(service_env):
    """The same rule without the policies: the suite's in-process service logs in as the
    tables' owner, which row-level security does not limit, so only the SQL conditions
    (storage/scope.py readable) keep a colleague from the writer's individual entry."""
    from chalicelib.auth import issue_key
    from chalicelib.documents import service as documents
    from chalicelib.documents.listing import DocumentQuery
    from chalicelib.documents.entries import create_entry, search_entries
    from chalicelib.errors import NotFound
    from chalicelib.knowledge_bases import create_knowledge_base, get_knowledge_base
    from chalicelib.retrieval import SearchRequest, search

    org = f"sql-levels-{secrets.token_hex(3)}"
    writer, _ = issue_key(org, "wanda")
    colleague, _ = issue_key(org, "cole")
    kb = create_knowledge_base(writer, name="Shared", description="", visibility="org")
    made = {level: create_entry(writer, kb["id"], title=f"Pump {level}", metadata={}, level=level,
                                content=f"The {level} reset code of the cooling pump is 4417.")
            for level in ("individual", "organisation")}

    def levels(texts) -> set[str]:
        texts = list(texts)
        return {level for level in made if any(f"The {level} reset" in t for t in texts)}

    for who, expected in ((writer, {"individual", "organisation"}), (colleague, {"organisation"})):
        for strategy in ("hybrid", "semantic", "keyword"):
            answer = search(who, SearchRequest(knowledge_base_ids=(kb["id"],), query="cooling pump reset code",
                                               strategy=strategy, top_k=10))
            assert levels(p.content for p in answer.passages) == expected, (who.user_id, strategy)
        assert levels(p.content for p in search_entries(who, "cooling pump reset code", 10)) == expected
        assert {d["id"] for d in documents.list_documents(who, kb["id"], DocumentQuery(limit=100))[0]} == {made[lv].id for lv in expected}
        assert get_knowledge_base(who, kb["id"])["stats"]["documentCount"] == len(expected)
    with pytest.raises(NotFound):
        documents.get_document(colleague, kb["id"], made["individual"].id)
    again = create_entry(colleague, kb["id"], title="Mine", metadata={},
                         content="The individual reset code of the cooling pump is 4417.")
    assert again.created and again.id != made["individual"].id


def test_line_counts_are_read_and_written_as_their_knowledge_base(two_orgs, database_url):
    """kb_lines (repeated lines, migration 0037): each row is its knowledge base's, and the
    trigger that keeps the counts acts with the session's rights."""
    (a, a_kbs), (_, b_kbs) = two_orgs["a"], two_orgs["b"]
    public, private = b_kbs["public"]["id"], a_kbs["private"]["id"]
    with psycopg.connect(database_url, autocommit=True) as owner:
        owner.execute("UPDATE documents SET line_hashes = '{0,42}'")  # every document holds line 42
    with _as_app(database_url, a.org_id, a.user_id) as conn:
        seen = {r["kb_id"]: r["documents"] for r in conn.execute("SELECT kb_id, documents FROM kb_lines"
                                                                 " WHERE line_hash = 42")}
        visible = {r["id"] for r in conn.execute("SELECT id FROM knowledge_bases")}
        assert {kb["id"] for kb in a_kbs.values()} | {public} <= set(seen) <= visible
        assert not set(seen) & {b_kbs["private"]["id"], b_kbs["org"]["id"]}
        assert seen[private] == 3  # its three entries
        assert conn.execute("UPDATE kb_lines SET documents = 0 WHERE kb_id = %s", (public,)).rowcount == 0
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("INSERT INTO kb_lines (kb_id, line_hash, documents) VALUES (%s, 7, 100)", (public,))
        conn.execute("DELETE FROM documents WHERE kb_id = %s AND title = 'a note'", (private,))
        assert conn.execute("SELECT documents FROM kb_lines WHERE kb_id = %s AND line_hash = 42",
                            (private,)).fetchone()["documents"] == 2
