"""Pages of a knowledge base's documents: the sorts, the filters and the opaque nextToken
that carries where the last page stopped (keyset paging: a page costs the same at
document 100,000 as at the first; bench/documents_list.py measures it)."""
import base64
import binascii
import json
from datetime import datetime
from dataclasses import dataclass
from typing import Optional

from chalicelib.errors import Invalid

# sort name -> what orders it (storage/documents.py holds the SQL of each)
SORTS = ("path", "updatedAt", "status")
DEFAULT_SORT = "path"


@dataclass(frozen=True)
class DocumentQuery:
    limit: int
    sort: str = DEFAULT_SORT
    status: Optional[str] = None
    prefix: Optional[str] = None  # of the path
    path: Optional[str] = None  # exactly this path
    after: Optional[tuple] = None  # the sort key of the last row of the previous page


def encode_token(kb_id: str, sort: str, key: tuple) -> str:
    raw = json.dumps([kb_id, sort, *key], separators=(",", ":")).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


_KEY_LENGTHS = {"path": 1, "updatedAt": 2, "status": 2}


def decode_token(token: Optional[str], kb_id: str, sort: str) -> Optional[tuple]:
    """The sort key a nextToken carries; a token of another knowledge base or sort, or
    one that is not ours, is a 400."""
    if token is None:
        return None
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        data = json.loads(raw)
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise Invalid.field("nextToken", "is not a token this API returned") from None
    if (not isinstance(data, list) or len(data) < 2 or not all(isinstance(v, str) for v in data)
            or data[1] not in _KEY_LENGTHS or len(data) != 2 + _KEY_LENGTHS[data[1]]):
        raise Invalid.field("nextToken", "is not a token this API returned")
    if data[0] != kb_id:
        raise Invalid.field("nextToken", "belongs to another knowledge base")
    if data[1] != sort:
        raise Invalid.field("nextToken", f"was returned for sort={data[1]}; ask with the same sort")
    if sort == "updatedAt":
        try:
            datetime.fromisoformat(data[2])
        except ValueError:
            raise Invalid.field("nextToken", "is not a token this API returned") from None
    return tuple(data[2:])


def row_key(sort: str, row: dict) -> tuple:
    """The sort key of a row, as the next page's query takes it."""
    if sort == "path":
        return (row["s3_key"],)
    if sort == "updatedAt":
        return (row["updated_at"].isoformat(), row["id"])
    return (row["status"], row["s3_key"])


def encode_chunk_token(doc_id: str, chunk_index: int) -> str:
    """Where a page of a document's chunks stopped: the last chunk's index."""
    raw = json.dumps([doc_id, chunk_index], separators=(",", ":")).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_chunk_token(token: Optional[str], doc_id: str) -> int:
    """The chunk index a nextToken of this document's chunk list carries (-1: from the start)."""
    if token is None:
        return -1
    try:
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise Invalid.field("nextToken", "is not a token this API returned") from None
    if (not isinstance(data, list) or len(data) != 2 or not isinstance(data[0], str)
            or isinstance(data[1], bool) or not isinstance(data[1], int) or not 0 <= data[1] < 2 ** 31):
        raise Invalid.field("nextToken", "is not a token this API returned")
    if data[0] != doc_id:
        raise Invalid.field("nextToken", "belongs to another document's chunks")
    return data[1]
