"""What a chunk is embedded and indexed with besides its own text, and how long it may be.

An embedding model reads a fixed window; a chunk longer than the window is partly invisible to
semantic search. And a passage alone ("Sets the amount of memory the server uses") does not say
which page or setting it is about. So:
- a chunk is cut to fit its knowledge base's model: at most the window, less its special tokens
  and the context line below, whatever chunkTokens says (fitting_tokens);
- a remote model's tokenizer is not here (nothing is downloaded at run time), so a chunk for it is
  also held to the window in UTF-8 bytes, a count that never falls below its tokens (window_bytes,
  within_window);
- a file's chunk carries a context line, its document's title (else its path) and its section
  trail, in Chunk.title: it is embedded before the chunk's text (embedded_text) and indexed for
  keyword search at the title's weight, as an entry's title is; the passage shown is the chunk's
  text alone.
"""
import re
from dataclasses import dataclass, replace
from typing import Optional, Sequence

from chalicelib import limits
from chalicelib.embeddings.tokens import count_tokens_batch
from chalicelib.errors import Invalid
from chalicelib.ingestion.chunk import validate_sizes
from chalicelib.ingestion.model import Chunk

# OpenAI's text-embedding-3 models read 8,191 tokens of their own (cl100k), Titan v2 8,192.
_REMOTE_WINDOW = {"openai": 8191, "bedrock": 8192}
# Chunks are sized in the local model's WordPiece tokens. A remote window is taken as half as
# many WordPiece tokens (cl100k spent at most two per WordPiece token on the texts measured):
# an estimate that sizes chunks, not a bound. The bound is window_bytes below.
_WORDPIECE_PER_REMOTE_TOKEN = 2
_SPECIAL_TOKENS = 2  # [CLS] and [SEP]; a remote model's own, if it adds any, are fewer than this
SEPARATOR = " › "
_WORDS = re.compile(r"[^\W\d_]{2}")  # a path that is only numbers and ids ("4983.txt") names nothing


def window_tokens(provider: str) -> int:
    """The text tokens (WordPiece) the knowledge base's model reads of one input."""
    if provider == "local":
        from chalicelib.embeddings.model_files import manifest

        return int(manifest()["maxSeqLength"]) - _SPECIAL_TOKENS
    return _REMOTE_WINDOW[provider] // _WORDPIECE_PER_REMOTE_TOKEN


def window_bytes(provider: str) -> Optional[int]:
    """The UTF-8 bytes of one input a remote model surely reads whole; None for the local model,
    whose own tokenizer counts its chunks. cl100k (OpenAI) is a byte-level BPE: every token
    stands for at least one byte of the text, so a text's bytes never undercount its tokens
    (a WordPiece count can: a word it does not know, of any length, is one [UNK]). Titan v2's
    tokenizer is not published; the same bound holds for any tokenizer whose tokens each
    consume text, and is far inside its 50,000 characters."""
    return None if provider == "local" else _REMOTE_WINDOW[provider] - _SPECIAL_TOKENS


def remote_tokens(text: str) -> int:
    """A count never below a remote model's tokens of the text (window_bytes): its UTF-8 bytes."""
    return len(text.encode("utf-8"))


def fitting_tokens(kb: dict) -> int:
    """The most tokens a chunk of this knowledge base holds: its chunkTokens, unless the model's
    window with the context line cannot read that many."""
    wanted = kb.get("child_tokens") or kb["chunk_tokens"]
    return max(limits.CHUNK_TOKENS.low, min(wanted, child_limit(kb["embedding_provider"])))


def child_limit(provider: str) -> int:
    """The largest chunk (childTokens) the provider's model reads with its context line."""
    return window_tokens(provider) - limits.CHUNK_CONTEXT_TOKENS


def fitting_overlap(kb: dict) -> int:
    return min(kb["chunk_overlap"], fitting_tokens(kb) // 2)


def context_line(title: Optional[str], path: Optional[str], headers: Sequence[str]) -> Optional[str]:
    """The document's title (else its path, if it has a word) and the chunk's section trail, a
    heading that repeats the title left out, cut to limits.CHUNK_CONTEXT_TOKENS at a word."""
    name = (title or (path if path and _WORDS.search(path.rsplit(".", 1)[0]) else "") or "").strip()
    trail = [h.strip() for h in headers if h and h.strip() and h.strip().lower() != name.lower()]
    line = SEPARATOR.join([p for p in (name, *trail) if p])
    if not line:
        return None
    words = line.split(" ")
    while len(words) > 1 and count_tokens_batch([" ".join(words)])[0] > limits.CHUNK_CONTEXT_TOKENS:
        words = words[:-1]
    return " ".join(words)


def with_context(chunks: list[Chunk], title: Optional[str], path: Optional[str]) -> list[Chunk]:
    for chunk in chunks:
        chunk.title = context_line(title, path, chunk.headers)
    return chunks


def embedded_text(chunk: Chunk) -> str:
    """What the model reads of a chunk: its context line (an entry's title), then its text."""
    return f"{chunk.title}\n{chunk.content}" if chunk.title else chunk.content


def within_window(chunks: list[Chunk], provider: str, title: Optional[str] = None) -> list[Chunk]:
    """The chunks, each one whose embedded text (with its context line, else `title`) is longer
    than a remote model's window in bytes (window_bytes) cut in pieces that fit, at a space
    where there is one; renumbered. Only text WordPiece undercounts gets here (long runs
    without a space: encoded data, a line of symbols)."""
    room = window_bytes(provider)
    if room is None:
        return chunks
    out: list[Chunk] = []
    for chunk in chunks:
        head = chunk.title if chunk.title is not None else title
        budget = room - (remote_tokens(head) + 1 if head else 0)
        pieces = _byte_pieces(chunk.content, max(1, budget))
        if len(pieces) == 1:
            out.append(replace(chunk, chunk_index=len(out)))
            continue
        counts = count_tokens_batch([p for _, p in pieces])
        for (at, piece), n in zip(pieces, counts):
            start = min(chunk.start_char + at, chunk.end_char)
            out.append(replace(chunk, chunk_index=len(out), content=piece, token_count=n, start_char=start,
                               end_char=min(start + len(piece), chunk.end_char)))
    return out


def _byte_pieces(text: str, budget: int) -> list[tuple[int, str]]:
    """(offset, piece) of text in pieces of at most `budget` UTF-8 bytes."""
    if len(text.encode("utf-8")) <= budget:
        return [(0, text)]
    pieces, at = [], 0
    while at < len(text):
        end, size = at, 0
        while end < len(text) and size + len(text[end].encode("utf-8")) <= budget:
            size += len(text[end].encode("utf-8"))
            end += 1
        if end < len(text):
            space = text.rfind(" ", at + 1, end)
            end = space if space > at else end
        pieces.append((at, text[at:end]))
        at = end
        while at < len(text) and text[at] == " ":
            at += 1
    return pieces


@dataclass(frozen=True)
class Chunking:
    """A knowledge base's chunking. chunk_tokens is the largest passage answered: a hierarchical
    knowledge base's parentTokens, else its chunkTokens (chunks beyond the model's window are
    cut to it and answered whole as their parent, retrieval/parents.py); child_tokens is a
    hierarchical knowledge base's childTokens, the chunks it indexes."""
    strategy: str
    chunk_tokens: int
    chunk_overlap: int
    child_tokens: Optional[int] = None

    @classmethod
    def of(cls, kb: dict) -> "Chunking":
        return cls(kb["chunk_strategy"], kb["chunk_tokens"], kb["chunk_overlap"], kb.get("child_tokens"))

    def view(self) -> dict:
        if self.strategy == limits.HIERARCHICAL:
            return {"strategy": self.strategy, "parentTokens": self.chunk_tokens, "childTokens": self.child_tokens,
                    "chunkOverlap": self.chunk_overlap}
        return {"chunkTokens": self.chunk_tokens, "chunkOverlap": self.chunk_overlap, "strategy": self.strategy}


CHUNKING_FIELDS = ("strategy", "chunkTokens", "chunkOverlap", "parentTokens", "childTokens")


def default_chunking(provider: str) -> Chunking:
    strategy, tokens, overlap, child = limits.DEFAULT_CHUNKING[provider]
    return Chunking(strategy, tokens, overlap, child)


def settle_chunking(fields: dict, provider: str, *, base: Chunking, sizes: tuple[int, int]) -> Chunking:
    """The chunking a request's `chunking` fields ask for, checked against the provider's model.
    base: what a field left out keeps (the provider's default on create, the knowledge base's own
    on a rebuild) when the strategy stays base's; sizes: (chunkTokens, chunkOverlap) of a fixed or
    semantic chunking that names neither otherwise. Raises Invalid naming the field."""
    if not fields:
        return base
    sized_by_parents = "parentTokens" in fields or "childTokens" in fields
    strategy = fields.get("strategy")
    if strategy is None:
        strategy = limits.HIERARCHICAL if sized_by_parents else (
            base.strategy if base.strategy != limits.HIERARCHICAL else "fixed")
    if not isinstance(strategy, str) or strategy not in limits.CHUNK_STRATEGIES:
        raise Invalid.field("chunking.strategy", f"must be one of {', '.join(limits.CHUNK_STRATEGIES)}")
    same = strategy == base.strategy
    if strategy != limits.HIERARCHICAL:
        if sized_by_parents:
            wrong = "parentTokens" if "parentTokens" in fields else "childTokens"
            raise Invalid.field(f"chunking.{wrong}", f"sizes hierarchical chunking; the {strategy} strategy takes"
                                                     " chunkTokens and chunkOverlap")
        tokens = fields.get("chunkTokens", base.chunk_tokens if same else sizes[0])
        overlap = fields.get("chunkOverlap", base.chunk_overlap if same else sizes[1])
        validate_sizes(tokens, overlap)
        return Chunking(strategy, tokens, overlap)
    if "chunkTokens" in fields:
        raise Invalid.field("chunking.chunkTokens", "hierarchical chunking is sized by parentTokens and childTokens")
    default = default_chunking(provider)
    if default.strategy != limits.HIERARCHICAL:  # Bedrock's sizes, which every remote window holds
        default = default_chunking("bedrock")
    kept = base if same else default
    child = fields.get("childTokens", kept.child_tokens)
    parent = fields.get("parentTokens", kept.chunk_tokens)
    top = child_limit(provider)
    if _not_int(child) or not limits.CHUNK_TOKENS.low <= child <= top:
        raise Invalid.field("chunking.childTokens", f"must be an integer between {limits.CHUNK_TOKENS.low:g} and"
                                                    f" {top}: the {provider} embedding model reads {top} tokens of a"
                                                    f" chunk besides its context line")
    if _not_int(parent) or not child <= parent <= limits.CHUNK_TOKENS.high:
        raise Invalid.field("chunking.parentTokens", f"must be an integer from childTokens ({child}) to"
                                                     f" {limits.CHUNK_TOKENS.high:g}")
    overlap = fields.get("chunkOverlap", min(kept.chunk_overlap, child // 2))
    if _not_int(overlap) or not 0 <= overlap <= child // 2:
        raise Invalid.field("chunking.chunkOverlap", "must be an integer from 0 to half of childTokens")
    return Chunking(limits.HIERARCHICAL, parent, overlap, child)


def _not_int(value) -> bool:
    return isinstance(value, bool) or not isinstance(value, int)
