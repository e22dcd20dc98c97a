"""PostgreSQL access: connections, migrations and every SQL statement of the service."""
from chalicelib.storage.db import connection, transaction

__all__ = ["connection", "transaction"]
