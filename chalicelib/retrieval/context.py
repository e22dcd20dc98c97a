"""Fitting passages into an agent's context window.

Tokens are counted with the WordPiece tokenizer of all-MiniLM-L6-v2 (the
`tokenizers` library, offline); the last passage that does not fit whole is cut
at a sentence boundary (else at a word), ends with "..." and is marked truncated."""
import re
from bisect import bisect_right
from dataclasses import dataclass
from typing import Generic, Optional, Protocol, Sequence, TypeVar

from chalicelib.embeddings.tokens import count_tokens, token_ends

_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+|\n\s*\n")
_WORD = re.compile(r"\S+")
ELLIPSIS = "..."
MIN_USEFUL_TOKENS = 16


def cut_to_tokens(text: str, budget: int) -> str:
    """The longest run of whole sentences from the start of text that fits the budget with
    "..." after it; when not even the first sentence does, the longest run of whole words
    and "..." (seed 000's context window manager: a cut passage says the text goes on
    either way); '' if no word fits."""
    cut = _first_sentences(text, budget, ELLIPSIS)
    if cut:
        return cut + ELLIPSIS
    return text if count_tokens(text) <= budget else _cut_at_word(text, budget)


def summarise(text: str, budget: int) -> str:
    """Seed 003's summary of a passage, extractive: the whole text when it fits the
    budget, else its first sentences within it (or its first words and "...")."""
    if count_tokens(text) <= budget:
        return text
    return _first_sentences(text, budget) or _cut_at_word(text, budget)


def _first_sentences(text: str, budget: int, suffix: str = "") -> str:
    """The longest run of whole sentences from the start of text within budget with suffix
    after it; '' when not even the first one fits. The text's first budget tokens are read
    once: a run of sentences ends at whitespace or punctuation, so its tokens are the ones
    ending within it. The run chosen is then counted whole, as every other count is."""
    extra = count_tokens(suffix) if suffix else 0
    ends, covered = token_ends(text, budget - extra + 1)
    best = _longest_run(text, lambda run: len(run) <= covered and bisect_right(ends, len(run)) + extra <= budget)
    if best and count_tokens(best + suffix) > budget:  # never seen with WordPiece; the budget holds regardless
        return _longest_run(best, lambda run: count_tokens(run + suffix) <= budget)
    return best


def _longest_run(text: str, fits) -> str:
    """The longest run of whole sentences from the start of text that fits; '' if none."""
    best = ""
    for match in _SENTENCE_END.finditer(text):
        candidate = text[: match.start()].rstrip()
        if not fits(candidate):
            break
        best = candidate
    return best


def _cut_at_word(text: str, budget: int) -> str:
    ends = [m.end() for m in _WORD.finditer(text)]
    fits = lambda n: count_tokens(_with_ellipsis(text, ends[n - 1])) <= budget  # noqa: E731
    low, high = 0, len(ends)  # the most words that fit, by bisection: tokens grow with words
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return _with_ellipsis(text, ends[low - 1]) if low else ""


def _with_ellipsis(text: str, end: int) -> str:
    return text[:end].rstrip(",;:-") + ELLIPSIS


def excerpt(text: str, max_chars: int) -> str:
    """The text whole when it has at most max_chars characters, else its first whole words
    within them and "..." (a word longer than that is cut)."""
    if len(text) <= max_chars:
        return text
    room = max_chars - len(ELLIPSIS)
    head = text[:room + 1]
    cut = head[:head.rfind(" ")] if " " in head.strip() else text[:room]
    return cut.rstrip(" ,;:-") + ELLIPSIS


class Packable(Protocol):
    """Text a token budget is spent on (a search's Hit, an agent's passage)."""
    @property
    def content(self) -> str: ...

    @property
    def tokens(self) -> Optional[int]: ...  # counted already (when the chunk was cut), else None


P = TypeVar("P", bound=Packable)


@dataclass(frozen=True)
class Fitted(Generic[P]):
    """What of an item fits the budget."""
    item: P
    content: str  # the item's, or its first part when cut to fit
    tokens: int
    truncated: bool


def pack(items: Sequence[P], max_tokens: int) -> tuple[list[Fitted[P]], int, int]:
    """(what fits, tokens used, number left out), in the given order: each item whole, and
    the last cut to fit (`truncated`) when it would not fit whole."""
    kept, used = [], 0
    for item in items:
        # Chunks carry the count made when they were cut; count only what lacks one.
        tokens = item.tokens or count_tokens(item.content)
        if used + tokens <= max_tokens:
            kept.append(Fitted(item, item.content, tokens, truncated=False))
            used += tokens
            continue
        remaining = max_tokens - used
        if remaining >= MIN_USEFUL_TOKENS:
            cut = cut_to_tokens(item.content, remaining)
            if cut:
                tokens = count_tokens(cut)
                kept.append(Fitted(item, cut, tokens, truncated=True))
                used += tokens
        return kept, used, len(items) - len(kept)
    return kept, used, 0
