"""Knowledge bases and their documents, as the API shows them."""
from chalicelib.knowledge_bases.service import (DOCUMENT_STATUSES, create_knowledge_base,
                                                delete_knowledge_base, get_knowledge_base,
                                                list_documents, list_knowledge_bases,
                                                update_knowledge_base)

__all__ = ["DOCUMENT_STATUSES", "create_knowledge_base", "delete_knowledge_base", "get_knowledge_base",
           "list_documents", "list_knowledge_bases", "update_knowledge_base"]
