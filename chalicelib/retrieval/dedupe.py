"""Passages whose text is the same or nearly, answered once.

A block included in several pages, or an HTML page beside the text it was made from, is
indexed once per document; a search would spend several of its top K on one answer. The
search (retrieval/search.py) keeps the best-ranked of each group and names the others'
documents beside it (a passage's `alsoIn`).

Two texts are the same when their normalised words (case folded, ASCII punctuation and
whitespace dropped) are; nearly the same when both have NEAR_MIN_WORDS words or more and
the sets of their word 3-shingles overlap by NEAR_JACCARD (Jaccard) or more. Measured on
chunks of two documentation sets nobody here wrote (Node.js's API pages, each as Markdown
and as HTML, and Vim's help files; 859 chunks at 500 tokens, 1,757 at 200, cut by the
service's extraction and chunker):
- chunks of different pages: below 0.25 at 500 tokens; at most 0.36 at 200 (chunks of 20
  words or more: 0.27);
- a chunk with one line replaced (300 chunks of 40 words or more): at least 0.51 (500) and
  0.40 (200), 0.64 and 0.61 for 95% of them;
- an HTML page's chunk against the best chunk of its Markdown source: 94% (500) and 97% (200)
  at 0.4 or more, 84% and 87% at 0.5 (their boundaries and markup differ).
The sets of words are compared first: of 1,531 pairs at 0.4 or more by shingles, one had
fewer than 0.4 of its words in common, and one of 200,000 pairs of different pages' chunks
had as many; so shingles are read only for the pairs that may repeat each other, and a
search's dedupe costs a fraction of a millisecond."""
import string
from typing import Callable, Generic, Optional, Sequence, TypeVar

NEAR_JACCARD = 0.4
# Shorter texts repeat only exactly: in a sentence or two, one word changed is another statement
# ("the reset code at site A is 4417" and "... at site B ..."); the one-line changes measured
# above were in chunks of 40 words or more.
NEAR_MIN_WORDS = 40
SHINGLE = 3
_PUNCTUATION = string.punctuation

T = TypeVar("T")


class _Text:
    """A text's fingerprint: its normalised words (the exact match), the set of them (the
    near match's first look) and, read only when that passes, their shingles."""
    __slots__ = ("words", "vocabulary", "_shingles")

    def __init__(self, text: str):
        self.words = tuple(_spaced(text.lower()).split())
        self.vocabulary = frozenset(self.words)
        self._shingles: Optional[frozenset] = None

    @property
    def shingles(self) -> frozenset:
        if self._shingles is None:
            w = self.words
            self._shingles = (frozenset(zip(*(w[i:] for i in range(SHINGLE)))) if len(w) >= SHINGLE
                              else frozenset((w,)))
        return self._shingles


def _spaced(text: str) -> str:
    """text with each ASCII punctuation mark made a space: a replace a mark present is half the
    time of str.translate through a table, which looks every character up."""
    for mark in _PUNCTUATION:
        if mark in text:
            text = text.replace(mark, " ")
    return text


def normalised(text: str) -> str:
    """The words of text, lower case, one space apart: what the exact match compares."""
    return " ".join(_Text(text).words)


def jaccard(a: str, b: str) -> float:
    """The Jaccard similarity of two texts' word 3-shingles, 0..1."""
    return _shingle_jaccard(_Text(a), _Text(b))


def _jaccard(a: frozenset, b: frozenset) -> float:
    if not a or not b:
        return 1.0 if a == b else 0.0
    small, large = (a, b) if len(a) <= len(b) else (b, a)
    if len(small) < NEAR_JACCARD * len(large):  # below the threshold whatever they share
        return len(small) / len(large)
    common = len(small & large)
    return common / (len(a) + len(b) - common)


def _shingle_jaccard(a: _Text, b: _Text) -> float:
    return 1.0 if a.words == b.words else _jaccard(a.shingles, b.shingles)


def same_text(a: _Text, b: _Text) -> bool:
    if a.words == b.words:
        return True
    return (min(len(a.words), len(b.words)) >= NEAR_MIN_WORDS
            and _jaccard(a.vocabulary, b.vocabulary) >= NEAR_JACCARD
            and _jaccard(a.shingles, b.shingles) >= NEAR_JACCARD)


class Group(Generic[T]):
    """One answer: the best-ranked item and the items that repeat its text, in rank order."""
    __slots__ = ("kept", "repeats", "text")

    def __init__(self, kept: T, text: _Text):
        self.kept, self.repeats, self.text = kept, [], text


def distinct(items: Sequence[T], text_of: Callable[[T], str], limit: Optional[int] = None) -> list[Group[T]]:
    """items (best first) grouped by text, each group kept by the best of its items, until
    `limit` groups are made: what comes after is not read."""
    groups: list[Group[T]] = []
    exact: dict[tuple, Group[T]] = {}
    for item in items:
        if limit is not None and len(groups) >= limit:
            break
        text = _Text(text_of(item))
        group = exact.get(text.words) or next((g for g in groups if same_text(g.text, text)), None)
        if group is not None:
            group.repeats.append(item)
        else:
            group = Group(item, text)
            groups.append(group)
            exact.setdefault(text.words, group)
    return groups
