"""What agents learn: knowledge extracted from conversations into entries (extract.py),
and, for long conversations, the jobs that extract it after the request answered (jobs.py)."""
from chalicelib.knowledge.extract import Conversation, Extraction, extract, parse_conversation

__all__ = ["Conversation", "Extraction", "extract", "parse_conversation"]
