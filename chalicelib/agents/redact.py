"""What a reader sees of what it may not see (issue 29). A private knowledge base's name,
description and files, and an individual entry's title, show to their owner and writer
alone: an admin who manages a colleague's agent, or reads the organisation's audit log,
sees that a tool links a knowledge base and which one (its id), never what it is called.

One home for the rule, used by the agent views, the tools lists and both audit logs (it
lives with the agents, which the audit package may import and which never import it)."""
from typing import Any, Iterable

from chalicelib.agents.tools import KNOWLEDGE_BASE
from chalicelib.storage import audit, knowledge_bases

HIDDEN_TOOL_DESCRIPTION = "Searches a knowledge base you cannot see."
# What names a knowledge base, a document or an entry in an audit entry's before and after.
NAMING_FIELDS = ("name", "description", "filename", "path", "title", "knowledgeBaseName")
WIDE_LEVELS = ("organisation", "public")


def hidden_tool(tool: dict) -> dict:
    """A knowledge-base tool without what names its knowledge base: its name and description
    (quick add makes them of the knowledge base's name) and config.knowledgeBaseName."""
    config = {k: v for k, v in tool["config"].items() if k != "knowledgeBaseName"}
    return {**tool, "name": f"hidden_{tool['id'][-8:]}", "description": HIDDEN_TOOL_DESCRIPTION,
            "config": config, "redacted": True}


def _is_kb_tool(value: Any) -> bool:
    return isinstance(value, dict) and value.get("type") == KNOWLEDGE_BASE and isinstance(value.get("config"), dict)


def kb_tools(value: Any) -> list[dict]:
    """The knowledge-base tools a value holds: a tool, or an object with availableTools."""
    if not isinstance(value, dict):
        return []
    return [t for t in [value, *(value.get("availableTools") or [])] if _is_kb_tool(t)]


def links_hidden(tool: Any, visible: set[str]) -> bool:
    """A knowledge-base tool whose knowledge base is not among those the reader sees."""
    return _is_kb_tool(tool) and tool["config"].get("knowledgeBaseId") not in visible


def visible_kbs(conn, principal, kb_ids: Iterable[str]) -> set[str]:
    ids = sorted({k for k in kb_ids if isinstance(k, str)})
    return set(knowledge_bases.visible_names(conn, principal, ids)) if ids else set()


def seen_kbs(conn, principal, kb_ids: Iterable[str]) -> set[str]:
    """For the audit log: the knowledge bases the caller sees, and those deleted that it saw
    (shared with the organisation, or its own, when they were deleted)."""
    ids = sorted({k for k in kb_ids if isinstance(k, str)})
    seen = visible_kbs(conn, principal, ids)
    gone = audit.deleted_knowledge_bases(conn, principal, [k for k in ids if k not in seen])
    return seen | {k for k, last in gone.items()
                   if last.get("visibility") in ("org", "public") or last.get("ownerId") == principal.user_id}


def tools_as_seen(tools: list, visible: set[str]) -> list:
    return [hidden_tool(t) if links_hidden(t, visible) else t for t in tools]


def _side_with_tools(side: Any, visible: set[str]) -> Any:
    if not isinstance(side, dict):
        return side
    if links_hidden(side, visible):
        side = hidden_tool(side)
    if isinstance(side.get("availableTools"), list):
        side = {**side, "availableTools": tools_as_seen(side["availableTools"], visible)}
    return side


def _unnamed(side: Any) -> Any:
    if not isinstance(side, dict):
        return side
    return {**side, **{k: None for k in NAMING_FIELDS if side.get(k) is not None}}


def _kb_of(row: dict):
    if row["target_type"] == "knowledge_base":
        return row["target_id"]
    for side in (row["after"], row["before"]):
        if isinstance(side, dict) and isinstance(side.get("knowledgeBaseId"), str):
            return side["knowledgeBaseId"]
    return None


def _someone_elses_entry(row: dict, principal) -> bool:
    """An entry (written, deleted) whose title its level keeps from this reader: the
    entries' audit rows before issue 29 carry no level and were individual."""
    sides = [s for s in (row["after"], row["before"]) if isinstance(s, dict)]
    is_entry = row["action"] == "create_entry" or any(s.get("kind") == "entry" for s in sides)
    level = next((s.get("level") for s in sides if s.get("level")), None)
    return is_entry and level not in WIDE_LEVELS and row["user_id"] != principal.user_id


def audit_rows(conn, principal, rows: list[dict]) -> list[dict]:
    """Audit rows as this reader may see them: names of knowledge bases it cannot see, and
    of what they hold, are None, and the row says `redacted`. A reader's own acts show whole."""
    visible = seen_kbs(conn, principal, [_kb_of(r) for r in rows] + [
        t["config"].get("knowledgeBaseId") for r in rows for side in (r["before"], r["after"]) for t in kb_tools(side)])
    shown = []
    for row in rows:
        if row["user_id"] == principal.user_id:
            shown.append({**row, "redacted": False})
            continue
        before = _side_with_tools(row["before"], visible)
        after = _side_with_tools(row["after"], visible)
        kb = _kb_of(row)
        if (kb is not None and kb not in visible) or _someone_elses_entry(row, principal):
            before, after = _unnamed(before), _unnamed(after)
        shown.append({**row, "before": before, "after": after,
                      "redacted": (before, after) != (row["before"], row["after"])})
    return shown
