"""Running a knowledge-base tool for an agent runtime. The answer is the tool
result the model reads; a deleted knowledge base is a readable failure, not a crash."""
from dataclasses import dataclass, replace
from typing import Optional

from chalicelib import limits
from chalicelib.agents.tools import (KNOWLEDGE_BASE, KNOWLEDGE_SEARCH, KNOWLEDGE_SEARCH_PARAMETERS, PARAMETERS,
                                     READ_WRITE, WRITE_PARAMETERS, WRITE_SUFFIX, check_defaults,
                                     check_knowledge_search_defaults, settings_of)
from chalicelib.auth import Principal
from chalicelib.documents.entries import Entry, Knowledge, search_entries, store_entry
from chalicelib.documents.entry_text import whole_contents
from chalicelib.errors import Invalid, NotFound
from chalicelib.retrieval import Passage, SearchRequest, SearchResult, parse_search_request, search
from chalicelib.storage import agents, connection
from chalicelib.validate import int_field, string_field


@dataclass(frozen=True)
class ToolRun:
    query: str
    result: Optional[SearchResult]  # None: the linked knowledge base is gone
    entries: Optional[tuple[Passage, ...]] = None  # a knowledge_search tool's answer
    added: Optional[Entry] = None  # a read-write tool's entry (query is then its title)
    knowledge_base_name: Optional[str] = None  # with added


def _only(arguments, names: tuple[str, ...], tool_name: str) -> dict:
    """The arguments as an object naming none but the tool's parameters."""
    if not isinstance(arguments, dict):
        raise Invalid.field("arguments", "must be an object", code="INVALID_ARGUMENTS")
    unknown = set(arguments) - set(names)
    if unknown:
        raise Invalid.field(sorted(unknown)[0], f"is not a parameter of {tool_name}", code="INVALID_ARGUMENTS")
    return arguments


def check_arguments(arguments, tool: dict, kb_id: str = "") -> SearchRequest:
    """The arguments against the tool's schema, through the search parser with the
    tool's defaults. Whole floats pass for topK: the schema says "number"."""
    _only(arguments, PARAMETERS, tool["name"])
    config = tool.get("config") or {}
    try:
        top_k, min_score = check_defaults(config.get("defaultTopK"), config.get("defaultMinScore"))
    except Invalid:  # a tool stored before its defaults were checked: the service's own
        top_k, min_score = None, None
    try:
        request = parse_search_request([kb_id], arguments, top_k_default=top_k, min_score_default=min_score,
                                       whole_floats=True)
    except Invalid as err:
        raise Invalid(err.message, code="INVALID_ARGUMENTS") from None
    settings = settings_of(tool)  # the tool's, not the model's to choose
    return replace(request, strategy=settings.strategy, max_tokens=settings.max_tokens, rerank=settings.rerank)


def invoke_tool(principal: Principal, agent_id: str, tool_id: str, arguments) -> ToolRun:
    with connection() as conn:
        agent = agents.get(conn, principal, agent_id)
    if agent is None:
        raise NotFound.thing("agent", agent_id)
    tool = next((t for t in agent["available_tools"] if t.get("id") == tool_id), None)
    if tool is None and tool_id.endswith(WRITE_SUFFIX):
        return _add_entry(principal, agent, tool_id, arguments)
    if tool is None:
        raise NotFound.thing("tool", tool_id)
    if tool.get("type") == KNOWLEDGE_SEARCH:
        return _knowledge_search(principal, tool, arguments)
    if tool.get("type") != KNOWLEDGE_BASE:
        raise Invalid(f"tool {tool_id} is not run by this service", code="NOT_A_KNOWLEDGE_BASE_TOOL")
    kb_id = (tool.get("config") or {}).get("knowledgeBaseId")
    if not isinstance(kb_id, str):
        raise Invalid(f"tool {tool_id} names no knowledge base; link it again", code="NOT_A_KNOWLEDGE_BASE_TOOL")
    request = check_arguments(arguments, tool, kb_id)
    try:
        return ToolRun(query=request.query, result=search(principal, request))
    except NotFound:
        return ToolRun(query=request.query, result=None)


def _knowledge_search(principal: Principal, tool: dict, arguments) -> ToolRun:
    _only(arguments, KNOWLEDGE_SEARCH_PARAMETERS, tool["name"])
    query = arguments.get("query")
    if not isinstance(query, str) or not query.strip():
        raise Invalid.field("query", "is required", code="INVALID_ARGUMENTS")
    if len(query) > limits.QUERY_MAX_CHARS:
        raise Invalid.field("query", f"must be at most {limits.QUERY_MAX_CHARS} characters", code="INVALID_ARGUMENTS")
    config = tool.get("config") or {}
    default_results, min_score = check_knowledge_search_defaults(config.get("defaultMaxResults"),
                                                                 config.get("defaultMinScore"))
    given = [name for name in ("max_results", "maxResults") if arguments.get(name) is not None]
    if len(given) > 1 and arguments["max_results"] != arguments["maxResults"]:
        raise Invalid.field("max_results", "and maxResults differ; send one", code="INVALID_ARGUMENTS")
    name = given[0] if given else "max_results"
    try:
        max_results = int_field(arguments.get(name), name, limits.ENTRY_SEARCH_RESULTS,
                                default=default_results, whole_floats=True)
    except Invalid as err:
        raise Invalid(err.message, code="INVALID_ARGUMENTS") from None
    query = query.strip()
    found = search_entries(principal, query, max_results, min_score=min_score)
    return ToolRun(query=query, result=None, entries=tuple(whole_contents(principal, found)))


def _add_entry(principal: Principal, agent: dict, tool_id: str, arguments) -> ToolRun:
    """A read-write knowledge-base tool's second tool: the entry the model wrote, at its
    caller's own level (individual, as a direct post without a level), recording the agent.
    The tool it comes from must still be read-write: one switched back to read-only takes
    its write tool away at once, whatever a runtime cached."""
    source_id = tool_id[: -len(WRITE_SUFFIX)]
    tool = next((t for t in agent["available_tools"] if t.get("id") == source_id), None)
    if tool is None or tool.get("type") != KNOWLEDGE_BASE or settings_of(tool).mode != READ_WRITE:
        raise NotFound.thing("tool", tool_id)
    _only(arguments, WRITE_PARAMETERS, f"the write tool of {tool['name']}")
    try:  # as POST .../entries reads them
        fields = {name: string_field(arguments, name, required=True, max_length=most)
                  for name, most in (("title", limits.ENTRY_TITLE_MAX_CHARS),
                                     ("content", limits.ENTRY_CONTENT_MAX_CHARS))}
    except Invalid as err:
        raise Invalid(err.message, code="INVALID_ARGUMENTS") from None
    kb_id = tool["config"]["knowledgeBaseId"]
    try:
        entry = store_entry(principal, kb_id, Knowledge(title=fields["title"], content=fields["content"],
                                                        level="individual", agent_id=agent["id"]))
    except NotFound:
        return ToolRun(query=fields["title"], result=None)
    return ToolRun(query=fields["title"], result=None, added=entry,
                   knowledge_base_name=tool["config"].get("knowledgeBaseName") or kb_id)
