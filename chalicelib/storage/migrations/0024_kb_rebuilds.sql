-- Seed 003's rebuildKnowledgeIndex (issue 31): a knowledge base re-chunked and re-embedded
-- whole, optionally with new chunking settings. A rebuild fans its documents out to the
-- pipeline from the jobs function; its progress is read from the documents themselves
-- (processed, or failed, since it started), so nothing has to count as runs end. Search
-- answers from each document's old chunks until its new ones are switched in (0016).
CREATE TABLE kb_rebuilds (
    id           text PRIMARY KEY,
    org_id       text NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    kb_id        text NOT NULL REFERENCES knowledge_bases(id) ON DELETE CASCADE,
    user_id      text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    chunking     jsonb NOT NULL,
    total        integer NOT NULL,
    started      integer NOT NULL DEFAULT 0,  -- documents handed to the pipeline so far
    error        jsonb,
    created_at   timestamptz NOT NULL DEFAULT now(),
    claimed_at   timestamptz,  -- the jobs function's invocation that hands the documents out (one only)
    fanned_out_at timestamptz
);
CREATE INDEX kb_rebuilds_kb_idx ON kb_rebuilds (kb_id, created_at DESC);

ALTER TABLE kb_rebuilds ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant ON kb_rebuilds TO kb_app
    USING (org_id = kb_org() OR kb_org() = '*') WITH CHECK (org_id = kb_org() OR kb_org() = '*');
