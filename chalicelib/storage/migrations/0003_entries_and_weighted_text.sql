-- Text entries (an agent's earlier answer, say) live beside files as documents of
-- kind 'entry'. Full-text search weighs a chunk's title (A) above its body (B).
ALTER TABLE documents ADD COLUMN kind text NOT NULL DEFAULT 'file' CHECK (kind IN ('file', 'entry'));
ALTER TABLE documents ADD COLUMN title text;
ALTER TABLE documents ADD COLUMN created_by text REFERENCES users(id) ON DELETE SET NULL;
CREATE INDEX documents_entries_by_user_idx ON documents (created_by) WHERE kind = 'entry';

ALTER TABLE chunks ADD COLUMN title text;
ALTER TABLE chunks DROP COLUMN tsv;
ALTER TABLE chunks ADD COLUMN tsv tsvector GENERATED ALWAYS AS (
    setweight(to_tsvector('english', coalesce(title, '')), 'A') ||
    setweight(to_tsvector('english', content), 'B')) STORED;
CREATE INDEX chunks_tsv_idx ON chunks USING gin (tsv);
