"""Running a knowledge-base tool for an agent runtime. The answer is the tool
result the model reads; a deleted knowledge base is a readable failure, not a crash."""
from chalicelib.agents.tools import KNOWLEDGE_BASE, ToolError
from chalicelib.auth import Principal
from chalicelib.retrieval import KnowledgeBaseNotFound, SearchRequest, search
from chalicelib.storage import connection, queries

KB_MISSING = {"success": False, "error": True,
              "message": "Knowledge base not found. It may have been deleted."}


def check_arguments(arguments, tool: dict) -> tuple[str, int, float]:
    """The arguments against the tool's schema, defaults filled from its config."""
    if not isinstance(arguments, dict):
        raise ToolError(400, "INVALID_ARGUMENTS", "arguments: must be an object")
    unknown = set(arguments) - set(tool["schema"]["properties"])
    if unknown:
        raise ToolError(400, "INVALID_ARGUMENTS", f"{sorted(unknown)[0]}: is not a parameter of {tool['name']}")
    query = arguments.get("query")
    if not isinstance(query, str) or not query.strip() or len(query) > 2000:
        raise ToolError(400, "INVALID_ARGUMENTS", "query: a non-empty string of at most 2000 characters is required")
    top_k = arguments.get("topK", tool["config"]["defaultTopK"])
    min_score = arguments.get("minScore", tool["config"]["defaultMinScore"])
    if isinstance(top_k, bool) or not isinstance(top_k, (int, float)) or top_k != int(top_k) or not 1 <= top_k <= 20:
        raise ToolError(400, "INVALID_ARGUMENTS", "topK: must be a whole number from 1 to 20")
    if isinstance(min_score, bool) or not isinstance(min_score, (int, float)) or not 0 <= min_score <= 1:
        raise ToolError(400, "INVALID_ARGUMENTS", "minScore: must be a number from 0 to 1")
    return query.strip(), int(top_k), float(min_score)


def invoke_tool(principal: Principal, agent_id: str, tool_id: str, arguments) -> dict:
    with connection() as conn:
        agent = queries.get_agent(conn, principal, agent_id)
    if agent is None:
        raise ToolError(404, "NOT_FOUND", f"agent {agent_id} was not found")
    tool = next((t for t in agent["available_tools"] if t.get("id") == tool_id), None)
    if tool is None:
        raise ToolError(404, "NOT_FOUND", f"tool {tool_id} was not found")
    if tool.get("type") != KNOWLEDGE_BASE:
        raise ToolError(400, "NOT_A_KNOWLEDGE_BASE_TOOL", f"tool {tool_id} is not run by this service")
    query, top_k, min_score = check_arguments(arguments, tool)
    try:
        answer = search(principal, SearchRequest(knowledge_base_ids=(tool["config"]["knowledgeBaseId"],),
                                                 query=query, top_k=top_k, min_score=min_score))
    except KnowledgeBaseNotFound:
        return dict(KB_MISSING)
    return {
        "success": True, "query": query, "knowledgeBaseName": answer["knowledgeBaseName"],
        "resultCount": answer["resultCount"],
        "results": [{"rank": r["rank"], "content": r["content"], "source": r["source"],
                     "chunkIndex": r["chunkIndex"], "similarity": r["similarity"], "metadata": r["metadata"]}
                    for r in answer["results"]],
        "summary": answer["summary"],
        "metadata": {"totalTokensUsed": answer["metadata"]["totalTokensUsed"],
                     "cached": answer["metadata"]["cached"]},
    }
