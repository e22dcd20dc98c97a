"""Seed 004's declarative definitions: `apiVersion: knowledge/v1` documents of kind
KnowledgeBase and Agent, read from YAML into typed records and written back. No HTTP here:
kbcli/commands/apply.py plans and applies them through the API.

A knowledge base is named by metadata.id (its name in the service); an agent too. The seed's
spellings are read (embedding_provider, chunking.max_chunk_size, chunking.parent_tokens and
child_tokens of hierarchical chunking, access.read_roles, an agent's
knowledge[].query.max_results …) and written by `kb export`, so what export writes applies
unchanged."""
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional

import yaml

from kbcli.client import CliError

API_VERSION = "knowledge/v1"
ACCESS_LISTS = {"read_roles": "readRoles", "read_users": "readUsers",
                "write_roles": "writeRoles", "write_users": "writeUsers"}
# token_allocation is a share of the agent's context window (the seed's TokenAllocation); the
# service budgets a tool's passages in tokens (maxTokens), so the share is taken of this window
# unless the agent names its own. 8,000 × 0.5 is the service's default budget, 4,000.
DEFAULT_CONTEXT_WINDOW = 8000


@dataclass(frozen=True)
class KnowledgeBaseSpec:
    name: str
    source: str  # file and document number, for messages
    description: Optional[str] = None
    visibility: Optional[str] = None
    provider: Optional[str] = None
    model: Optional[str] = None
    chunk_tokens: Optional[int] = None
    chunk_overlap: Optional[int] = None
    strategy: Optional[str] = None
    parent_tokens: Optional[int] = None  # hierarchical chunking: the passage answered
    child_tokens: Optional[int] = None  # hierarchical chunking: the chunks indexed
    access: Optional[dict] = None  # the API's camelCase lists; None: the file does not say
    rerank: Optional[bool] = None  # search.rerank: every search reranked unless it says; None: not said


@dataclass(frozen=True)
class KnowledgeToolSpec:
    knowledge_base: str  # a knowledge base's name
    mode: Optional[str] = None
    max_results: Optional[int] = None
    similarity_threshold: Optional[float] = None
    retrieval_strategy: Optional[str] = None
    max_tokens: Optional[int] = None
    name: Optional[str] = None
    description: Optional[str] = None

    def settings(self) -> dict:
        """The tool's fields as the API names them, those the file sets."""
        pairs = (("mode", self.mode), ("defaultTopK", self.max_results), ("defaultMinScore", self.similarity_threshold),
                 ("strategy", self.retrieval_strategy), ("maxTokens", self.max_tokens), ("toolName", self.name),
                 ("toolDescription", self.description))
        return {k: v for k, v in pairs if v is not None}


@dataclass(frozen=True)
class AgentSpec:
    name: str
    source: str
    description: Optional[str] = None
    knowledge: tuple[KnowledgeToolSpec, ...] = field(default_factory=tuple)


Spec = KnowledgeBaseSpec | AgentSpec


def manifest_files(paths: Iterable[str]) -> list[Path]:
    """Files as given; a folder's *.yaml and *.yml below it, in name order."""
    found: list[Path] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            found += sorted(p for p in path.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())
        elif path.is_file():
            found.append(path)
        else:
            raise CliError("NOT_FOUND", f"{given}: no such file or folder", exit_code=2)
    return found


def load(paths: Iterable[str]) -> list[Spec]:
    """Every document of every file; anything not understood stops the whole run before a
    change is made (exit 2), naming the file, the document and the field."""
    specs: list[Spec] = []
    for path in manifest_files(paths):
        try:
            documents = list(yaml.safe_load_all(path.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
            raise CliError("INVALID_MANIFEST", f"{path}: {error}", exit_code=2) from None
        for number, document in enumerate(documents, 1):
            if document is not None:
                specs.append(_spec(document, f"{path} (document {number})"))
    names = [(type(s).__name__, s.name) for s in specs]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise CliError("INVALID_MANIFEST", f"{twice[0][0]} {twice[0][1]} is defined more than once", exit_code=2)
    return specs


def _fail(source: str, what: str) -> CliError:
    return CliError("INVALID_MANIFEST", f"{source}: {what}", exit_code=2)


def _mapping(value: Any, source: str, where: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _fail(source, f"{where} must be a mapping")
    return value


def _known(value: dict, allowed: set[str], source: str, where: str) -> None:
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise _fail(source, f"{where}{unknown[0]} is not a field here; use {', '.join(sorted(allowed))}")


def _typed(value: Any, kind: type | tuple, source: str, where: str):
    if value is not None and (not isinstance(value, kind) or isinstance(value, bool) and kind is not bool):
        kinds = kind if isinstance(kind, tuple) else (kind,)
        names = {str: "text", int: "a whole number", float: "a number", bool: "true or false"}
        raise _fail(source, f"{where} must be " + " or ".join(names.get(k, k.__name__) for k in kinds))
    return value


def _spec(document: Any, source: str) -> Spec:
    document = _mapping(document, source, "a document")
    if document.get("apiVersion") != API_VERSION:
        raise _fail(source, f"apiVersion must be {API_VERSION} (found {document.get('apiVersion')!r})")
    _known(document, {"apiVersion", "kind", "metadata", "spec"}, source, "")
    metadata = _mapping(document.get("metadata"), source, "metadata")
    name = _typed(metadata.get("id") or metadata.get("name"), str, source, "metadata.id")
    if not name:
        raise _fail(source, "metadata.id (the name) is required")
    spec = _mapping(document.get("spec"), source, "spec")
    if document.get("kind") == "KnowledgeBase":
        return _knowledge_base(name, spec, source)
    if document.get("kind") == "Agent":
        return _agent(name, spec, source)
    raise _fail(source, f"kind must be KnowledgeBase or Agent (found {document.get('kind')!r})")


def _knowledge_base(name: str, spec: dict, source: str) -> KnowledgeBaseSpec:
    _known(spec, {"description", "visibility", "embedding_provider", "embedding_model", "vector_store",
                  "chunking", "access", "search"}, source, "spec.")
    chunking = _mapping(spec.get("chunking"), source, "spec.chunking")
    _known(chunking, {"strategy", "max_chunk_size", "overlap", "parent_tokens", "child_tokens"}, source,
           "spec.chunking.")
    access = spec.get("access")
    if access is not None:
        access = _mapping(access, source, "spec.access")
        _known(access, set(ACCESS_LISTS), source, "spec.access.")
        for key, names in access.items():
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                raise _fail(source, f"spec.access.{key} must be a list of names")
        access = {api: sorted(set(access[key])) if access.get(key) is not None else None
                  for key, api in ACCESS_LISTS.items()}
    search = _mapping(spec.get("search"), source, "spec.search")
    _known(search, {"rerank"}, source, "spec.search.")
    provider = _typed(spec.get("embedding_provider"), str, source, "spec.embedding_provider")
    return KnowledgeBaseSpec(
        name=name, source=source, description=_typed(spec.get("description"), str, source, "spec.description"),
        visibility=_typed(spec.get("visibility"), str, source, "spec.visibility"),
        # the seed's "openai-embeddings" names the provider this service calls openai
        provider=provider.removesuffix("-embeddings") if provider else None,
        model=_typed(spec.get("embedding_model"), str, source, "spec.embedding_model"),
        chunk_tokens=_typed(chunking.get("max_chunk_size"), int, source, "spec.chunking.max_chunk_size"),
        chunk_overlap=_typed(chunking.get("overlap"), int, source, "spec.chunking.overlap"),
        strategy=_typed(chunking.get("strategy"), str, source, "spec.chunking.strategy"),
        parent_tokens=_typed(chunking.get("parent_tokens"), int, source, "spec.chunking.parent_tokens"),
        child_tokens=_typed(chunking.get("child_tokens"), int, source, "spec.chunking.child_tokens"),
        access=access, rerank=_typed(search.get("rerank"), bool, source, "spec.search.rerank"))


def _agent(name: str, spec: dict, source: str) -> AgentSpec:
    _known(spec, {"description", "context_window", "knowledge"}, source, "spec.")
    window = _typed(spec.get("context_window"), int, source, "spec.context_window") or DEFAULT_CONTEXT_WINDOW
    items = spec.get("knowledge") or []
    single = isinstance(items, dict)  # the seed's agent config holds one knowledge base, not a list
    if single:
        items = [items]
    if not isinstance(items, list):
        raise _fail(source, "spec.knowledge must be a mapping (one knowledge base) or a list of them")
    tools = []
    for n, item in enumerate(items):
        where = "spec.knowledge." if single else f"spec.knowledge[{n}]."
        item = _mapping(item, source, where.rstrip("."))
        _known(item, {"knowledge_base", "mode", "query", "token_allocation", "max_tokens", "name", "description"},
               source, where)
        query = _mapping(item.get("query"), source, f"{where}query")
        _known(query, {"max_results", "similarity_threshold", "retrieval_strategy"}, source, f"{where}query.")
        if not isinstance(item.get("knowledge_base"), str):
            raise _fail(source, f"{where}knowledge_base (a knowledge base's name) is required")
        share = _typed(item.get("token_allocation"), (int, float), source, f"{where}token_allocation")
        if share is not None and not 0 < share <= 1:
            raise _fail(source, f"{where}token_allocation must be above 0 and at most 1")
        max_tokens = _typed(item.get("max_tokens"), int, source, f"{where}max_tokens")
        tools.append(KnowledgeToolSpec(
            knowledge_base=item["knowledge_base"], mode=_typed(item.get("mode"), str, source, f"{where}mode"),
            max_results=_typed(query.get("max_results"), int, source, f"{where}query.max_results"),
            similarity_threshold=_typed(query.get("similarity_threshold"), (int, float), source,
                                        f"{where}query.similarity_threshold"),
            retrieval_strategy=_typed(query.get("retrieval_strategy"), str, source, f"{where}query.retrieval_strategy"),
            max_tokens=max_tokens if max_tokens is not None else (round(share * window) if share else None),
            name=_typed(item.get("name"), str, source, f"{where}name"),
            description=_typed(item.get("description"), str, source, f"{where}description")))
    return AgentSpec(name=name, source=source, description=_typed(spec.get("description"), str, source,
                                                                  "spec.description"), knowledge=tuple(tools))


def knowledge_base_document(kb: dict) -> dict:
    """A knowledge base as the API shows it → its manifest."""
    embedding, chunking = kb.get("embedding") or {}, kb.get("chunking") or {}
    access = {key: kb["access"][api] for key, api in ACCESS_LISTS.items()
              if (kb.get("access") or {}).get(api) is not None}
    spec = {"description": kb.get("description") or "", "visibility": kb["visibility"],
            "embedding_provider": embedding.get("provider"), "embedding_model": embedding.get("model"),
            "chunking": {k: v for k, v in (("strategy", chunking.get("strategy")),
                                           ("max_chunk_size", chunking.get("chunkTokens")),
                                           ("parent_tokens", chunking.get("parentTokens")),
                                           ("child_tokens", chunking.get("childTokens")),
                                           ("overlap", chunking.get("chunkOverlap"))) if v is not None}}
    if access:
        spec["access"] = access
    if (kb.get("search") or {}).get("rerank"):
        spec["search"] = {"rerank": True}
    return {"apiVersion": API_VERSION, "kind": "KnowledgeBase", "metadata": {"id": kb["name"]}, "spec": spec}


def agent_document(agent: dict, kb_names: dict[str, str]) -> dict:
    """An agent as the API shows it → its manifest; its knowledge-base tools by knowledge-base name."""
    knowledge = []
    for tool in agent.get("availableTools") or []:
        config = tool.get("config") or {}
        if tool.get("type") != "knowledge_base" or config.get("knowledgeBaseId") not in kb_names:
            continue
        knowledge.append({
            "knowledge_base": kb_names[config["knowledgeBaseId"]], "name": tool.get("name"),
            "description": tool.get("description"), "mode": config.get("mode"),
            "query": {"max_results": config.get("defaultTopK"), "similarity_threshold": config.get("defaultMinScore"),
                      "retrieval_strategy": config.get("strategy")},
            "max_tokens": config.get("maxTokens")})
    return {"apiVersion": API_VERSION, "kind": "Agent", "metadata": {"id": agent["name"]},
            "spec": {"description": agent.get("description") or "", "knowledge": knowledge}}


def dump(documents: list[dict]) -> str:
    return yaml.safe_dump_all(documents, sort_keys=False, allow_unicode=True, default_flow_style=False)
