"""The HTTP API: Chalice blueprints with thin handlers."""
from chalicelib.api.agents import blueprint as agents
from chalicelib.api.bedrock_compat import blueprint as bedrock_compat
from chalicelib.api.console import blueprint as console
from chalicelib.api.documents import blueprint as documents
from chalicelib.api.health import blueprint as health
from chalicelib.api.keys import blueprint as keys
from chalicelib.api.knowledge import blueprint as knowledge
from chalicelib.api.knowledge_bases import blueprint as knowledge_bases
from chalicelib.api.mcp import blueprint as mcp
from chalicelib.api.openai_compat import blueprint as openai_compat
from chalicelib.api.search import blueprint as search

__all__ = ["agents", "bedrock_compat", "console", "documents", "health", "keys", "knowledge", "knowledge_bases", "mcp",
           "openai_compat", "search"]
