-- A knowledge base's source besides its bucket prefix (seed 003's sources, issue 31): another
-- S3-compatible bucket and prefix, or a folder of the local stack's machine, mirrored into
-- the prefix by a sync (chalicelib/sources). NULL: the prefix alone.
ALTER TABLE knowledge_bases ADD COLUMN source jsonb;
