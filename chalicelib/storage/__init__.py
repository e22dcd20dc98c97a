"""PostgreSQL access: connections, migrations and every SQL statement of the service."""
from chalicelib.storage.db import connection, snapshot, transaction

__all__ = ["connection", "snapshot", "transaction"]
