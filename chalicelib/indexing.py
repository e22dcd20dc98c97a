"""What every store of chunks runs once it has committed (the pipeline's Store step, an
entry written or re-chunked): the knowledge base's results-cache counter moved, and its
BM25 tail folded into the blocks when it has grown long. Below ingestion and documents,
which call it, and above the storage it works on."""
import logging

from chalicelib import freshness, limits
from chalicelib.storage import connection
from chalicelib.storage import terms as storage_terms

logger = logging.getLogger(__name__)
# Postings a knowledge base's tail may hold before a store folds it into the blocks: the
# tail is read row by row (~1 us a posting), the blocks as arrays. At a million chunks 500
# new chunks left 23,106 postings in the tail, and folding them rewrote 6,616 blocks in 4.8 s.
TAIL_MAX = 20_000


def after_store(kb_id: str) -> None:
    """After the chunks of a knowledge base were stored (committed)."""
    freshness.bump(kb_id)
    fold_tail(kb_id)


def fold_tail(kb_id: str) -> None:
    """In its own transaction: folds the knowledge base's tail into its blocks once it holds
    more than TAIL_MAX postings, and packs a batch of its blocks still in 0026's layout, if
    any (migration 0028). A failure leaves both as they are (searches read them; the next
    store tries again)."""
    try:
        with connection() as conn:
            if storage_terms.tail_size(conn, kb_id, TAIL_MAX) > TAIL_MAX:
                storage_terms.compact(conn, kb_id, storage_terms.BLOCK)
            storage_terms.repack(conn, kb_id, limits.BM25_REPACK_BLOCKS)
    except Exception:  # noqa: BLE001 - the store itself succeeded
        logger.exception("folding the BM25 tail of %s failed; the next store tries again", kb_id)
