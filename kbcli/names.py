"""A knowledge base or an agent named by its id or by its name, wherever a command takes
one (--kb, --agent, and the id arguments of `kb kbs` and `kb agents`)."""
import re
from dataclasses import dataclass
from typing import Optional

from kbcli.client import CliError, Client

# The ids the API makes (a prefix, then 16 hex digits): anything else is a name.
KB_ID = re.compile(r"^kb_[0-9a-f]{16}$")
AGENT_ID = re.compile(r"^agent_[0-9a-f]{16}$")


@dataclass(frozen=True)
class Kind:
    noun: str  # "knowledge base"
    id_pattern: re.Pattern
    path: str  # the API's list
    list_command: str  # what shows them all
    paged: bool


KNOWLEDGE_BASE = Kind("knowledge base", KB_ID, "/knowledge-bases", "kb kbs list", paged=True)
AGENT = Kind("agent", AGENT_ID, "/agents", "kb agents list", paged=False)
# A command's parameter name → what it names.
PARAMETERS = {"kb": KNOWLEDGE_BASE, "kb_id": KNOWLEDGE_BASE, "agent": AGENT, "agent_id": AGENT}


def resolve(client: Client, kind: Kind, given: str) -> str:
    """The id as given, or the id of the one item of this name (exactly as spelled, else
    ignoring case). None found, or several, is an error that says which there are."""
    if kind.id_pattern.match(given):
        return given
    items = client.every(kind.path, {"limit": 100}) if kind.paged else client.get(kind.path)["items"]
    named = [i for i in items if i.get("name") == given] or [
        i for i in items if (i.get("name") or "").casefold() == given.casefold()]
    if len(named) == 1:
        return named[0]["id"]
    if not named:
        raise CliError("NOT_FOUND", f"no {kind.noun} has the id or name {given!r} (`{kind.list_command}` shows"
                                    " them)", status=404)
    matches = ", ".join(f"{i['id']} ({i.get('name')})" for i in named)
    raise CliError("AMBIGUOUS_NAME", f"{len(named)} {kind.noun}s are named {given!r}: {matches}; give the id",
                   exit_code=2)


def resolve_arguments(client_of, arguments: dict) -> dict:
    """A command's arguments with every knowledge base and agent it names as an id; the
    client is made only when a name must be looked up."""
    resolved = dict(arguments)
    for name, kind in PARAMETERS.items():
        value: Optional[object] = resolved.get(name)
        if isinstance(value, str):
            if not kind.id_pattern.match(value):
                resolved[name] = resolve(client_of(), kind, value)
        elif isinstance(value, list):  # kb search --kb A --kb B
            resolved[name] = [v if kind.id_pattern.match(v) else resolve(client_of(), kind, v) for v in value]
    return resolved
