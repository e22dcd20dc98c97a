"""PostgreSQL access: connections, migrations, and the SQL of each table in a module
of its own (tenants, knowledge_bases, documents, chunks, agents, audit; a document's status
in document_status alone); scope.py holds the tenant rule they share."""
from chalicelib.storage.db import (EVERY_ORGANISATION, acting_for, connection, for_every_organisation, snapshot,
                                   transaction)

__all__ = ["EVERY_ORGANISATION", "acting_for", "connection", "for_every_organisation", "snapshot", "transaction"]
