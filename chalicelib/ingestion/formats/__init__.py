"""One module per document format; chalicelib.ingestion.extract sniffs the type and
dispatches. Each reader returns an Extracted: sections of text with their page and
heading trail. Heavy libraries are imported inside the readers, so that the functions
without the documents layer (the API, Chunk) can import the records."""
