"""Text: plain, Markdown, reStructuredText and AsciiDoc (headings become sections with
their heading trail), and source code and configuration files (one section: the chunker
cuts them on definitions and blank lines)."""
import re

from chalicelib.ingestion.formats.base import (ASCIIDOC, MARKDOWN, RST, Extracted, Section, SectionBuilder,
                                               decode_text)


def read_plain(data: bytes, content_type: str) -> Extracted:
    return Extracted(content_type, [Section(decode_text(data))])


_ATX = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)\s*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def read_markdown(data: bytes) -> Extracted:
    lines = decode_text(data).splitlines()
    out = SectionBuilder()
    fence = None
    i = 0
    while i < len(lines):
        line = lines[i]
        opened = _FENCE.match(line)
        if fence:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
                fence = None
            out.lines.append(line)
        elif opened:
            fence = opened.group(1)
            out.lines.append(line)
        elif (match := _ATX.match(line)) and match.group(2):
            out.heading(len(match.group(1)), match.group(2))
        elif (line.strip() and i + 1 < len(lines) and _SETEXT.match(lines[i + 1])
              and not line.startswith(("    ", "\t", "- ", "* ", "> ")) and not _SETEXT.match(line)
              and (not out.lines or not out.lines[-1].strip())):
            out.heading(1 if lines[i + 1].strip()[0] == "=" else 2, line.strip())
            i += 1  # the underline
        else:
            out.lines.append(line)
        i += 1
    return Extracted(MARKDOWN, out.finish())


_RST_ADORNMENT = re.compile(r"""^([!-/:-@\[-`{-~])\1{2,}\s*$""")


def read_rst(data: bytes) -> Extracted:
    """Section titles are a line underlined (and maybe overlined) with one punctuation
    character; the levels are the adornment styles in the order they first appear."""
    lines = decode_text(data).splitlines()
    out = SectionBuilder()
    styles: list[tuple[str, bool]] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        over = _RST_ADORNMENT.match(line)
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        title, skip, style = None, 0, None
        if (over and i + 2 < len(lines) and lines[i + 1].strip() and not _RST_ADORNMENT.match(lines[i + 1])
                and lines[i + 2].rstrip() == line.rstrip() and (i == 0 or not lines[i - 1].strip())):
            title, skip, style = lines[i + 1].strip(), 3, (line[0], True)
        elif (line.strip() and not line[0].isspace() and not over and (under := _RST_ADORNMENT.match(nxt))
              and len(nxt.rstrip()) >= min(len(line.rstrip()), 4) and (i == 0 or not lines[i - 1].strip())):
            title, skip, style = line.strip(), 2, (under.group(1), False)
        if title:
            if style not in styles:
                styles.append(style)
            out.heading(styles.index(style) + 1, title)
            i += skip
            continue
        out.lines.append(line)
        i += 1
    return Extracted(RST, out.finish())


_ADOC_HEADING = re.compile(r"^(={1,6}|#{1,6})\s+(\S.*?)\s*$")
_ADOC_DELIMITER = re.compile(r"^(-{4,}|\.{4,}|={4,}|\*{4,}|_{4,}|\+{4,}|/{4,}|`{3,})\s*$")


def read_asciidoc(data: bytes) -> Extracted:
    out = SectionBuilder()
    block = None
    for line in decode_text(data).splitlines():
        delimiter = _ADOC_DELIMITER.match(line)
        if block:
            if line.rstrip() == block:
                block = None
            out.lines.append(line)
        elif delimiter:
            block = line.rstrip()
            out.lines.append(line)
        elif match := _ADOC_HEADING.match(line):
            out.heading(len(match.group(1)), match.group(2))
        else:
            out.lines.append(line)
    return Extracted(ASCIIDOC, out.finish())
