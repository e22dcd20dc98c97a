"""One module per document format, each with its reader and its entry (FORMATS) in the
registry (registry.py); chalicelib.ingestion.extract sniffs the type and reads it with the
registry's reader. Heavy libraries are imported inside the readers, so that the functions
without the documents layer (the API, Chunk) can import the records."""
