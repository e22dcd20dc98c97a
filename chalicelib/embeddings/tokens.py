"""Token counting with the embedding model's own WordPiece tokenizer (offline, no torch)."""
from functools import lru_cache

from tokenizers import Tokenizer

from chalicelib.embeddings.model_files import model_file


@lru_cache(maxsize=1)
def _tokenizer() -> Tokenizer:
    tok = Tokenizer.from_file(str(model_file("tokenizer.json")))
    tok.no_truncation()
    tok.no_padding()
    return tok


def count_tokens(text: str) -> int:
    return len(_tokenizer().encode(text, add_special_tokens=False).ids)


def count_tokens_batch(texts: list[str]) -> list[int]:
    return [len(e.ids) for e in _tokenizer().encode_batch(texts, add_special_tokens=False)]
