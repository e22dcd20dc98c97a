"""What the tools the service runs answer the model, as JSON Schema: MCP's outputSchema
(2025-06-18) in tools/list. The answers themselves are built at the HTTP edge
(api/views.tool_result_view); MCP clients validate a result against these, so a field
the views add must be added here (tests/unit/test_tool_output.py checks both together)."""

_NULLABLE_STRING = {"type": ["string", "null"]}

PASSAGE = {
    "type": "object",
    "required": ["rank", "content", "source", "path", "page", "section", "chunkIndex", "similarity", "vectorScore",
                 "metadata", "truncated"],
    "additionalProperties": False,
    "properties": {
        "rank": {"type": "integer", "minimum": 1},
        "content": {"type": "string"},
        "source": {"type": "string", "description": "The document's file name, or the text entry's title"},
        "path": {**_NULLABLE_STRING, "description": "The document's path in the knowledge base"
                                                    " (guides/install/index.html); null for a text entry"},
        "page": {"type": ["integer", "null"], "description": "The PDF page the passage is on; null for other formats"},
        "section": {**_NULLABLE_STRING, "description": "The headings the passage is under, outermost first,"
                                                       " as 'Install > Debian'; null outside any heading"},
        "chunkIndex": {"type": "integer", "minimum": 0},
        "similarity": {"type": "number", "description": "The score the results are ordered by, 0 to 1: by"
                                                         " default the fusion of the meaning and word matches"
                                                         " (1 = first by both)"},
        "vectorScore": {"type": ["number", "null"], "description": "The passage's similarity in meaning to the"
                                                                   " query (cosine), which minScore applies to"},
        "metadata": {"type": "object", "description": "The document's metadata attributes, and its filesize"
                                                      " (bytes), uploadedAt, uploadedBy and totalChunks",
                     "properties": {"filesize": {"type": ["integer", "null"]}, "uploadedAt": _NULLABLE_STRING,
                                    "uploadedBy": _NULLABLE_STRING, "totalChunks": {"type": ["integer", "null"]}}},
        "truncated": {"type": "boolean", "description": "True when the passage was cut to fit the tool's token"
                                                        " budget (at a sentence, else at a word), ending '...'"},
        "rerankScore": {"type": "number", "description": "The reranker's relevance, when the tool reranks"},
        "alsoIn": {"type": "array", "description": "Other documents holding the same text, or nearly; present"
                                                   " when there are any",
                   "items": {"type": "object", "required": ["source", "path"], "additionalProperties": False,
                             "properties": {"source": {"type": "string"}, "path": _NULLABLE_STRING}}},
    },
}

KNOWLEDGE_BASE_ANSWER = {
    "type": "object",
    "required": ["success", "query", "knowledgeBaseName", "resultCount", "results", "summary", "metadata"],
    "additionalProperties": False,
    "properties": {
        "success": {"const": True},
        "query": {"type": "string"},
        "knowledgeBaseName": {"type": "string"},
        "resultCount": {"type": "integer", "minimum": 0},
        "results": {"type": "array", "items": PASSAGE},
        "summary": {"type": "string"},
        "metadata": {"type": "object", "required": ["totalTokensUsed", "cached"], "additionalProperties": False,
                     "properties": {"totalTokensUsed": {"type": "integer"}, "cached": {"type": "boolean"}}},
    },
}

# A deleted knowledge base: the tool stays linked and answers this, for the model to read.
KNOWLEDGE_BASE_MISSING = {
    "type": "object",
    "required": ["success", "error", "message"],
    "additionalProperties": False,
    "properties": {"success": {"const": False}, "error": {"const": True}, "message": {"type": "string"}},
}

KNOWLEDGE_BASE_RESULT = {"type": "object", "oneOf": [KNOWLEDGE_BASE_ANSWER, KNOWLEDGE_BASE_MISSING]}

KNOWLEDGE_SEARCH_RESULT = {
    "type": "object",
    "required": ["success", "query", "resultCount", "results"],
    "additionalProperties": False,
    "properties": {
        "success": {"const": True},
        "query": {"type": "string"},
        "resultCount": {"type": "integer", "minimum": 0},
        "results": {"type": "array", "items": {
            "type": "object",
            "required": ["title", "url", "content", "score"],
            "additionalProperties": False,
            "properties": {
                "title": {"type": "string"},
                "url": {"type": "string", "description": "The entry's knowledge:// address"},
                "content": {"type": "string"},
                "score": {"type": "number", "minimum": 0, "maximum": 1,
                          "description": "The entry's similarity in meaning to the query"},
            },
        }},
    },
}


# A read-write knowledge-base tool's second tool: the entry it added (or found: the same
# content in the knowledge base already is that entry, created false).
KNOWLEDGE_BASE_WRITE_ANSWER = {
    "type": "object",
    "required": ["success", "knowledgeBaseName", "entry"],
    "additionalProperties": False,
    "properties": {
        "success": {"const": True},
        "knowledgeBaseName": {"type": "string"},
        "entry": {"type": "object", "required": ["id", "title", "url", "created", "chunks"],
                  "additionalProperties": False,
                  "properties": {"id": {"type": "string"}, "title": {"type": "string"},
                                 "url": {"type": "string", "description": "The entry's knowledge:// address"},
                                 "created": {"type": "boolean",
                                             "description": "False when the knowledge base held this content"
                                                            " already: that entry is answered"},
                                 "chunks": {"type": "integer", "minimum": 0}}},
    },
}

KNOWLEDGE_BASE_WRITE_RESULT = {"type": "object", "oneOf": [KNOWLEDGE_BASE_WRITE_ANSWER, KNOWLEDGE_BASE_MISSING]}
