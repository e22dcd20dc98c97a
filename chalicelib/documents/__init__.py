"""A document's life in one place: uploads, ingestion runs (started by the S3
trigger, a re-index or a sidecar), reads and deletion, and text entries.

No imports here: the S3 trigger's function loads documents.trigger alone, without
the search and embedding code that entries need."""
