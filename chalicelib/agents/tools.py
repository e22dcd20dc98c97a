"""The knowledge-base tool: its JSON shape, its name rules and its definitions for
the LLM APIs (OpenAI function tools, Anthropic tool use, MCP tools/list)."""
import re
import secrets
from typing import NamedTuple, Optional

from chalicelib import limits
from chalicelib.agents import output
from chalicelib.agents.schemas import check_tool_schema
from chalicelib.errors import Conflict, Invalid
from chalicelib.retrieval.model import STRATEGIES
from chalicelib.validate import int_field, number_field

KNOWLEDGE_BASE = "knowledge_base"
PARAMETERS = ("query", "topK", "minScore")  # what a knowledge-base tool takes
# Seed 004's knowledge mode: a read-write knowledge-base tool brings a second tool, of this
# type, that adds an entry to its knowledge base (write_tool); its id is the first's + WRITE_SUFFIX.
READ_ONLY, READ_WRITE = "read-only", "read-write"
MODES = (READ_ONLY, READ_WRITE)
KNOWLEDGE_BASE_WRITE = "knowledge_base_write"
WRITE_PARAMETERS = ("title", "content")
WRITE_SUFFIX = ".add"
# Seed 001's knowledge_search: the entries the caller may read (their earlier research,
# their organisation's knowledge, public knowledge), one such tool per agent.
KNOWLEDGE_SEARCH = "knowledge_search"
# max_results as seed 001's KnowledgeSearchArgs names it (the schema's); maxResults as well.
KNOWLEDGE_SEARCH_PARAMETERS = ("query", "max_results", "maxResults")
KNOWLEDGE_SEARCH_DESCRIPTION = ("Search internal knowledge base for prior research results. Best for finding"
                                " previously researched topics. Returns synthesized answers from past research"
                                " queries.")  # seed 001's words
NAME_RULE = re.compile(r"^[A-Za-z0-9_-]{1,%d}$" % limits.TOOL_NAME_MAX_CHARS)


def snake_case(name: str) -> str:
    return re.sub(r"_+", "_", re.sub(r"[^a-z0-9]+", "_", name.lower())).strip("_")


def unique_name(base: str, taken: set[str]) -> str:
    """`base` cut to fit 64 characters, with _2, _3… added when the agent has it already."""
    most = limits.TOOL_NAME_MAX_CHARS
    base = (base or "search_knowledge_base")[:most].rstrip("_")
    name, n = base, 1
    while name in taken:
        n += 1
        suffix = f"_{n}"
        name = base[: most - len(suffix)].rstrip("_") + suffix
    return name


def quick_add_name(kb_name: str, taken: set[str]) -> str:
    snake = snake_case(kb_name)
    return unique_name(f"search_{snake}" if snake else "search_knowledge_base", taken)


_KB_WORDS = re.compile(r"^\s*the\s+|\s*\b(knowledge[\s_-]*base|kb)\s*$", re.IGNORECASE)
_ANSWERS = " Answers the passages that best match the query, each with its document's path and its page or section."


def quick_add_description(kb_name: str, kb_description: Optional[str]) -> str:
    """A quick-added tool's description: what the knowledge base holds, in its own words
    (cut to fit the tool description's limit), and what the tool answers. A name that
    says "knowledge base" already is not made to say it twice."""
    subject = " ".join(_KB_WORDS.sub("", " ".join(kb_name.split())).split())
    opening = f"Search the {subject} knowledge base" if subject else "Search the knowledge base"
    about = " ".join((kb_description or "").split())
    if not about:
        return opening + "." + _ANSWERS
    room = limits.TOOL_DESCRIPTION_MAX_CHARS - len(opening) - len(": ") - len(_ANSWERS)
    if len(about) > room:
        about = about[: room - 1].rsplit(" ", 1)[0].rstrip(" ,;:.") + "…"
    elif about[-1] not in ".!?…":
        about += "."
    return f"{opening}: {about}{_ANSWERS}"


def check_name(name: str, taken: set[str]) -> str:
    if not NAME_RULE.match(name):
        raise Invalid.field("toolName", f"1 to {limits.TOOL_NAME_MAX_CHARS} letters, digits, '_' or '-'"
                                        " (the rule every major LLM tool API accepts)")
    if name in taken:
        raise Conflict(f"toolName: the agent already has a tool named {name}", code="TOOL_NAME_TAKEN")
    return name


def check_defaults(top_k, min_score) -> tuple[int, float]:
    """A tool's defaultTopK and defaultMinScore (None: the tool defaults)."""
    return (int_field(top_k, "defaultTopK", limits.TOOL_TOP_K),
            number_field(min_score, "defaultMinScore", limits.TOOL_MIN_SCORE))


class ToolSettings(NamedTuple):
    """How a knowledge-base tool searches, and whether it also writes (seed 004's mode)."""
    strategy: str
    max_tokens: int  # its passages' budget
    rerank: Optional[bool]  # None: as its knowledge base defaults (search.rerank)
    mode: str  # READ_ONLY, or READ_WRITE: the agent also gets the tool that adds an entry


def check_settings(strategy, max_tokens, rerank, mode=None) -> ToolSettings:
    """A knowledge-base tool's settings as given (None: the service's defaults)."""
    strategy = limits.DEFAULT_STRATEGY if strategy is None else strategy
    if strategy not in STRATEGIES:
        raise Invalid.field("strategy", f"must be one of {', '.join(STRATEGIES)}")
    if rerank is not None and not isinstance(rerank, bool):
        raise Invalid.field("rerank", "must be true or false")
    mode = READ_ONLY if mode is None else mode
    if mode not in MODES:
        raise Invalid.field("mode", f"must be one of {', '.join(MODES)}")
    return ToolSettings(strategy, int_field(max_tokens, "maxTokens", limits.MAX_TOKENS), rerank, mode)


def settings_of(tool: dict) -> ToolSettings:
    """A tool's settings; a tool stored before they existed (or with bad ones) gets the defaults."""
    config = tool.get("config") or {}
    try:
        return check_settings(config.get("strategy"), config.get("maxTokens"), config.get("rerank"),
                              config.get("mode"))
    except Invalid:
        return check_settings(None, None, None)


def knowledge_base_tool(*, kb_id: str, kb_name: str, name: str, description: str, top_k: int,
                        min_score: float, tool_id: Optional[str] = None, strategy: str = limits.DEFAULT_STRATEGY,
                        max_tokens: int = int(limits.MAX_TOKENS.default), rerank: Optional[bool] = None,
                        mode: str = READ_ONLY) -> dict:
    return {
        "id": tool_id or f"tool_kb_{secrets.token_hex(8)}",
        "name": name,
        "description": description,
        "type": KNOWLEDGE_BASE,
        "schema": knowledge_base_schema(top_k, min_score),
        "config": {"knowledgeBaseId": kb_id, "knowledgeBaseName": kb_name,
                   "defaultTopK": top_k, "defaultMinScore": min_score,
                   "strategy": strategy, "maxTokens": max_tokens, "rerank": rerank, "mode": mode},
    }


def write_tool(tool: dict, taken: set[str]) -> dict:
    """The tool a read-write knowledge-base tool brings along (seed 004's mode: read-write):
    it adds an entry to the same knowledge base. Not stored: made from its tool whenever the
    agent's tools are listed, so it follows the tool's name, mode and knowledge base. Its id
    is the tool's with WRITE_SUFFIX; its name the search tool's with add_to_ for search_."""
    name = tool["name"]
    base = "add_to_" + (name[len("search_"):] if name.startswith("search_") else name)
    kb_name = (tool.get("knowledgeBaseName") or (tool.get("config") or {}).get("knowledgeBaseName")
               or "the knowledge base")
    return {
        "id": tool["id"] + WRITE_SUFFIX,
        "name": unique_name(base, taken),
        "description": (f"Add what you learned to {kb_name}: a fact, a procedure or a finding worth keeping,"
                        " as a titled entry that later searches of it find."),
        "type": KNOWLEDGE_BASE_WRITE,
        "schema": write_schema(),
        "config": {"knowledgeBaseId": tool["config"]["knowledgeBaseId"], "knowledgeBaseName": kb_name,
                   "toolId": tool["id"]},
    }


def write_schema() -> dict:
    return {
        "type": "object",
        "properties": {
            "title": {"type": "string", "description": "A short title that says what the entry is about, at most"
                                                       f" {limits.ENTRY_TITLE_MAX_CHARS} characters."},
            "content": {"type": "string", "description": "The entry itself, complete on its own (a later reader"
                                                         " has no conversation around it), at most"
                                                         f" {limits.ENTRY_CONTENT_MAX_CHARS} characters."},
        },
        "required": ["title", "content"],
    }


def knowledge_base_schema(top_k: int, min_score: float) -> dict:
    """What a knowledge-base tool takes (PARAMETERS, in this order), every bound said in
    words too: a model reads the descriptions, not always the keywords."""
    return {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to search the knowledge base for: a question or"
                                                       f" keywords, at most {limits.QUERY_MAX_CHARS} characters."},
            "topK": {"type": "number", "default": top_k, "minimum": limits.TOOL_TOP_K.low,
                     "maximum": limits.TOOL_TOP_K.high,
                     "description": f"How many passages to answer at most, a whole number"
                                    f" {limits.TOOL_TOP_K.describe()}."},
            "minScore": {"type": "number", "default": min_score, "minimum": float(limits.TOOL_MIN_SCORE.low),
                         "maximum": float(limits.TOOL_MIN_SCORE.high),
                         "description": "Leave out passages whose similarity in meaning to the query (each"
                                        " result's vectorScore) is below this,"
                                        f" {limits.TOOL_MIN_SCORE.describe()}: higher answers fewer, closer"
                                        " passages."},
        },
        "required": ["query"],
    }


def knowledge_search_schema(max_results: int) -> dict:
    """What the knowledge_search tool takes: seed 001's query and max_results (invocation
    also takes maxResults, KNOWLEDGE_SEARCH_PARAMETERS)."""
    return {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to look for: a question or keywords, at most"
                                                       f" {limits.QUERY_MAX_CHARS} characters."},
            "max_results": {"type": "number", "default": max_results, "minimum": limits.ENTRY_SEARCH_RESULTS.low,
                           "maximum": limits.ENTRY_SEARCH_RESULTS.high,
                           "description": "How many entries to answer at most, a whole number"
                                          f" {limits.ENTRY_SEARCH_RESULTS.describe()}."},
        },
        "required": ["query"],
    }


def check_knowledge_search_defaults(max_results, min_score) -> tuple[int, float]:
    return (int_field(max_results, "defaultMaxResults", limits.ENTRY_SEARCH_RESULTS),
            number_field(min_score, "defaultMinScore", limits.KNOWLEDGE_MIN_SCORE))


def knowledge_search_tool(*, name: str = KNOWLEDGE_SEARCH, description: str = KNOWLEDGE_SEARCH_DESCRIPTION,
                          max_results: int, min_score: float, tool_id: Optional[str] = None) -> dict:
    return {
        "id": tool_id or f"tool_ks_{secrets.token_hex(8)}",
        "name": name,
        "description": description,
        "type": KNOWLEDGE_SEARCH,
        "schema": knowledge_search_schema(max_results),
        "config": {"defaultMaxResults": max_results, "defaultMinScore": min_score},
    }


def with_settings(tool: dict, settings: ToolSettings) -> dict:
    return {**tool, "config": {**tool["config"], "strategy": settings.strategy, "maxTokens": settings.max_tokens,
                               "rerank": settings.rerank, "mode": settings.mode}}


def with_defaults(tool: dict, top_k: int, min_score: float) -> dict:
    """The same tool with new defaults, in its config and in its schema."""
    updated = {**tool, "config": {**tool["config"], "defaultTopK": top_k, "defaultMinScore": min_score}}
    properties = dict(tool["schema"]["properties"])
    properties["topK"] = {**properties["topK"], "default": top_k}
    properties["minScore"] = {**properties["minScore"], "default": min_score}
    updated["schema"] = {**tool["schema"], "properties": properties}
    return updated


def check_tools_array(tools) -> list[dict]:
    """availableTools as given to POST/PATCH /agents: objects with an id, a valid
    unique name and a type; knowledge-base tools in their full shape."""
    if not isinstance(tools, list):
        raise Invalid.field("availableTools", "must be a list of tools")
    names, ids = set(), set()
    for index, tool in enumerate(tools):
        where = f"availableTools[{index}]"
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str) or not isinstance(tool.get("type"), str):
            raise Invalid.field(where, "must be an object with a name and a type")
        if not NAME_RULE.match(tool["name"]) or tool["name"] in names:
            raise Invalid.field(f"{where}.name", f"must be unique, 1 to {limits.TOOL_NAME_MAX_CHARS} of [A-Za-z0-9_-]")
        tool.setdefault("id", f"tool_{secrets.token_hex(8)}")
        if not isinstance(tool["id"], str) or tool["id"] in ids:
            raise Invalid.field(f"{where}.id", "must be a unique string")
        if tool["id"].endswith(WRITE_SUFFIX):  # a read-write tool's write tool is named so
            raise Invalid.field(f"{where}.id", f"must not end in {WRITE_SUFFIX}")
        for field, kind, what in (("description", str, "a string"), ("schema", dict, "a JSON schema object")):
            if tool.get(field) is None:
                tool.pop(field, None)  # null means absent (the API documents a string and an object)
            elif not isinstance(tool[field], kind):
                raise Invalid.field(f"{where}.{field}", f"must be {what}")
        if "schema" in tool:
            check_tool_schema(tool["schema"], f"{where}.schema")
        if tool["type"] == KNOWLEDGE_BASE:
            tools[index] = tool = _knowledge_base_tool_from(tool, where)
        elif tool["type"] == KNOWLEDGE_SEARCH:
            if any(t.get("type") == KNOWLEDGE_SEARCH for t in tools[:index]):
                raise Invalid(f"{where}: an agent has one knowledge_search tool", code="TOOL_ALREADY_LINKED")
            tools[index] = tool = _knowledge_search_tool_from(tool, where)
        names.add(tool["name"])
        ids.add(tool["id"])
    return tools


def _knowledge_base_tool_from(tool: dict, where: str) -> dict:
    """A knowledge-base tool given whole in availableTools, in its full shape: its
    schema is the service's (invocation accepts nothing else) with its defaults."""
    config = tool.get("config")
    if not isinstance(config, dict) or not isinstance(config.get("knowledgeBaseId"), str):
        raise Invalid.field(f"{where}.config.knowledgeBaseId", "is required")
    try:
        top_k, min_score = check_defaults(config.get("defaultTopK"), config.get("defaultMinScore"))
        settings = check_settings(config.get("strategy"), config.get("maxTokens"), config.get("rerank"),
                                  config.get("mode"))
    except Invalid as err:
        raise Invalid(f"{where}.config.{err.message}") from None
    return knowledge_base_tool(kb_id=config["knowledgeBaseId"], kb_name=str(config.get("knowledgeBaseName") or ""),
                               name=tool["name"], description=tool.get("description") or "", top_k=top_k,
                               min_score=min_score, tool_id=tool["id"], **settings._asdict())


def _knowledge_search_tool_from(tool: dict, where: str) -> dict:
    config = tool.get("config") if isinstance(tool.get("config"), dict) else {}
    try:
        max_results, min_score = check_knowledge_search_defaults(config.get("defaultMaxResults"),
                                                                 config.get("defaultMinScore"))
    except Invalid as err:
        raise Invalid(f"{where}.config.{err.message}") from None
    return knowledge_search_tool(name=tool["name"], description=tool.get("description") or KNOWLEDGE_SEARCH_DESCRIPTION,
                                 max_results=max_results, min_score=min_score, tool_id=tool["id"])


def _schema(tool: dict) -> dict:
    """The tool's input schema. A tool the service runs takes what the service's schema says
    (invocation accepts nothing else), rebuilt from its defaults: a tool stored before its
    parameters had descriptions gets them too."""
    config = tool.get("config") or {}
    try:
        if tool.get("type") == KNOWLEDGE_BASE:
            return knowledge_base_schema(*check_defaults(config.get("defaultTopK"), config.get("defaultMinScore")))
        if tool.get("type") == KNOWLEDGE_SEARCH:
            return knowledge_search_schema(check_knowledge_search_defaults(config.get("defaultMaxResults"),
                                                                           config.get("defaultMinScore"))[0])
    except Invalid:  # defaults stored before they were checked: the schema as stored
        pass
    return tool.get("schema") or {"type": "object", "properties": {}}


# What the tools the service runs answer (MCP's outputSchema); other tools declare nothing.
OUTPUT_SCHEMAS = {KNOWLEDGE_BASE: output.KNOWLEDGE_BASE_RESULT, KNOWLEDGE_SEARCH: output.KNOWLEDGE_SEARCH_RESULT,
                  KNOWLEDGE_BASE_WRITE: output.KNOWLEDGE_BASE_WRITE_RESULT}


def as_openai(tool: dict) -> dict:
    return {"type": "function", "function": {"name": tool["name"], "description": tool.get("description", ""),
                                             "parameters": _schema(tool)}}


def as_anthropic(tool: dict) -> dict:
    return {"name": tool["name"], "description": tool.get("description", ""), "input_schema": _schema(tool)}


def as_mcp(tool: dict) -> dict:
    definition = {"name": tool["name"], "description": tool.get("description", ""), "inputSchema": _schema(tool)}
    if tool.get("type") in OUTPUT_SCHEMAS:
        definition["outputSchema"] = OUTPUT_SCHEMAS[tool["type"]]
    return definition


def as_worker(tool: dict) -> Optional[dict]:
    """Seed 002's worker tool: kind "kb", an integer top_k, an empty config (the worker asks
    GET /knowledge-base/query with its own URL and key, over every knowledge base the key's
    user may read). None for a tool the worker cannot run: only knowledge-base tools are kb."""
    if tool.get("type") != KNOWLEDGE_BASE:
        return None
    try:
        top_k = check_defaults((tool.get("config") or {}).get("defaultTopK"), None)[0]
    except Invalid:
        top_k = int(limits.TOOL_TOP_K.default)
    return {"name": tool["name"], "kind": "kb", "description": tool.get("description", ""),
            "input_schema": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "The question or topic to search for"},
                    "top_k": {"type": "integer", "description": f"Number of results to return (default {top_k};"
                                                              f" {limits.TOP_K.describe()})",
                              "default": top_k, "minimum": int(limits.TOP_K.low), "maximum": int(limits.TOP_K.high)},
                },
                "required": ["query"]},
            "config": {}}


FORMATS = {"openai": as_openai, "anthropic": as_anthropic, "mcp": as_mcp, "worker": as_worker}
