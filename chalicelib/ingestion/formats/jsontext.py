"""JSON as lines of key paths and values ("server.port: 8080"), so that a chunk says
what each value is; a large document becomes one section per top-level key."""
import json
import re

from chalicelib.ingestion.formats.base import Extracted, Format, Section, decode_text

JSON = "application/json"

# Below this many characters of lines, one section: splitting would only make small chunks.
ONE_SECTION_MAX_CHARS = 4000
_IDENTIFIER = re.compile(r"^[A-Za-z_$][\w$-]*$")


def _key(path: str, key: str) -> str:
    part = key if _IDENTIFIER.match(key) else json.dumps(key, ensure_ascii=False)
    if not _IDENTIFIER.match(key):
        return f"{path}[{part}]"
    return f"{path}.{part}" if path else part


def _lines(value, path: str, out: list[str]) -> None:
    if isinstance(value, dict) and value:
        for key, item in value.items():
            _lines(item, _key(path, str(key)), out)
    elif isinstance(value, list) and value:
        for i, item in enumerate(value):
            _lines(item, f"{path}[{i}]", out)
    else:
        scalar = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        scalar = " ".join(scalar.split()) if isinstance(value, str) else scalar
        out.append(f"{path or '$'}: {scalar}")


def read_json(data: bytes) -> Extracted:
    """JSON that does not parse (comments, JSON Lines, truncation) is read as text."""
    text = decode_text(data)
    lines: list[str] = []
    try:
        document = json.loads(text)
        _lines(document, "", lines)
    except (json.JSONDecodeError, RecursionError):
        return Extracted(JSON, [Section(text)])
    if sum(len(line) + 1 for line in lines) <= ONE_SECTION_MAX_CHARS or not isinstance(document, dict):
        return Extracted(JSON, [Section("\n".join(lines))])
    sections = []
    for key, value in document.items():
        part: list[str] = []
        _lines(value, _key("", str(key)), part)
        sections.append(Section("\n".join(part), headers=[str(key)]))
    return Extracted(JSON, sections)


FORMATS = (Format("JSON", (JSON,), lambda data, _type, _limits: read_json(data),
                  notes="one `key.path: value` line a value, one section a top-level key when large",
                  extensions={".json": JSON}, chunking="lines"),)
