-- Agents that learn (issue 16). Entries gain what extraction knows of them, an entry
-- posted again is found by its content, agents say how their runtime gets knowledge,
-- and a long extraction runs as a job the caller polls.

-- Entries: content_hash (already a column of documents) is the SHA-256 of the entry's
-- normalised content; within a knowledge base an entry's content is stored once. Entries
-- written before this have no hash and are not de-duplicated.
CREATE UNIQUE INDEX documents_entry_content_idx ON documents (kb_id, content_hash)
    WHERE kind = 'entry' AND content_hash IS NOT NULL;
-- Seed 003's levels: individual (the user who wrote it), organisation, public.
-- NULL (an entry posted directly) reads as individual.
ALTER TABLE documents ADD COLUMN level text CHECK (level IN ('individual', 'organisation', 'public'));
ALTER TABLE documents ADD COLUMN entry_type text;
ALTER TABLE documents ADD COLUMN confidence real CHECK (confidence BETWEEN 0 AND 1);
ALTER TABLE documents ADD COLUMN agent_id text REFERENCES agents(id) ON DELETE SET NULL;
-- Where an entry came from: one item per extraction that created it or merged into it.
ALTER TABLE documents ADD COLUMN provenance jsonb NOT NULL DEFAULT '[]'::jsonb;
CREATE INDEX documents_entries_of_agent_idx ON documents (agent_id) WHERE kind = 'entry';

ALTER TABLE agents ADD COLUMN knowledge_mode text NOT NULL DEFAULT 'tool'
    CHECK (knowledge_mode IN ('tool', 'auto'));

-- Extractions of long conversations, run after the request answered 202.
CREATE TABLE extraction_jobs (
    id          text PRIMARY KEY,
    org_id      text NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    user_id     text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    agent_id    text NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    status      text NOT NULL DEFAULT 'PENDING' CHECK (status IN ('PENDING', 'RUNNING', 'SUCCEEDED', 'FAILED')),
    request     jsonb NOT NULL,
    result      jsonb,
    error       jsonb,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX extraction_jobs_agent_idx ON extraction_jobs (agent_id, created_at);
GRANT SELECT, INSERT, UPDATE, DELETE ON extraction_jobs TO kb_app;
ALTER TABLE extraction_jobs ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant ON extraction_jobs TO kb_app
    USING (org_id = kb_org() OR kb_org() = '*') WITH CHECK (org_id = kb_org() OR kb_org() = '*');
