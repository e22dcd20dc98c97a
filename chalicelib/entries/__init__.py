"""Text entries: prior answers kept as knowledge, searchable as soon as they are written."""
from chalicelib.entries.service import create_entry, search_entries

__all__ = ["create_entry", "search_entries"]
