-- A document is its path (issue 27). The path is the object key below kb/{kbId}/, which
-- was the identity already (UNIQUE (kb_id, s3_key)); until now the API flattened it to the
-- bare file name, so a/index.html and b/index.html were one document and the later
-- upload silently replaced the earlier. `path` says it on the row: generated from the key,
-- so the trigger, the sync and the API cannot disagree. Entries (s3_key 'entries/{id}')
-- have none.
ALTER TABLE documents ADD COLUMN path text
    GENERATED ALWAYS AS (CASE WHEN kind = 'file' THEN substr(s3_key, length(kb_id) + 5) END) STORED;

-- Pages of a knowledge base's documents (GET .../documents): keyset order for each sort.
-- COLLATE "C": byte order, the order of S3's keys and of the prefix range the listing
-- scans, whatever the database's collation (Aurora's default is en_US.UTF-8).
CREATE INDEX documents_kb_key_idx ON documents (kb_id, s3_key COLLATE "C");
CREATE INDEX documents_kb_updated_idx ON documents (kb_id, updated_at, id);
DROP INDEX documents_kb_status_idx;
CREATE INDEX documents_kb_status_idx ON documents (kb_id, status, s3_key COLLATE "C");
