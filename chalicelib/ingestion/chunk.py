"""Token-sized chunks that end at sentence or paragraph boundaries where they can.

Offsets index the document text: the sections joined by SECTION_SEPARATOR. A chunk
spans two sections only where a section below the floor (MIN_CHUNK_TOKENS) was merged
with its neighbour; its page is then that of the section holding most of its text, and
its heading trail the deepest one its main sections agree on (a heading alone merged
with its first subsection takes the subsection's; "Booking trains" merged with its sibling
"Expenses" is under their parent "Travel policy", not under one of them: a model cites it). Source code and other line-structured text is cut on definitions,
blank lines and lines; a table's chunks each start with its header row.
"""
import re
from dataclasses import dataclass
from typing import Callable, Optional

from chalicelib import limits
from chalicelib.embeddings.tokens import count_tokens_batch
from chalicelib.errors import Invalid
from chalicelib.ingestion.extract import LINE_STRUCTURED, TABLES, Extracted, Section
from chalicelib.ingestion.model import Chunk

SECTION_SEPARATOR = "\n\n"
# The floor: a section (a heading and what follows it, a PDF page) below this many tokens
# is merged with the sections after it, and the last chunk of a section borrows from the
# one before. A heading alone is under 15 tokens, the navigation chunks of issue 27 were
# 20-35 (a Next/Previous/Up bar, a table of contents), while a statement a question can be
# answered from (an API function's one-paragraph description in Node.js's documentation)
# is 40 and more. A knowledge base's chunks of 50 tokens (the smallest size) halve it.
MIN_CHUNK_TOKENS = 40
# A sentence: up to and including its closing punctuation, or up to a blank line.
_SENTENCE = re.compile(r"\S.*?(?:[.!?][\"')\]]*(?=\s)|(?=\n\s*\n)|\Z)", re.S)
_WORD = re.compile(r"\S+")
_LINE = re.compile(r"[^\n]*\n?")
# Where code is cut: before a definition, in most languages' words for one.
_DEFINITION = re.compile(
    r"[ \t]*(?:(?:export|default|public|private|protected|internal|static|async|abstract|final|override|"
    r"virtual|inline|unsafe|extern|pub(?:\([^)]*\))?|const)\s+)*"
    r"(?:def|class|function|func|fn|interface|struct|enum|trait|impl|module|namespace|type|object|sub|proc)\b")
_COMMENT_OR_DECORATOR = re.compile(r"[ \t]*(?:#|//|/\*|\*|--|;|@|\[)")
_CLOSER = re.compile(r"(?:[}\])]|end\b|fi\b|done\b|esac\b|else\b|elif\b|except\b|finally\b|catch\b)")


@dataclass
class Unit:
    """A sentence, a piece of code or a run of words: what a chunk is packed from. start and
    end index the document text (the sections joined by SECTION_SEPARATOR)."""
    start: int
    end: int
    tokens: int
    fresh: bool = False  # the first piece of a block too large for a chunk: starts a chunk


def validate_sizes(chunk_tokens: int, overlap: int) -> None:
    bounds = limits.CHUNK_TOKENS
    if isinstance(chunk_tokens, bool) or not isinstance(chunk_tokens, int) or not bounds.low <= chunk_tokens <= bounds.high:
        raise Invalid.field("chunking.chunkTokens", f"must be an integer {bounds.describe()}")
    if isinstance(overlap, bool) or not isinstance(overlap, int) or not 0 <= overlap <= chunk_tokens // 2:
        raise Invalid.field("chunking.chunkOverlap", "must be an integer from 0 to half of chunkTokens")


def _word_units(text: str, a: int, b: int, base: int, max_tokens: int) -> list[Unit]:
    """A span longer than a chunk is cut between words."""
    words = [(a + m.start(), a + m.end()) for m in _WORD.finditer(text[a:b])]
    if not words:
        return []
    word_tokens = count_tokens_batch([text[x:y] for x, y in words])
    units, start, acc = [], words[0][0], 0
    for (x, y), t in zip(words, word_tokens):
        if acc and acc + t > max_tokens:
            units.append(Unit(base + start, base + x, acc))
            start, acc = x, 0
        acc += t
    units.append(Unit(base + start, base + words[-1][1], acc))
    return units


def _sentence_units(text: str, base: int, max_tokens: int) -> list[Unit]:
    spans = [(m.start(), m.end()) for m in _SENTENCE.finditer(text)]
    counts = count_tokens_batch([text[a:b] for a, b in spans])
    units = []
    for (a, b), n in zip(spans, counts):
        if n <= max_tokens:
            units.append(Unit(base + a, base + b, n))
        else:
            units.extend(_word_units(text, a, b, base, max_tokens))
    return units


def _lines(text: str) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in _LINE.finditer(text) if m.end() > m.start()]


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _cuts(text: str, lines: list[tuple[int, int]], level: int) -> list[int]:
    """Line indexes a block may be cut before, coarsest first: 0 top-level statements
    and definitions, 1 any definition or comment after a blank line, 2 any line after a
    blank line, 3 any line."""
    cuts = []
    for i in range(1, len(lines)):
        line = text[lines[i][0]:lines[i][1]].rstrip("\n")
        prev = text[lines[i - 1][0]:lines[i - 1][1]].strip()
        if not line.strip():
            continue
        after_blank = not prev
        if level == 0:
            top = _indent(line) == 0 and not _CLOSER.match(line)
            ok = top and (after_blank or (_DEFINITION.match(line) and not _COMMENT_OR_DECORATOR.match(prev)))
        elif level == 1:
            ok = after_blank and (_DEFINITION.match(line) or _COMMENT_OR_DECORATOR.match(line))
        elif level == 2:
            ok = after_blank
        else:
            ok = True
        if ok:
            cuts.append(i)
    return cuts


def _block_units(text: str, a: int, b: int, base: int, max_tokens: int, level: int) -> list[Unit]:
    """Text[a:b] as units within max_tokens, cut at the coarsest level that does it."""
    lines = [(a + x, a + y) for x, y in _lines(text[a:b])]
    if level > 3 or len(lines) <= 1:
        return _word_units(text, a, b, base, max_tokens)
    cuts = _cuts(text, lines, level)
    bounds = [0] + cuts + [len(lines)]
    pieces = []
    for i, j in zip(bounds, bounds[1:]):
        start = lines[i][0]
        end = lines[j - 1][1]
        while end > start and text[end - 1].isspace():
            end -= 1
        if end > start:
            pieces.append((start, end))
    counts = count_tokens_batch([text[x:y] for x, y in pieces])
    units = []
    for (x, y), n in zip(pieces, counts):
        if n <= max_tokens:
            units.append(Unit(base + x, base + y, n))
        else:
            inner = _block_units(text, x, y, base, max_tokens, level + 1)
            if inner:
                inner[0].fresh = True
            units.extend(inner)
    return units


def _line_units(text: str, base: int, max_tokens: int) -> list[Unit]:
    start = len(text) - len(text.lstrip())
    return _block_units(text, start, len(text.rstrip()), base, max_tokens, 0)


def pack_units(units: list[Unit], chunk_tokens: int, overlap: int, floor: int) -> list[list[Unit]]:
    """The fixed strategy: as many units as fit, each chunk starting with the last
    overlap tokens of the one before."""
    groups, current, size = [], [], 0
    for unit in units:
        if current and (size + unit.tokens > chunk_tokens or unit.fresh):
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
    # A last chunk below the floor takes units from the end of the one before, while that
    # one stays above the floor (without overlap: with it, the last chunk holds the carry).
    if overlap == 0 and len(groups) > 1:
        before, last = groups[-2], groups[-1]
        while (sum(u.tokens for u in last) < floor and len(before) > 1
               and sum(u.tokens for u in before[:-1]) >= floor
               and sum(u.tokens for u in last) + before[-1].tokens <= chunk_tokens):
            last.insert(0, before.pop())
    return groups


# A section whose text (its heading aside) holds no sentence is a synopsis, a signature or a
# term ("frob [-k] [-w width] [--catalogue=<path>] <gadget>…", "int frob_open(const char
# *zPath, frob **ppOut);"): whatever its size up to this, it opens the section after it (the
# description) instead of ending a run, so that no chunk is a synopsis alone.
LEAD_MAX_TOKENS = 200
_SENTENCE_END = re.compile(r"(?<=[A-Za-z0-9)])[.!?][\"')\]]*(?:\s|$)")  # not "[<path>...]"


def _is_lead(section: Section, tokens: int) -> bool:
    lines = section.text.strip().split("\n")
    if section.headers and lines[0].strip() == section.headers[-1]:
        lines = lines[1:]
    body = "\n".join(lines).strip()
    return bool(body) and tokens <= LEAD_MAX_TOKENS and not _SENTENCE_END.search(body)


def _merged(sections: list[Section], tokens: list[int], floor: int, leads: Optional[list[bool]] = None
            ) -> list[list[int]]:
    """Runs of section indexes: a section below the floor (or a lead: a synopsis) joins the
    ones after it until the run reaches the floor; a last run below it joins the run before."""
    runs, current, size = [], [], 0
    for i, n in enumerate(tokens):
        current.append(i)
        size += n
        if size >= floor and not (leads and leads[i] and i + 1 < len(tokens)):
            runs.append(current)
            current, size = [], 0
    if current:
        if runs:
            runs[-1].extend(current)
        else:
            runs.append(current)
    return runs


def _table_header(text: str) -> str:
    return text.split("\n", 1)[0].strip()


# How another strategy groups the units of prose (semantic_chunk.py): given the document
# text, each run's sentence units, the chunk size, overlap and floor, the chunks of each run.
PackRuns = Callable[[str, list[list[Unit]], int, int, int], list[list[list[Unit]]]]


def chunk_document(extracted: Extracted, chunk_tokens: int, overlap: int, metadata: dict,
                   pack_runs: Optional[PackRuns] = None) -> list[Chunk]:
    """The document's chunks; pack_runs groups the units of prose (tables and code are
    always packed by pack_units), by default pack_units run by run."""
    sections = extracted.sections
    document_text = SECTION_SEPARATOR.join(s.text for s in sections)
    starts, offset = [], 0
    for section in sections:
        starts.append(offset)
        offset += len(section.text) + len(SECTION_SEPARATOR)
    floor = min(MIN_CHUNK_TOKENS, chunk_tokens // 2)
    tokens = count_tokens_batch([s.text for s in sections]) if sections else []
    is_table = extracted.content_type in TABLES
    line_structured = is_table or extracted.content_type in LINE_STRUCTURED
    prepared = []  # per run: its sections, the table header its chunks repeat, its units
    leads = None if line_structured else [_is_lead(s, n) for s, n in zip(sections, tokens)]
    for run in _merged(sections, tokens, floor, leads):
        first, last = run[0], run[-1]
        start, end = starts[first], starts[last] + len(sections[last].text)
        text = document_text[start:end]
        header, header_tokens = "", 0
        if is_table:
            header = _table_header(sections[first].text)
            header_tokens = count_tokens_batch([header])[0] if header else 0
            if header_tokens > chunk_tokens // 2:  # a header this wide is not repeated
                header, header_tokens = "", 0
        budget = chunk_tokens - header_tokens
        prepared.append((run, header, header_tokens,
                         (_line_units if line_structured else _sentence_units)(text, start, budget)))
    if pack_runs is None or line_structured:
        grouped = [pack_units(units, chunk_tokens - header_tokens, overlap, floor)
                   for _, _, header_tokens, units in prepared]
    else:
        grouped = pack_runs(document_text, [units for *_, units in prepared], chunk_tokens, overlap, floor)
    chunks = []
    for (run, header, header_tokens, _), groups in zip(prepared, grouped):
        for group in groups:
            a, b = group[0].start, group[-1].end
            body = document_text[a:b].rstrip() if line_structured else document_text[a:b].strip()
            if not body.strip():
                continue
            size = sum(u.tokens for u in group)
            owner = _owner(run, starts, sections, a, b)
            if header:  # the header row of the table the chunk starts in, unless it starts with it
                table_header = _table_header(sections[_section_at(run, starts, a)].text)
                if not body.startswith(table_header):
                    body, size = table_header + "\n" + body, size + header_tokens
            chunks.append(Chunk(
                chunk_index=len(chunks), content=body, page=sections[owner].page,
                headers=_shared_trail(run, starts, sections, a, b), start_char=a, end_char=b,
                token_count=size, metadata=metadata))
    return chunks


def _section_at(run: list[int], starts: list[int], position: int) -> int:
    """The section of the run the position falls in."""
    return max((i for i in run if starts[i] <= position), default=run[0])


# A section holding less than this share of a merged chunk (a heading alone, a leftover
# navigation line) does not narrow its heading trail.
TRAIL_SHARE = 0.25


def _shared_trail(run: list[int], starts: list[int], sections: list[Section], a: int, b: int) -> list[str]:
    """The heading trail of a span [a, b): of the sections holding at least TRAIL_SHARE of
    it, the deepest trail when they lie on one path (a heading and its first subsection),
    else what their trails share (two sibling sections: their parent)."""
    overlaps = [(i, min(b, starts[i] + len(sections[i].text)) - max(a, starts[i])) for i in run]
    trails = [sections[i].headers for i, n in overlaps if n >= TRAIL_SHARE * (b - a)] \
        or [sections[max(overlaps, key=lambda o: o[1])[0]].headers]
    deepest = max(trails, key=len)
    if all(deepest[:len(t)] == t for t in trails):
        return list(deepest)
    shared = list(trails[0])
    for trail in trails[1:]:
        n = 0
        while n < min(len(shared), len(trail)) and shared[n] == trail[n]:
            n += 1
        shared = shared[:n]
    return shared


def _owner(run: list[int], starts: list[int], sections: list[Section], a: int, b: int) -> int:
    """The section of the run holding most of the span [a, b)."""
    if len(run) == 1:
        return run[0]
    best, most = run[0], -1
    for i in run:
        overlap = min(b, starts[i] + len(sections[i].text)) - max(a, starts[i])
        if overlap > most:
            best, most = i, overlap
    return best
