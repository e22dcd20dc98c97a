-- Seed 003's merges a model decides (issue 31): an entry rewritten with merged content keeps
-- what it said before in `history` ([{title, content, replacedAt, reason, ...}], oldest first),
-- and an entry the merge folded in is superseded: its chunks leave search, the row stays
-- readable, pointing at the entry that now holds its knowledge (its text is in that
-- entry's history too).
ALTER TABLE documents
    ADD COLUMN history jsonb NOT NULL DEFAULT '[]',
    ADD COLUMN superseded_by text REFERENCES documents(id) ON DELETE SET NULL;
