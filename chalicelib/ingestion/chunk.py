"""Token-sized chunks that end at sentence or paragraph boundaries where they can.

A chunk never spans two sections, so its page and heading path are exact.
Offsets index the document text: the sections joined by SECTION_SEPARATOR.
"""
import re
from dataclasses import dataclass

from chalicelib import limits
from chalicelib.embeddings.tokens import count_tokens_batch
from chalicelib.errors import Invalid
from chalicelib.ingestion.extract import Extracted
from chalicelib.ingestion.model import Chunk

SECTION_SEPARATOR = "\n\n"
# A sentence: up to and including its closing punctuation, or up to a blank line.
_SENTENCE = re.compile(r"\S.*?(?:[.!?][\"')\]]*(?=\s)|(?=\n\s*\n)|\Z)", re.S)
_WORD = re.compile(r"\S+")


@dataclass
class _Unit:
    start: int
    end: int
    tokens: int


def validate_sizes(chunk_tokens: int, overlap: int) -> None:
    bounds = limits.CHUNK_TOKENS
    if isinstance(chunk_tokens, bool) or not isinstance(chunk_tokens, int) or not bounds.low <= chunk_tokens <= bounds.high:
        raise Invalid.field("chunking.chunkTokens", f"must be an integer {bounds.describe()}")
    if isinstance(overlap, bool) or not isinstance(overlap, int) or not 0 <= overlap <= chunk_tokens // 2:
        raise Invalid.field("chunking.chunkOverlap", "must be an integer from 0 to half of chunkTokens")


def _units(text: str, base: int, max_tokens: int) -> list[_Unit]:
    spans = [(m.start(), m.end()) for m in _SENTENCE.finditer(text)]
    counts = count_tokens_batch([text[a:b] for a, b in spans])
    units = []
    for (a, b), n in zip(spans, counts):
        if n <= max_tokens:
            units.append(_Unit(base + a, base + b, n))
            continue
        # A sentence longer than a chunk is cut between words.
        words = [(a + m.start(), a + m.end()) for m in _WORD.finditer(text[a:b])]
        word_tokens = count_tokens_batch([text[x:y] for x, y in words])
        start, acc = words[0][0], 0
        for (x, y), t in zip(words, word_tokens):
            if acc and acc + t > max_tokens:
                units.append(_Unit(base + start, base + x, acc))
                start, acc = x, 0
            acc += t
        units.append(_Unit(base + start, base + b, acc))
    return units


def _pack(units: list[_Unit], chunk_tokens: int, overlap: int) -> list[list[_Unit]]:
    groups, current, size = [], [], 0
    for unit in units:
        if current and size + unit.tokens > chunk_tokens:
            groups.append(current)
            carry, carried = [], 0
            for prev in reversed(current):
                if carried + prev.tokens > overlap:
                    break
                carry.insert(0, prev)
                carried += prev.tokens
            current, size = carry, carried
        current.append(unit)
        size += unit.tokens
    if current:
        groups.append(current)
    return groups


def chunk_document(extracted: Extracted, chunk_tokens: int, overlap: int, metadata: dict) -> list[Chunk]:
    document_text = SECTION_SEPARATOR.join(s.text for s in extracted.sections)
    chunks, offset = [], 0
    for section in extracted.sections:
        units = _units(section.text, offset, chunk_tokens)
        for group in _pack(units, chunk_tokens, overlap):
            start, end = group[0].start, group[-1].end
            content = document_text[start:end].strip()
            if content:
                chunks.append(Chunk(
                    chunk_index=len(chunks), content=content, page=section.page,
                    headers=section.headers, start_char=start, end_char=end,
                    token_count=sum(u.tokens for u in group), metadata=metadata))
        offset += len(section.text) + len(SECTION_SEPARATOR)
    return chunks
