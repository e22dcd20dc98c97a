"""PostgreSQL access: connections, migrations, and the SQL of each table in a module
of its own (tenants, knowledge_bases, documents, chunks, agents, audit); scope.py holds
the tenant rule they share."""
from chalicelib.storage.db import connection, snapshot, transaction

__all__ = ["connection", "snapshot", "transaction"]
