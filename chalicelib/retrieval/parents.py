"""Small-to-big passages: the index holds chunks that fit the embedding model's window (the
children, ingestion/context.py); a search ranks them and answers with their parent, the child
and its neighbours of the same section up to the knowledge base's chunkTokens (a hierarchical
one's parentTokens), one passage per parent. A knowledge base whose chunkTokens fits the window
has parents of one child: its passages are its chunks, as before.

The parent is grown around the child, the next chunk first then the one before, while the
section lasts, the tokens stay within chunkTokens and no chunk of a passage already answered is
met; a later hit whose child lies inside a passage already answered is left out. Neighbours are
read a batch of hits at a time (usually one), from the child's own document and version, so the
caller reads nothing more than the child's document allows."""
from chalicelib.embeddings.tokens import count_tokens
from chalicelib.ingestion.context import fitting_tokens
from chalicelib.storage import chunks
from chalicelib.storage.chunks import Hit

# Hits looked at for top_k parents: several children of one parent count once.
DEPTH = 3


def reach(kb: dict) -> int:
    """How many neighbours on each side a parent of this knowledge base can take in."""
    child = fitting_tokens(kb)
    return 0 if kb["chunk_tokens"] <= child else -(-kb["chunk_tokens"] // max(1, child // 2))


def parents(conn, hits: list[Hit], kbs: dict[str, dict], top_k: int) -> list[Hit]:
    """The best top_k parents of the ranked hits, each the hit with its parent's text, tokens and
    span (first and last chunk index)."""
    reaches = {h.chunk_id: reach(kbs[h.kb_id]) for h in hits}
    growing = [h for h in hits if reaches[h.chunk_id] and h.kind == "file"]
    position = {h.chunk_id: i for i, h in enumerate(growing)}
    around: dict[int, dict[int, dict]] = {}
    read_to = 0  # the neighbours of growing[:read_to] are read
    out: list[Hit] = []
    taken: dict[str, list[tuple[int, int]]] = {}
    for hit in hits:
        if len(out) == top_k:
            break
        if any(a <= hit.chunk_index <= b for a, b in taken.get(hit.document_id, ())):
            continue  # its parent is answered already
        at = position.get(hit.chunk_id, -1)
        if at >= read_to:
            # Read for as many hits as parents are still wanted (most hits make one), not
            # for all the hits looked at: a second read only when some were passed over.
            batch = growing[at: at + top_k - len(out)]
            for row in chunks.neighbours(conn, [h.chunk_id for h in batch], [reaches[h.chunk_id] for h in batch],
                                         sorted({h.kb_id for h in batch})):
                around.setdefault(row["child"], {})[row["chunk_index"]] = row
            read_to = at + len(batch)
        grown = _grown(hit, around.get(hit.chunk_id, {}), kbs[hit.kb_id]["chunk_tokens"],
                       taken.get(hit.document_id, ()))
        taken.setdefault(hit.document_id, []).append(grown.span or (hit.chunk_index, hit.chunk_index))
        out.append(grown)
    return out


def _grown(hit: Hit, near: dict[int, dict], budget: int, taken) -> Hit:
    """The hit grown over its neighbours (of its own section, as read) within the budget, never
    into a passage already answered."""
    if not near:
        return hit
    first = last = hit.chunk_index
    tokens = hit.tokens or near.get(hit.chunk_index, {}).get("token_count") or 0
    grew = True
    while grew:
        grew = False
        for index in (last + 1, first - 1):
            row = near.get(index)
            if (row is None or tokens + (row["token_count"] or 0) > budget
                    or any(a <= index <= b for a, b in taken)):
                continue
            tokens += row["token_count"] or 0
            first, last, grew = min(first, index), max(last, index), True
    if first == last:
        return hit

    def chunk(index: int) -> tuple[str, int | None]:
        return (hit.content, hit.tokens) if index == hit.chunk_index else (near[index]["content"],
                                                                            near[index]["token_count"])

    # What is answered is counted (a token budget, maxTokens, spends it): the chunks' counts summed,
    # less the overlap each pair shares, which the text holds once. A chunk's count is its text's
    # (WordPiece, ingestion/chunk.py) and the pieces meet at word boundaries, so the sum is the
    # joined text's without tokenizing it again: 1-2 ms a passage, ten a search.
    text, tokens = chunk(first)
    for index in range(first + 1, last + 1):
        right, right_tokens = chunk(index)
        text, shared = _joined(text, right)
        tokens = None if tokens is None or right_tokens is None else (
            tokens + right_tokens - (count_tokens(shared) if shared else 0))
    return hit._replace(content=text, tokens=count_tokens(text) if tokens is None else tokens, span=(first, last))


def _joined(left: str, right: str) -> tuple[str, str]:
    """Two neighbouring chunks as one text, the overlap they share (chunkOverlap) written once;
    and that overlap ("" when they share none)."""
    head = right[:40]
    at = left.rfind(head, max(0, len(left) - len(right) - 1)) if len(head) >= 20 else -1
    if at >= 0 and right.startswith(left[at:]):
        return left[:at] + right, left[at:]
    return (f"{left}\n\n{right}" if right[:1].isupper() or right[:1] in "-*#|`" else f"{left} {right}"), ""
