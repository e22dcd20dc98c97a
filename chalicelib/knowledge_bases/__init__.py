"""Knowledge bases: creation, reads scoped to the caller, changes and deletion."""
from chalicelib.knowledge_bases.service import (VISIBILITIES, create_knowledge_base, delete_knowledge_base,
                                                get_knowledge_base, list_knowledge_bases, parse_access, parse_chunking,
                                                parse_search_settings, update_knowledge_base)

__all__ = ["VISIBILITIES", "create_knowledge_base", "delete_knowledge_base", "get_knowledge_base",
           "list_knowledge_bases", "parse_access", "parse_chunking", "parse_search_settings", "update_knowledge_base"]
