"""Knowledge from a conversation (seed 003): a language model lists the items worth
keeping (content, type, level, confidence); items below the confidence threshold are
dropped. For the rest, the entries the caller may read at cosine EXTRACT_MERGE_SIMILARITY
or more (the top EXTRACT_MERGE_CANDIDATES) go to the model with the item, which decides, as
seed 003's deduplicateAndStore: `new` (stored as an entry), `existing` (the nearest entry's
provenance grows: "merged" in the answer's counts) or `merged` (the merged content becomes
a new version of an entry, the others it names are superseded: "updated"). A level is never
wider than the caller's role allows. Malformed item lists are asked for again once, then
refused with nothing stored; a malformed decision counts as `existing`, which loses nothing."""
import hashlib
import json
import logging
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Optional

from chalicelib import freshness, limits
from chalicelib.auth import Principal
from chalicelib.auth.access import (ENTRY_LEVELS, canonical_level, current_principal, kb_to_write,
                                    widest_entry_level)
from chalicelib.documents.entries import Knowledge, rewrite_entry, store_entry
from chalicelib.documents.entry_text import rebuild
from chalicelib.embeddings import get_provider
from chalicelib.errors import BadUpstream, Forbidden, Invalid, NotFound
from chalicelib.llm import ChatModel, Message, chat_model
from chalicelib.retrieval import policy
from chalicelib.storage import acting_for, agents, chunks, connection, documents, entry_chunks
from chalicelib.storage.filters import SearchFilters

logger = logging.getLogger(__name__)
ROLES = ("user", "assistant")

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
# Seed 003's comparison prompt, its output format kept; the candidates are numbered for to_remove_ids.
DECIDE_PROMPT = """You compare new knowledge with existing similar knowledge and decide:
1. Is the new knowledge truly new?
2. Should it be merged with existing knowledge?
Answer with one JSON object and nothing else:
{"result": "new" | "existing" | "merged",
 "reasoning": "explanation",
 "merged_content": "combined knowledge (only if result is merged)",
 "to_remove_ids": [numbers of the existing knowledge the merged content replaces]}
"new": it says something the existing knowledge does not. "existing": the existing knowledge says it
already. "merged": one statement should hold both; write it self-contained."""
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
    """One item and what became of it: created (a new entry), merged (a sighting of entry_id:
    its provenance grew), updated (entry_id rewritten with merged content, `superseded`
    folded into it) or dropped. `decision`: the model's comparison, when there was one."""
    item: Item
    action: str
    entry_id: Optional[str] = None
    similarity: Optional[float] = None
    reason: Optional[str] = None
    decision: Optional["Decision"] = None
    superseded: tuple[str, ...] = ()


@dataclass(frozen=True)
class Candidate:
    """An entry near an item: the caller reads it, at cosine EXTRACT_MERGE_SIMILARITY or more."""
    entry_id: str
    similarity: float
    content: str


@dataclass(frozen=True)
class Decision:
    result: str  # new | existing | merged
    reasoning: str
    merged_content: Optional[str] = None
    replaces: tuple[str, ...] = ()  # entry ids, the one to rewrite first


@dataclass(frozen=True)
class Extraction:
    knowledge_base_id: str
    outcomes: tuple[Outcome, ...]
    model: str

    def of(self, action: str) -> list[Outcome]:
        return [o for o in self.outcomes if o.action == action]

    def as_json(self) -> dict:
        """What the extraction did, as the API answers it and a job stores it: counts, and the ids."""
        def item(o: Outcome, *fields):
            view = {"id": o.entry_id, "title": o.item.title, "content": o.item.content, "type": o.item.type,
                    "level": o.item.level, "confidence": o.item.confidence, "similarity": o.similarity,
                    "reason": o.reason, "superseded": list(o.superseded),
                    "decision": ({"result": o.decision.result, "reasoning": o.decision.reasoning}
                                 if o.decision else None)}
            return {k: view[k] for k in fields}
        created, merged, updated, dropped = (self.of(a) for a in ("created", "merged", "updated", "dropped"))
        return {"knowledgeBaseId": self.knowledge_base_id, "model": self.model,
                "counts": {"created": len(created), "merged": len(merged), "updated": len(updated),
                           "dropped": len(dropped)},
                "created": [item(o, "id", "title", "type", "level", "confidence", "decision") for o in created],
                "merged": [item(o, "id", "content", "similarity", "confidence", "decision") for o in merged],
                "updated": [item(o, "id", "title", "similarity", "confidence", "superseded", "decision")
                            for o in updated],
                "dropped": [item(o, "content", "confidence", "reason") for o in dropped]}


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


def as_now(principal: Principal, agent_id: str, knowledge_base_id: str) -> tuple[Principal, dict]:
    """The caller with the role they hold now, and the knowledge base, if they may still write
    it: an extraction run as a job writes with the role its user has when it writes, not the
    one they had when they asked."""
    now = current_principal(principal)
    return now, check_access(now, agent_id, knowledge_base_id)


def extract(principal: Principal, agent_id: str, conversation: Conversation,
            model: Optional[ChatModel] = None, job_id: Optional[str] = None) -> Extraction:
    kb = check_access(principal, agent_id, conversation.knowledge_base_id)
    model = model or chat_model()
    items, dropped = _ask(model, conversation)
    provider = get_provider(kb["embedding_provider"], kb["embedding_model"])
    outcomes = list(dropped)
    source = {"source": "extraction", "agentId": agent_id, "userId": principal.user_id,
              "conversation": conversation.digest(), "model": f"{model.name}:{model.model}",
              "extractedAt": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    if job_id:
        source["jobId"] = job_id
    for at, item in enumerate(items):
        if item.confidence < conversation.min_confidence:
            outcomes.append(Outcome(item, "dropped", reason=f"confidence below {conversation.min_confidence:g}"))
            continue
        try:  # the model may take minutes: each write is allowed by the role its user holds now
            principal, kb = as_now(principal, agent_id, kb["id"])
        except (Forbidden, NotFound) as err:
            outcomes += [Outcome(i, "dropped", reason=f"not written: {err.message}") for i in items[at:]]
            break
        widest = ENTRY_LEVELS.index(widest_entry_level(principal))
        if ENTRY_LEVELS.index(item.level) > widest:
            item = Item(item.title, item.content, item.type, ENTRY_LEVELS[widest], item.confidence)
        provenance = {**source, "confidence": item.confidence, "content": item.content}
        candidates = _similar_entries(principal, kb, provider.embed_query(item.content))
        decision = _decide(model, item, candidates) if candidates else None
        if decision is not None and decision.result == "merged":
            target = decision.replaces[0]
            updated = rewrite_entry(principal, kb, target, title=item.title, content=decision.merged_content,
                                    level=item.level, provenance={**provenance, "decision": "merged"},
                                    supersede=decision.replaces[1:])
            if updated is not None:
                near = next(c for c in candidates if c.entry_id == target)
                outcomes.append(Outcome(item, "updated", entry_id=target, similarity=round(near.similarity, 4),
                                        decision=decision, superseded=decision.replaces[1:]))
                continue
            decision = Decision("existing", decision.reasoning + " (not rewritten: an entry the caller may not"
                                " change, a wider level than the item's, or the merged text held already;"
                                " recorded as a sighting)")
        if decision is not None and decision.result == "existing":
            near = candidates[0]
            with connection() as conn:
                documents.merge_into_entry(conn, near.entry_id, provenance=provenance, confidence=item.confidence,
                                           level=item.level)
            freshness.bump(kb["id"])  # a merge may widen the entry's level, and so who finds it
            outcomes.append(Outcome(item, "merged", entry_id=near.entry_id, similarity=round(near.similarity, 4),
                                    decision=decision))
            continue
        entry = store_entry(principal, kb["id"], Knowledge(
            title=item.title, content=item.content, level=item.level, type=item.type,
            confidence=item.confidence, agent_id=agent_id, provenance=provenance,
            metadata={"type": item.type, "level": item.level}), kb=kb)
        outcomes.append(Outcome(item, "created" if entry.created else "merged", entry_id=entry.id,
                                similarity=None if entry.created else 1.0, decision=decision))
    return Extraction(knowledge_base_id=kb["id"], outcomes=tuple(outcomes), model=f"{model.name}:{model.model}")


def _similar_entries(principal: Principal, kb: dict, vector) -> list[Candidate]:
    """The entries the caller may read at cosine EXTRACT_MERGE_SIMILARITY or more to vector,
    nearest first, at most EXTRACT_MERGE_CANDIDATES, each with its whole text."""
    wanted = limits.EXTRACT_MERGE_CANDIDATES
    with acting_for(principal.org_id, principal.user_id), connection() as conn:
        rows = chunks.semantic_search(conn, principal, kb_ids=[kb["id"]], dim=kb["embedding_dim"],
                                      query_vector=vector, top_k=wanted * 3, ef_search=policy.ef_search_for(wanted * 3),
                                      filters=SearchFilters(entries=True))
        best: dict[str, chunks.Hit] = {}
        for row in rows:
            if row.vector >= limits.EXTRACT_MERGE_SIMILARITY:
                best.setdefault(row.document_id, row)
        near = list(best.values())[:wanted]
        texts: dict[str, list[dict]] = {}
        for chunk in entry_chunks.of_entries(conn, principal, [kb["id"]], [r.document_id for r in near]):
            texts.setdefault(chunk["document_id"], []).append(chunk)
    return [Candidate(r.document_id, r.vector, rebuild(texts.get(r.document_id, []))) for r in near]


def _decide(model: ChatModel, item: Item, candidates: list[Candidate]) -> Decision:
    """The model's comparison of an item with its candidates (seed 003). Malformed: `existing`,
    which records a sighting of the nearest entry and loses nothing."""
    existing = "\n---\n".join(f"[{n}] {c.content}" for n, c in enumerate(candidates, 1))
    ask = [Message("user", f"# New Knowledge\n{item.content}\n\n# Existing Similar Knowledge\n{existing}")]
    answer = model.complete(DECIDE_PROMPT, ask)
    try:
        return parse_decision(answer, candidates)
    except ValueError as err:
        logger.warning("malformed merge decision, kept as existing: %s", err)
        return Decision("existing", f"the model's decision was malformed ({err})")


def parse_decision(answer: str, candidates: list[Candidate]) -> Decision:
    """ValueError names what is wrong. to_remove_ids are the candidates' numbers (1-based, as
    shown; 0-based answers are read too when unambiguous); merged with none names the nearest."""
    data = _json(answer)
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    result = str(data.get("result") or "").strip().lower()
    if result not in ("new", "existing", "merged"):
        raise ValueError('"result" is not one of new, existing, merged')
    reasoning = str(data.get("reasoning") or "")[:2000]
    if result != "merged":
        return Decision(result, reasoning)
    merged = data.get("merged_content")
    if not isinstance(merged, str) or not merged.strip():
        raise ValueError('"merged_content" is not a non-empty string')
    numbers = data.get("to_remove_ids") or []
    if not isinstance(numbers, list) or not all(isinstance(n, int) and not isinstance(n, bool) for n in numbers):
        raise ValueError('"to_remove_ids" is not a list of numbers')
    base = 0 if 0 in numbers else 1
    if any(not 0 <= n - base < len(candidates) for n in numbers):
        raise ValueError(f'"to_remove_ids" names knowledge beyond the {len(candidates)} shown')
    replaces = tuple(dict.fromkeys(candidates[n - base].entry_id for n in numbers)) or (candidates[0].entry_id,)
    return Decision("merged", reasoning, merged.strip()[:limits.ENTRY_CONTENT_MAX_CHARS], replaces)


def _json(answer: str):
    text = answer.strip()
    if text.startswith("```"):  # a fenced block, as chat models like to answer
        text = text.strip("`").removeprefix("json").strip()
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"not JSON: {err.msg}") from None


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
    data = _json(answer)
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
        level = canonical_level(str(raw.get("level") or "individual"))
        if level is None:
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
