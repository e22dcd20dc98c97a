"""What a chunk is embedded and indexed with besides its own text, and how long it may be.

An embedding model reads a fixed window; a chunk longer than the window is partly invisible to
semantic search. And a passage alone ("Sets the amount of memory the server uses") does not say
which page or setting it is about. So:
- a chunk is cut to fit its knowledge base's model: at most the window, less its special tokens
  and the context line below, whatever chunkTokens says (fitting_tokens);
- a file's chunk carries a context line, its document's title (else its path) and its section
  trail, in Chunk.title: it is embedded before the chunk's text (embedded_text) and indexed for
  keyword search at the title's weight, as an entry's title is; the passage shown is the chunk's
  text alone.
"""
import re
from typing import Optional, Sequence

from chalicelib import limits
from chalicelib.embeddings.tokens import count_tokens_batch
from chalicelib.ingestion.model import Chunk

# OpenAI's text-embedding-3 models read 8,191 tokens of their own (cl100k), Titan v2 8,192.
# Chunks are counted in the local model's WordPiece tokens: a text's cl100k count was at most
# twice its WordPiece count on every text measured (a WordPiece token is a whole CJK character
# or a word piece; cl100k spends at most two on either), so half the window never undercounts.
_REMOTE_WINDOW = {"openai": 8191 // 2, "bedrock": 8192 // 2}
_SPECIAL_TOKENS = 2  # [CLS] and [SEP]
SEPARATOR = " › "
_WORDS = re.compile(r"[^\W\d_]{2}")  # a path that is only numbers and ids ("4983.txt") names nothing


def window_tokens(provider: str) -> int:
    """The text tokens (WordPiece) the knowledge base's model reads of one input."""
    if provider == "local":
        from chalicelib.embeddings.model_files import manifest

        return int(manifest()["maxSeqLength"]) - _SPECIAL_TOKENS
    return _REMOTE_WINDOW[provider]


def fitting_tokens(kb: dict) -> int:
    """The most tokens a chunk of this knowledge base holds: its chunkTokens, unless the model's
    window with the context line cannot read that many."""
    return max(limits.CHUNK_TOKENS.low,
               min(kb["chunk_tokens"], window_tokens(kb["embedding_provider"]) - limits.CHUNK_CONTEXT_TOKENS))


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
