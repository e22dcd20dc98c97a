-- Knowledge bases changed while Redis could not be told (freshness.bump failed): their
-- counters are moved when Redis answers again, before any cached answer is served
-- (freshness.reopen). Rows are written by the session that made the change, read and
-- deleted by a session acting for every organisation.
CREATE TABLE kb_unmarked_changes (
    id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kb_id     text NOT NULL,  -- no foreign key: a deleted knowledge base's change counts too
    org_id    text NOT NULL DEFAULT kb_org(),
    noted_at  timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE kb_unmarked_changes ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant ON kb_unmarked_changes TO kb_app
    USING (org_id = kb_org() OR kb_org() = '*') WITH CHECK (org_id = kb_org() OR kb_org() = '*');
