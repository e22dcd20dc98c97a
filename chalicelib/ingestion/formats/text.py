"""Text: plain, Markdown, reStructuredText and AsciiDoc (headings become sections with
their heading trail), and source code and configuration files (one section: the chunker
cuts them on definitions and blank lines)."""
import re

from chalicelib.ingestion.formats.base import Extracted, Format, Section, SectionBuilder, decode_text

TEXT = "text/plain"
MARKDOWN = "text/markdown"
RST = "text/x-rst"
ASCIIDOC = "text/asciidoc"
YAML = "application/yaml"
TOML = "application/toml"
XML = "application/xml"
CONFIG = "text/x-config"  # .conf, .ini, .cfg, .properties, .env
# Source code, by language; chunked on definitions and blank lines like the configuration
# formats.
CODE_TYPES = {
    ".py": "text/x-python", ".pyi": "text/x-python", ".js": "text/javascript", ".mjs": "text/javascript",
    ".cjs": "text/javascript", ".jsx": "text/javascript", ".ts": "text/x-typescript",
    ".tsx": "text/x-typescript", ".go": "text/x-go", ".rs": "text/x-rust", ".java": "text/x-java",
    ".kt": "text/x-kotlin", ".kts": "text/x-kotlin", ".scala": "text/x-scala", ".c": "text/x-c",
    ".h": "text/x-c", ".cc": "text/x-c++", ".cpp": "text/x-c++", ".cxx": "text/x-c++", ".hpp": "text/x-c++",
    ".hh": "text/x-c++", ".cs": "text/x-csharp", ".rb": "text/x-ruby", ".php": "text/x-php",
    ".pl": "text/x-perl", ".pm": "text/x-perl", ".sh": "text/x-shellscript", ".bash": "text/x-shellscript",
    ".zsh": "text/x-shellscript", ".swift": "text/x-swift", ".lua": "text/x-lua", ".r": "text/x-r",
    ".sql": "text/x-sql", ".m": "text/x-objc", ".ex": "text/x-elixir", ".exs": "text/x-elixir",
    ".erl": "text/x-erlang", ".hs": "text/x-haskell", ".ml": "text/x-ocaml", ".clj": "text/x-clojure",
    ".dart": "text/x-dart", ".vue": "text/x-vue", ".css": "text/css", ".scss": "text/x-scss",
    ".mk": "text/x-makefile", ".cmake": "text/x-cmake", ".tf": "text/x-terraform", ".ps1": "text/x-powershell",
}
# Files named without an extension that are code all the same.
CODE_NAMES = {"makefile": "text/x-makefile", "gnumakefile": "text/x-makefile", "dockerfile": "text/x-dockerfile",
              "cmakelists.txt": "text/x-cmake", "rakefile": "text/x-ruby", "gemfile": "text/x-ruby",
              "jenkinsfile": "text/x-groovy", "vagrantfile": "text/x-ruby"}
SCRIPT_TYPES = {"python": "text/x-python", "sh": "text/x-shellscript", "bash": "text/x-shellscript",
                "dash": "text/x-shellscript", "zsh": "text/x-shellscript", "perl": "text/x-perl",
                "ruby": "text/x-ruby", "node": "text/javascript"}


def read_plain(data: bytes, content_type: str) -> Extracted:
    return Extracted(content_type, [Section(decode_text(data))])


_ATX = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)\s*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def _uncommented(line: str, inside: bool) -> tuple[str, bool]:
    """The line less its HTML comments (`<!-- … -->`, which a reader of the rendered page never
    sees), and whether a comment is still open at its end."""
    kept = []
    while line:
        if inside:
            end = line.find("-->")
            if end < 0:
                break
            line, inside = line[end + 3:], False
        else:
            start = line.find("<!--")
            if start < 0:
                kept.append(line)
                break
            kept.append(line[:start])
            line, inside = line[start + 4:], True
    return "".join(kept), inside


def read_markdown(data: bytes) -> Extracted:
    lines = decode_text(data).splitlines()
    out = SectionBuilder()
    fence = None
    commented = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if not fence and (commented or "<!--" in line):
            line, commented = _uncommented(line, commented)
            if not line.strip():  # a comment's own line, not a paragraph break
                i += 1
                continue
            lines[i] = line
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


def _plain(data: bytes, content_type: str, _limits) -> Extracted:
    return read_plain(data, content_type)


FORMATS = (
    Format("Markdown", (MARKDOWN,), lambda data, _type, _limits: read_markdown(data),
           notes="headings as sections; HTML comments left out",
           extensions=dict.fromkeys((".md", ".markdown", ".mdown", ".mkd"), MARKDOWN)),
    Format("reStructuredText", (RST,), lambda data, _type, _limits: read_rst(data), notes="headings as sections",
           extensions=dict.fromkeys((".rst", ".rest"), RST)),
    Format("AsciiDoc", (ASCIIDOC,), lambda data, _type, _limits: read_asciidoc(data), notes="headings as sections",
           extensions=dict.fromkeys((".adoc", ".asciidoc"), ASCIIDOC)),
    Format("YAML, TOML, XML, configuration", (YAML, TOML, XML, CONFIG), _plain,
           notes="one section, cut at definitions and blank lines",
           extensions={".yaml": YAML, ".yml": YAML, ".toml": TOML,
                       **dict.fromkeys((".xml", ".xsd", ".xsl", ".xslt"), XML),
                       **dict.fromkeys((".conf", ".ini", ".cfg", ".properties", ".env"), CONFIG)},
           chunking="lines"),
    Format("Source code", tuple(dict.fromkeys([*CODE_TYPES.values(), *CODE_NAMES.values(), *SCRIPT_TYPES.values()])),
           _plain, notes="one section, cut before top-level definitions, then at blank lines",
           extensions=CODE_TYPES, file_names=CODE_NAMES, interpreters=SCRIPT_TYPES, chunking="lines"),
    # Last: any text no other format names (UTF-8, UTF-16 with a byte order mark, else Latin-1).
    Format("Plain text", (TEXT,), _plain, notes="README, LICENSE and any other text; sentences and paragraphs",
           extensions={".txt": TEXT}),
)
