"""Knowledge bases and their documents, as the API shows them."""
from chalicelib.knowledge_bases.service import (create_knowledge_base, get_knowledge_base,
                                                list_documents, list_knowledge_bases)

__all__ = ["create_knowledge_base", "get_knowledge_base", "list_documents", "list_knowledge_bases"]
