"""Token counting with the embedding model's own WordPiece tokenizer (offline, no torch).

The tokenizer's Encodings (ids, offsets, masks, the token strings) take a few hundred bytes a
token, so texts are counted in slices of at most PIECE_CHARS at a time: a 50 MB text file
counted whole held 9 GB, more than its function's memory. A slice ends at whitespace, where
the model's pre-tokenizer splits anyway, so the sum of the slices' counts is the whole's."""
import re
from functools import lru_cache
from typing import Iterator

from tokenizers import Tokenizer

from chalicelib.embeddings.model_files import model_file

PIECE_CHARS = 100_000
_LAST_SPACE = re.compile(r"\s(?=\S*$)")


@lru_cache(maxsize=1)
def _tokenizer() -> Tokenizer:
    tok = Tokenizer.from_file(str(model_file("tokenizer.json")))
    tok.no_truncation()
    tok.no_padding()
    return tok


# A search counts the same short texts more than once (a passage cut to fit, then packed).
_CACHED_CHARS = 20_000


def count_tokens(text: str) -> int:
    return _count_short(text) if len(text) <= _CACHED_CHARS else count_tokens_batch([text])[0]


@lru_cache(maxsize=512)
def _count_short(text: str) -> int:
    return count_tokens_batch([text])[0]


def token_ends(text: str, enough: int) -> tuple[list[int], int]:
    """Where text's first tokens end (character offsets, in order), at least `enough` of them
    or all, and how many of text's characters they cover: only as much of the text is read
    (a token takes a character or more). The tokens of text[:n], n within that cover and at
    whitespace or punctuation, are the ones ending at n or before."""
    size = max(256, enough * 6)
    while True:
        piece = text if size >= len(text) else text[:_whole_words_end(text, size)]
        ends = [end for _, end in _tokenizer().encode(piece, add_special_tokens=False).offsets]
        if piece is text or len(ends) >= enough:
            return ends, len(piece)
        size *= 2


def count_tokens_batch(texts: list[str]) -> list[int]:
    counts = [0] * len(texts)
    for group in _groups(texts):
        encoded = _tokenizer().encode_batch([piece for _, piece in group], add_special_tokens=False)
        for (i, _), encoding in zip(group, encoded):
            counts[i] += len(encoding.ids)
    return counts


def _groups(texts: list[str]) -> Iterator[list[tuple[int, str]]]:
    """(index of the text, a slice of it), in groups of about PIECE_CHARS characters."""
    group, size = [], 0
    for i, text in enumerate(texts):
        for piece in _slices(text):
            group.append((i, piece))
            size += len(piece)
            if size >= PIECE_CHARS:
                yield group
                group, size = [], 0
    if group:
        yield group


def _slices(text: str) -> Iterator[str]:
    """The text in slices of at most PIECE_CHARS, each cut after its last whitespace (a run of
    PIECE_CHARS without any is cut where it stands)."""
    while len(text) > PIECE_CHARS:
        cut = _whole_words_end(text, PIECE_CHARS)
        yield text[:cut]
        text = text[cut:]
    yield text


def _whole_words_end(text: str, limit: int) -> int:
    """Where text[:limit] ends after its last whitespace (a cut there splits no token); limit
    when it has none."""
    space = _LAST_SPACE.search(text, 0, limit)
    return space.end() if space else limit
