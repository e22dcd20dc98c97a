-- How many times the reconcile sweep restarted the document's run after it ended
-- without a verdict (an emulator or Lambda restart); a new upload starts from 0.
ALTER TABLE documents ADD COLUMN run_attempts integer NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS documents_unfinished_idx ON documents (updated_at)
    WHERE status IN ('PENDING', 'PROCESSING');
