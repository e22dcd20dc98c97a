-- Isolation in depth: the functions log in as kb_app, which may only read and write rows
-- (no DDL, not a superuser, not the tables' owner), and row-level security limits every
-- statement of kb_app to the organisation named by the setting kb.org_id, which the
-- service sets for each request (storage/db.py: '' sees nothing, '*' is the ingestion
-- pipeline and key lookup, which act for the whole bucket). A query that forgets its
-- tenant condition still sees nothing foreign. The migrations and the owner are not
-- limited (tables' owners bypass their policies).

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'kb_app') THEN
        CREATE ROLE kb_app LOGIN;
    END IF;
    EXECUTE format('GRANT CONNECT ON DATABASE %I TO kb_app', current_database());
END $$;

GRANT USAGE ON SCHEMA public TO kb_app;
GRANT SELECT, INSERT, UPDATE, DELETE
    ON organizations, users, api_keys, knowledge_bases, documents, chunks, agents, audit_log TO kb_app;
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO kb_app;
-- Tables and sequences later migrations create are the functions' too, unless revoked there.
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO kb_app;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT ON SEQUENCES TO kb_app;

-- kb_app may not create indexes; a knowledge base of a new embedding dimension needs one.
CREATE OR REPLACE FUNCTION kb_ensure_vector_index(dim integer) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    IF dim IS NULL OR dim <= 0 OR dim > 2000 THEN
        RAISE EXCEPTION 'dimension % cannot be indexed with HNSW', dim;
    END IF;
    EXECUTE format('CREATE INDEX IF NOT EXISTS chunks_embedding_%s_hnsw ON chunks'
                   ' USING hnsw ((embedding::vector(%s)) vector_cosine_ops) WHERE embedding_dim = %s',
                   dim, dim, dim);
END $$;
REVOKE ALL ON FUNCTION kb_ensure_vector_index(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kb_ensure_vector_index(integer) TO kb_app;

-- The caller's organisation, '' when none was set, '*' for the pipeline.
CREATE OR REPLACE FUNCTION kb_org() RETURNS text LANGUAGE sql STABLE AS
$$ SELECT coalesce(current_setting('kb.org_id', true), '') $$;

ALTER TABLE users ENABLE ROW LEVEL SECURITY;
ALTER TABLE api_keys ENABLE ROW LEVEL SECURITY;
ALTER TABLE knowledge_bases ENABLE ROW LEVEL SECURITY;
ALTER TABLE documents ENABLE ROW LEVEL SECURITY;
ALTER TABLE chunks ENABLE ROW LEVEL SECURITY;
ALTER TABLE agents ENABLE ROW LEVEL SECURITY;
ALTER TABLE audit_log ENABLE ROW LEVEL SECURITY;

CREATE POLICY tenant ON users TO kb_app
    USING (org_id = kb_org() OR kb_org() = '*') WITH CHECK (org_id = kb_org() OR kb_org() = '*');
CREATE POLICY tenant ON api_keys TO kb_app
    USING (user_id IN (SELECT id FROM users)) WITH CHECK (user_id IN (SELECT id FROM users));
CREATE POLICY tenant ON agents TO kb_app
    USING (org_id = kb_org() OR kb_org() = '*') WITH CHECK (org_id = kb_org() OR kb_org() = '*');
CREATE POLICY tenant ON audit_log TO kb_app
    USING (org_id = kb_org() OR kb_org() = '*') WITH CHECK (org_id = kb_org() OR kb_org() = '*');

-- Knowledge bases: an organisation reads its own and public ones, and writes its own.
CREATE POLICY tenant_writes ON knowledge_bases TO kb_app
    USING (org_id = kb_org() OR kb_org() = '*') WITH CHECK (org_id = kb_org() OR kb_org() = '*');
CREATE POLICY public_reads ON knowledge_bases FOR SELECT TO kb_app USING (visibility = 'public');

-- Documents and chunks follow their knowledge base (the subquery is itself limited by
-- the policies above): read where it can be read, written where it can be written.
CREATE POLICY reads ON documents FOR SELECT TO kb_app USING (kb_id IN (SELECT id FROM knowledge_bases));
CREATE POLICY writes ON documents TO kb_app
    USING (kb_id IN (SELECT id FROM knowledge_bases WHERE org_id = kb_org() OR kb_org() = '*'))
    WITH CHECK (kb_id IN (SELECT id FROM knowledge_bases WHERE org_id = kb_org() OR kb_org() = '*'));
CREATE POLICY reads ON chunks FOR SELECT TO kb_app USING (kb_id IN (SELECT id FROM knowledge_bases));
CREATE POLICY writes ON chunks TO kb_app
    USING (kb_id IN (SELECT id FROM knowledge_bases WHERE org_id = kb_org() OR kb_org() = '*'))
    WITH CHECK (kb_id IN (SELECT id FROM knowledge_bases WHERE org_id = kb_org() OR kb_org() = '*'));
