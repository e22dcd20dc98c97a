"""Knowledge from a conversation (seed 003): a language model lists the items worth
keeping (content, type, level, confidence); items below the confidence threshold are
dropped, items as close as EXTRACT_MERGE_SIMILARITY to an entry the caller may read are
merged into it (its provenance grows), the rest become entries of the knowledge base.
A level is never wider than the caller's role allows. Malformed model output is asked
for again once, then refused with nothing stored."""
import hashlib
import json
import logging
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Optional

from chalicelib import freshness, limits
from chalicelib.auth import Principal
from chalicelib.auth.access import ENTRY_LEVELS, kb_to_write, widest_entry_level
from chalicelib.documents.entries import Knowledge, store_entry
from chalicelib.embeddings import get_provider
from chalicelib.errors import BadUpstream, Invalid, NotFound
from chalicelib.llm import ChatModel, Message, chat_model
from chalicelib.retrieval import policy
from chalicelib.storage import acting_for, agents, chunks, connection, documents
from chalicelib.storage.filters import SearchFilters

logger = logging.getLogger(__name__)
ROLES = ("user", "assistant")
LEVEL_ALIASES = {"organization": "organisation", "org": "organisation", "personal": "individual"}

SYSTEM_PROMPT = f"""You extract durable knowledge from a conversation between a user and an AI agent.
List only what is worth remembering for later conversations: facts, procedures, preferences,
decisions and insights that were stated or agreed, not small talk and not questions.
Answer with one JSON object and nothing else, in this shape:
{{"items": [{{"title": "a short title",
             "content": "one self-contained statement, understandable without the conversation",
             "type": one of {json.dumps(list(limits.ENTRY_TYPES))},
             "level": "individual" (about this user only) | "organisation" (true for the user's organisation) |
                      "public" (general knowledge true for anyone),
             "confidence": a number from 0 to 1: how sure you are that it is true and worth keeping}}]}}
An empty conversation, or one with nothing worth keeping, is {{"items": []}}."""
RETRY_PROMPT = ("Your answer was not the JSON object asked for ({problem}). Answer again with only the JSON object"
                ' {{"items": [...]}}, each item with title, content, type, level and confidence.')


@dataclass(frozen=True)
class Conversation:
    messages: tuple[Message, ...]
    knowledge_base_id: str
    min_confidence: float

    @property
    def chars(self) -> int:
        return sum(len(m.content) for m in self.messages)

    def digest(self) -> str:
        text = json.dumps([[m.role, m.content] for m in self.messages])
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]

    def as_json(self) -> dict:
        return {"messages": [{"role": m.role, "content": m.content} for m in self.messages],
                "knowledgeBaseId": self.knowledge_base_id, "minConfidence": self.min_confidence}


@dataclass(frozen=True)
class Item:
    title: str
    content: str
    type: str
    level: str
    confidence: float


@dataclass(frozen=True)
class Outcome:
    """One item and what became of it: created (a new entry), merged (into entry_id) or dropped."""
    item: Item
    action: str
    entry_id: Optional[str] = None
    similarity: Optional[float] = None
    reason: Optional[str] = None


@dataclass(frozen=True)
class Extraction:
    knowledge_base_id: str
    outcomes: tuple[Outcome, ...]
    model: str

    def of(self, action: str) -> list[Outcome]:
        return [o for o in self.outcomes if o.action == action]


def check_messages(raw, *, already: int = 0) -> list[dict]:
    """A list of {role, content} as a conversation may hold them (`already` messages before
    them, in a session), checked and as given."""
    if not isinstance(raw, list) or not raw:
        raise Invalid.field("messages", "must be a non-empty list of {role, content}")
    if already + len(raw) > limits.EXTRACT_MESSAGES_MAX:
        raise Invalid.field("messages", f"must hold at most {limits.EXTRACT_MESSAGES_MAX} messages"
                                        + (f" in all ({already} already)" if already else ""))
    for i, m in enumerate(raw):
        if not isinstance(m, dict) or m.get("role") not in ROLES + ("system", "tool"):
            raise Invalid.field(f"messages[{i}].role", f"must be one of {', '.join(ROLES)}, system, tool")
        content = m.get("content")
        if not isinstance(content, str):
            raise Invalid.field(f"messages[{i}].content", "must be a string")
        if len(content) > limits.EXTRACT_MESSAGE_MAX_CHARS:
            raise Invalid.field(f"messages[{i}].content",
                                f"must be at most {limits.EXTRACT_MESSAGE_MAX_CHARS} characters")
    return [{"role": m["role"], "content": m["content"]} for m in raw]


def parse_conversation(body: dict) -> Conversation:
    """The request body: messages [{role, content}], knowledgeBaseId, minConfidence."""
    from chalicelib.validate import number_field, refuse_unknown, string_field

    refuse_unknown(body, {"messages", "knowledgeBaseId", "minConfidence"},
                   "is not a field of an extraction; use messages, knowledgeBaseId, minConfidence")
    # What system and tool messages said reaches the model as the user's turn's context.
    messages = [Message("assistant" if m["role"] == "assistant" else "user", m["content"])
                for m in check_messages(body.get("messages")) if m["content"].strip()]
    conversation = Conversation(
        messages=tuple(messages),
        knowledge_base_id=string_field(body, "knowledgeBaseId", required=True, max_length=limits.ID_MAX_CHARS),
        min_confidence=number_field(body.get("minConfidence"), "minConfidence", limits.EXTRACT_MIN_CONFIDENCE))
    if conversation.chars > limits.EXTRACT_TOTAL_MAX_CHARS:
        raise Invalid.field("messages", f"must hold at most {limits.EXTRACT_TOTAL_MAX_CHARS} characters in all")
    if not messages:
        raise Invalid.field("messages", "hold no text")
    return conversation


def check_access(principal: Principal, agent_id: str, knowledge_base_id: str) -> dict:
    """The agent is the caller's to manage and the knowledge base theirs to write: the
    knowledge base's row."""
    with connection() as conn:
        if agents.get(conn, principal, agent_id) is None:
            raise NotFound.thing("agent", agent_id)
        return kb_to_write(conn, principal, knowledge_base_id, "write entries")


def extract(principal: Principal, agent_id: str, conversation: Conversation,
            model: Optional[ChatModel] = None, job_id: Optional[str] = None) -> Extraction:
    kb = check_access(principal, agent_id, conversation.knowledge_base_id)
    model = model or chat_model()
    items, dropped = _ask(model, conversation)
    widest = ENTRY_LEVELS.index(widest_entry_level(principal))
    provider = get_provider(kb["embedding_provider"], kb["embedding_model"])
    outcomes = list(dropped)
    source = {"source": "extraction", "agentId": agent_id, "userId": principal.user_id,
              "conversation": conversation.digest(), "model": f"{model.name}:{model.model}",
              "extractedAt": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    if job_id:
        source["jobId"] = job_id
    for item in items:
        if item.confidence < conversation.min_confidence:
            outcomes.append(Outcome(item, "dropped", reason=f"confidence below {conversation.min_confidence:g}"))
            continue
        if ENTRY_LEVELS.index(item.level) > widest:
            item = Item(item.title, item.content, item.type, ENTRY_LEVELS[widest], item.confidence)
        provenance = {**source, "confidence": item.confidence, "content": item.content}
        near = _nearest_entry(principal, kb, provider.embed_query(item.content))
        if near is not None and near[1] >= limits.EXTRACT_MERGE_SIMILARITY:
            with connection() as conn:
                documents.merge_into_entry(conn, near[0], provenance=provenance, confidence=item.confidence,
                                           level=item.level)
            freshness.bump(kb["id"])  # a merge may widen the entry's level, and so who finds it
            outcomes.append(Outcome(item, "merged", entry_id=near[0], similarity=round(near[1], 4)))
            continue
        entry = store_entry(principal, kb["id"], Knowledge(
            title=item.title, content=item.content, level=item.level, type=item.type,
            confidence=item.confidence, agent_id=agent_id, provenance=provenance,
            metadata={"type": item.type, "level": item.level}), kb=kb)
        outcomes.append(Outcome(item, "created" if entry.created else "merged", entry_id=entry.id,
                                similarity=None if entry.created else 1.0))
    return Extraction(knowledge_base_id=kb["id"], outcomes=tuple(outcomes), model=f"{model.name}:{model.model}")


def _nearest_entry(principal: Principal, kb: dict, vector) -> Optional[tuple[str, float]]:
    """The entry of the knowledge base nearest to vector among those the caller may read."""
    with acting_for(principal.org_id, principal.user_id), connection() as conn:
        rows = chunks.semantic_search(conn, principal, kb_ids=[kb["id"]], dim=kb["embedding_dim"],
                                      query_vector=vector, top_k=1, ef_search=policy.ef_search_for(1),
                                      filters=SearchFilters(entries=True))
    return (rows[0]["document_id"], float(rows[0]["score"])) if rows else None


def _ask(model: ChatModel, conversation: Conversation) -> tuple[list[Item], list[Outcome]]:
    """The model's items; asked again once when its answer is malformed."""
    messages = list(conversation.messages)
    transcript = "\n\n".join(f"{m.role.upper()}: {m.content}" for m in messages)
    ask = [Message("user", f"The conversation:\n\n{transcript}\n\nList its knowledge as the JSON object.")]
    answer = model.complete(SYSTEM_PROMPT, ask)
    try:
        return parse_items(answer)
    except ValueError as err:
        logger.warning("malformed extraction output, asking again: %s", err)
        ask += [Message("assistant", answer[:20_000]), Message("user", RETRY_PROMPT.format(problem=err))]
    answer = model.complete(SYSTEM_PROMPT, ask)
    try:
        return parse_items(answer)
    except ValueError as err:
        raise BadUpstream(f"the language model's answer was malformed twice ({err}); nothing was stored",
                          code="LLM_OUTPUT_INVALID") from None


def parse_items(answer: str) -> tuple[list[Item], list[Outcome]]:
    """(the items, those beyond EXTRACT_MAX_ITEMS as dropped). ValueError names what is wrong."""
    text = answer.strip()
    if text.startswith("```"):  # a fenced block, as chat models like to answer
        text = text.strip("`").removeprefix("json").strip()
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"not JSON: {err.msg}") from None
    if isinstance(data, list):
        data = {"items": data}
    if not isinstance(data, dict) or not isinstance(data.get("items"), list):
        raise ValueError('no "items" list')
    items = []
    for i, raw in enumerate(data["items"]):
        if not isinstance(raw, dict):
            raise ValueError(f"items[{i}] is not an object")
        content = raw.get("content")
        if not isinstance(content, str) or not content.strip():
            raise ValueError(f"items[{i}].content is not a non-empty string")
        confidence = raw.get("confidence")
        if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0 <= confidence <= 1:
            raise ValueError(f"items[{i}].confidence is not a number from 0 to 1")
        level = str(raw.get("level") or "individual").strip().lower()
        level = LEVEL_ALIASES.get(level, level)
        if level not in ENTRY_LEVELS:
            raise ValueError(f"items[{i}].level is not one of {', '.join(ENTRY_LEVELS)}")
        kind = str(raw.get("type") or "fact").strip().lower()
        if kind not in limits.ENTRY_TYPES:
            kind = "other"
        content = content.strip()[:limits.ENTRY_CONTENT_MAX_CHARS]
        title = raw.get("title") if isinstance(raw.get("title"), str) and raw["title"].strip() else content[:80]
        items.append(Item(title=title.strip()[:limits.ENTRY_TITLE_MAX_CHARS], content=content, type=kind,
                          level=level, confidence=float(confidence)))
    extra = [Outcome(item, "dropped", reason=f"more than {limits.EXTRACT_MAX_ITEMS} items")
             for item in items[limits.EXTRACT_MAX_ITEMS:]]
    return items[:limits.EXTRACT_MAX_ITEMS], extra
