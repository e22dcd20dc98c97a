-- Per-knowledge-base access (seed 004's `access: {read_roles, write_roles}`), on top of
-- visibility: lists that narrow who in the knowledge base's organisation reads it and who
-- writes documents and entries into it. NULL (both lists of a kind) is no narrowing. A
-- user matches a list by the organisation role (admin, editor, viewer), by one of their
-- groups (users.groups: "researcher", "engineer", set with `make key … GROUPS=`), or by
-- name. The owner and the organisation's admins always match. Read lists need visibility
-- 'org' (a private one is its owner's alone, a public one everybody's: the API refuses
-- them elsewhere); write lists need 'org' or 'public'. The role rules of auth/access.py
-- still hold: a viewer writes nothing whatever a list says.
ALTER TABLE users ADD COLUMN groups text[] NOT NULL DEFAULT '{}';
ALTER TABLE knowledge_bases
    ADD COLUMN read_roles text[],
    ADD COLUMN read_users text[],
    ADD COLUMN write_roles text[],
    ADD COLUMN write_users text[];

-- Whether `reader` (a user id) passes a knowledge base's lists. SECURITY DEFINER: the
-- users table's own policy would hide nothing here (the same organisation), but the
-- function is also the policies' and must not depend on what the session may read.
CREATE FUNCTION kb_access_allows(roles text[], names text[], owner text, org text, reader text)
RETURNS boolean LANGUAGE sql STABLE PARALLEL SAFE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    SELECT (roles IS NULL AND names IS NULL) OR reader = owner OR EXISTS (
        SELECT 1 FROM users u
         WHERE u.id = reader AND u.org_id = org
           AND (u.role = 'admin' OR u.role = ANY(roles) OR u.groups && roles OR u.name = ANY(names)))
$$;
REVOKE ALL ON FUNCTION kb_access_allows(text[], text[], text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kb_access_allows(text[], text[], text, text, text) TO kb_app;

-- Reads: a restrictive policy, so every permissive one of 0008 (the organisation's own,
-- public ones) is narrowed by it; documents, chunks and the BM25 tables read through
-- `kb_id IN (SELECT id FROM knowledge_bases)` and follow. Another organisation reaches
-- only public knowledge bases, which carry no read lists.
CREATE POLICY access_reads ON knowledge_bases AS RESTRICTIVE FOR SELECT TO kb_app
    USING (kb_org() = '*' OR org_id <> kb_org()
           OR kb_access_allows(read_roles, read_users, owner_id, org_id, kb_user()));

-- Writes of documents and chunks (an upload's registration, an entry, a deletion) pass the
-- write lists; the pipeline ('*') writes what the bucket holds.
CREATE FUNCTION kb_may_write(kb text) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    SELECT kb_org() = '*' OR coalesce((
        SELECT kb_access_allows(k.write_roles, k.write_users, k.owner_id, k.org_id, kb_user())
          FROM knowledge_bases k WHERE k.id = kb), false)
$$;
REVOKE ALL ON FUNCTION kb_may_write(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kb_may_write(text) TO kb_app;

CREATE POLICY access_inserts ON documents AS RESTRICTIVE FOR INSERT TO kb_app WITH CHECK (kb_may_write(kb_id));
CREATE POLICY access_updates ON documents AS RESTRICTIVE FOR UPDATE TO kb_app USING (kb_may_write(kb_id));
CREATE POLICY access_deletes ON documents AS RESTRICTIVE FOR DELETE TO kb_app USING (kb_may_write(kb_id));
CREATE POLICY access_inserts ON chunks AS RESTRICTIVE FOR INSERT TO kb_app WITH CHECK (kb_may_write(kb_id));
CREATE POLICY access_updates ON chunks AS RESTRICTIVE FOR UPDATE TO kb_app USING (kb_may_write(kb_id));
CREATE POLICY access_deletes ON chunks AS RESTRICTIVE FOR DELETE TO kb_app USING (kb_may_write(kb_id));

-- chunks_visible (0010, 0014, 0016) states the read rule of the policies: the lists too.
CREATE OR REPLACE VIEW chunks_visible AS
    SELECT c.*
      FROM chunks c
     WHERE c.kb_id IN (SELECT kb.id FROM knowledge_bases kb
                        WHERE kb_org() = '*' OR kb.visibility = 'public'
                           OR (kb.org_id = kb_org()
                               AND kb_access_allows(kb.read_roles, kb.read_users, kb.owner_id, kb.org_id, kb_user())))
       AND kb_reads_audience(c.audience);
