import psycopg

from chalicelib.storage.migrate import migrate


def test_migrations_create_the_schema_and_are_safe_to_run_twice(migrated, database_url):
    from chalicelib.storage.migrate import MIGRATIONS_DIR

    assert migrated == sorted(p.stem for p in MIGRATIONS_DIR.glob("*.sql"))
    assert migrated[0] == "0001_init"
    assert migrate(database_url) == []
    with psycopg.connect(database_url) as conn:
        indexes = {r[0] for r in conn.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'chunks'")}
        version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0]
    assert {"chunks_embedding_384_hnsw", "chunks_embedding_1536_hnsw", "chunks_tsv_idx",
            "chunks_kb_idx"} <= indexes
    assert version.startswith("0.")


def test_api_keys_are_stored_only_as_hashes(tenant, database_url):
    from chalicelib.auth import authenticate

    principal, key = tenant
    assert authenticate(key) == principal
    assert authenticate(key + "x") is None
    assert authenticate("not-a-key") is None
    with psycopg.connect(database_url) as conn:
        stored = [r[0] for r in conn.execute("SELECT key_hash FROM api_keys")]
    assert key not in stored and all(len(h) == 64 for h in stored)
