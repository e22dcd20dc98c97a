"""Fitting passages into an agent's context window.

Tokens are counted with the WordPiece tokenizer of all-MiniLM-L6-v2 (the
`tokenizers` library, offline); the last passage that does not fit whole is cut
at a sentence boundary and marked truncated."""
import re

from chalicelib.embeddings.tokens import count_tokens

_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+|\n\s*\n")
MIN_USEFUL_TOKENS = 16


def cut_to_tokens(text: str, budget: int) -> str:
    """The longest run of whole sentences from the start of text within budget ('' if none)."""
    best = ""
    for match in _SENTENCE_END.finditer(text):
        candidate = text[: match.start()].rstrip()
        if count_tokens(candidate) > budget:
            break
        best = candidate
    if not best and count_tokens(text) <= budget:
        best = text
    return best


def pack(results: list[dict], max_tokens: int) -> tuple[list[dict], int, int]:
    """(kept results, tokens used, number left out), in the given order."""
    kept, used = [], 0
    for result in results:
        # Chunks carry the count made when they were cut; count only what lacks one.
        tokens = result.get("token_count") or count_tokens(result["content"])
        if used + tokens <= max_tokens:
            kept.append({**result, "tokens": tokens, "truncated": False})
            used += tokens
            continue
        remaining = max_tokens - used
        if remaining >= MIN_USEFUL_TOKENS:
            cut = cut_to_tokens(result["content"], remaining)
            if cut:
                tokens = count_tokens(cut)
                kept.append({**result, "content": cut, "tokens": tokens, "truncated": True})
                used += tokens
        return kept, used, len(results) - len(kept)
    return kept, used, 0
