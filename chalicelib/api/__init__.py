"""The HTTP API: Chalice blueprints with thin handlers."""
from chalicelib.api.knowledge_bases import blueprint as knowledge_bases

__all__ = ["knowledge_bases"]
