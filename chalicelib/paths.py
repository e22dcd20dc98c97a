"""A document's path below its knowledge base, as the API takes it and as a source's names
are copied in (chalicelib/sources): nothing in it reaches outside kb/{kbId}/."""
import re
import unicodedata

from chalicelib import limits
from chalicelib.errors import Invalid


def _clean_segment(segment: str, field: str) -> str:
    segment = "".join(ch for ch in segment if unicodedata.category(ch)[0] != "C").strip()
    if segment in (".", ".."):
        raise Invalid.field(field, "must not hold '.' or '..' segments")
    segment = re.sub(r"[^\w.\- ()@+,=~]+", "_", segment)
    if len(segment) > limits.PATH_SEGMENT_MAX_CHARS:
        raise Invalid.field(field, f"each name in it must be at most {limits.PATH_SEGMENT_MAX_CHARS} characters")
    return segment


def clean_path(path: str, field: str = "path") -> str:
    """A document's path below its knowledge base: '/'-separated names (a '\\' counts as
    one), NFC, no control characters, no '.' or '..' (no way out of kb/{kbId}/), empty
    segments dropped; characters S3 and shells handle badly become '_'."""
    path = unicodedata.normalize("NFC", path).replace("\\", "/")
    segments = [_clean_segment(s, field) for s in path.split("/") if s.strip()]
    if not segments or not re.search(r"[^\W_]", segments[-1]):
        raise Invalid.field(field, "must name a file (letters or digits)")
    cleaned = "/".join(segments)
    if len(cleaned.encode("utf-8")) > limits.PATH_MAX_BYTES:
        raise Invalid.field(field, f"must be at most {limits.PATH_MAX_BYTES} bytes")
    return cleaned
