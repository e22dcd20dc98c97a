"""HTML: the main content only, through trafilatura (navigation bars, tables of contents,
footers and cookie banners go; headings stay and become sections). A page trafilatura
finds nothing in (a tiny one) is read by a plain parser that drops scripts, styles and
the navigation elements."""
import re
from html.parser import HTMLParser
from typing import Optional

from chalicelib.ingestion.formats.base import Extracted, Format, Section, SectionBuilder, decode_text

HTML = "text/html"
# A document that says it is HTML, whatever its name: a doctype or <html> first (after a BOM,
# an XML declaration and comments).
_HTML_HEAD = re.compile(rb"\A(?:\xef\xbb\xbf)?\s*(?:<\?xml[^>]*>\s*)?(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html)\b",
                        re.I | re.S)

# Heading permalinks: Node.js's "#", Sphinx's "¶", others' "§" and link symbols.
_PERMALINK = re.compile(r"[\s#¶§🔗]+$")
_SPACES = re.compile(r"[ \t\r\f\v\u00a0]+")


def _inline(element) -> str:
    """An element's text, line breaks (<lb/>) kept, runs of spaces made one."""
    parts = [element.text or ""]
    for child in element:
        parts.append("\n" if child.tag == "lb" else _inline(child))
        parts.append(child.tail or "")
    return _tidy("".join(parts))


def _tidy(text: str) -> str:
    """Each line's runs of spaces made one, the lines trimmed."""
    return "\n".join(_SPACES.sub(" ", line).strip() for line in text.split("\n")).strip()


_BLOCKS = ("head", "p", "list", "table", "code", "quote")
# A block most of whose text is link text is navigation: a menu, a table of contents, a
# "Next: … Previous: … Up: …" bar (Texinfo's is 59% links), breadcrumbs.
NAVIGATION_LINK_SHARE = 0.5
# The navigation of the documentation generators whose pages the issue met (Texinfo's
# Next/Previous/Up bars and menus, DocBook's and Sphinx's bars, tables of contents): cut
# before extraction, where their links are still links. Whatever else trafilatura keeps
# that is mostly links goes by NAVIGATION_LINK_SHARE.
NAVIGATION_XPATH = [
    "//nav", "//*[@role='navigation']",
    "//div[contains(concat(' ', normalize-space(@class), ' '), ' nav-panel ')]",  # Texinfo 7
    "//div[@class='header' and (contains(., 'Next:') or contains(., 'Previous:') or contains(., 'Up:'))]",
    "//table[@class='menu']", "//div[contains(concat(' ', normalize-space(@class), ' '), ' menu ')]",  # SQLite
    "//ul[@class='mini-toc' or @class='section-toc' or @class='toc-numbered-mark']",
    "//div[@class='navheader' or @class='navfooter']",  # DocBook
    "//div[@class='related' or @class='sphinxsidebar']",  # Sphinx
    "//*[@id='toc' or @class='toc' or @class='contents' or @class='shortcontents' or @id='TOC']",
]


def _text_length(element) -> int:
    """Its text's characters, spaces aside."""
    return len("".join("".join(element.itertext()).split()))


def _link_share(element, links) -> float:
    """The share of the element's text that is in `links` (of its descendants)."""
    total = _text_length(element)
    return sum(_text_length(link) for link in links) / total if total else 0.0


def _is_navigation(element) -> bool:
    """On trafilatura's tree, where a link is a <ref>."""
    return _link_share(element, element.iter("ref")) >= NAVIGATION_LINK_SHARE


def _data_block(element) -> str:
    if element.tag == "code":
        return "".join(element.itertext()).strip("\n")
    if element.tag == "list":
        return "\n".join("- " + _inline(item) for item in element if item.tag == "item" and _inline(item))
    if element.tag in ("table", "row"):
        rows = []
        for row in ([element] if element.tag == "row" else element.iter("row")):
            cells = [_inline(cell).replace("\n", " ") for cell in row if cell.tag == "cell"]
            if any(cells):
                rows.append(" | ".join(cells))
        return "\n".join(rows)
    return _inline(element)


# Elements of trafilatura's output that sit inside a line: a link, emphasis, inline code.
_INLINE = ("ref", "hi", "lb", "del", "sub", "sup")


def _is_inline(element) -> bool:
    """Inline code is a <code> of one line inside a paragraph or a list item ("If `true`,
    no need to call `rl.commit()`"): read as blocks, Node.js's parameter lists came out one
    word a line and their type links (<string>, a link alone) went as navigation."""
    if element.tag == "code":
        return "\n" not in "".join(element.itertext()).strip("\n")
    return element.tag in _INLINE


def _holds_blocks(element) -> bool:
    return any(d.tag in _BLOCKS and not _is_inline(d) for d in element.iterdescendants())


# A list or table is judged navigation or not as a whole; then its items, rows and cells
# (and the blocks directly in them) are content, whatever their share of link text: a
# term that is only a link (a command index's "<dt><a>frob-sort(1)</a></dt>") stays beside
# its description. Deeper blocks (a div in a layout table's cell) are judged on their own.
_STRUCTURES = ("table", "list")
_PARTS = ("row", "cell", "item")


def _walk(element, out: SectionBuilder, in_content: bool = False) -> None:
    """Blocks in reading order; the text between them (an element's text, inline children,
    tails) joins into lines. Tables and lists that hold blocks are read block by block;
    in_content: the element is (in) a list or table found to be content."""
    run: list[str] = [element.text or ""]

    def flush() -> None:
        text = _tidy("".join(run))
        if text:
            out.lines += [text, ""]
        run.clear()

    for child in element:
        if _is_inline(child):
            run.append("\n" if child.tag == "lb" else _inline(child))
        else:
            flush()
            if child.tag == "head":
                title = _PERMALINK.sub("", " ".join(_inline(child).split()))
                rend = child.get("rend", "")
                if title:
                    out.heading(int(rend[1]) if re.fullmatch(r"h[1-6]", rend) else 2, title)
            elif child.tag in _STRUCTURES and _is_navigation(child):
                out.retract_heading()
            elif child.tag in ("table", "list", "div", "row", "cell", "item") and _holds_blocks(child):
                _walk(child, out, child.tag in _STRUCTURES or (in_content and child.tag in _PARTS))
            elif not in_content and _is_navigation(child):
                out.retract_heading()
            else:
                text = _data_block(child)
                if text:
                    out.lines += [text, ""]
        run.append(child.tail or "")
    flush()


def _prune_navigation(tree) -> None:
    for element in tree.xpath(" | ".join(NAVIGATION_XPATH)):
        if element.getparent() is not None:
            element.drop_tree()


# Elements that start a block of their own; the rest sit inside a line.
_BLOCK_TAGS = frozenset({
    "address", "article", "aside", "blockquote", "center", "details", "dialog", "dd", "div", "dl", "dt",
    "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr",
    "li", "main", "menu", "nav", "ol", "p", "pre", "section", "table", "tbody", "td", "tfoot", "th", "thead",
    "tr", "ul", "caption", "summary", "noscript", "script", "style", "template"})


def _wrap_loose_text(tree) -> None:
    """Text standing between blocks with no paragraph of its own (man2html writes whole
    manuals so: "<B>frob</B>\nreads the options") goes into a <p>. trafilatura makes such
    text a paragraph itself and trims each piece's whitespace, gluing "frobreads"."""
    from lxml import etree

    # Not in list items, terms or cells: trafilatura reads a list item made of a paragraph and
    # a nested list as the paragraph alone (SQLite's index of documents lost its descriptions).
    for parent in [e for e in tree.iter("body", "main", "article", "section", "div", "blockquote", "center")]:
        if not any(isinstance(c.tag, str) and c.tag in _BLOCK_TAGS for c in parent):
            continue
        current = None
        if parent.text and parent.text.strip():
            current = etree.Element("p")
            current.text, parent.text = parent.text, None
            parent.insert(0, current)
        for child in list(parent):
            if child is current:
                continue
            if isinstance(child.tag, str) and child.tag in _BLOCK_TAGS:
                current = None
                if child.tail and child.tail.strip():
                    current = etree.Element("p")
                    current.text, child.tail = child.tail, None
                    child.addnext(current)
            elif current is not None or (child.tail and child.tail.strip()) or "".join(child.itertext()).strip():
                if current is None:
                    current = etree.Element("p")
                    child.addprevious(current)
                current.append(child)  # its tail comes with it


_CONTENT_TEXT = ("//body//text()[not(ancestor::h1 or ancestor::h2 or ancestor::h3 or ancestor::h4 or ancestor::h5"
                 " or ancestor::h6 or ancestor::script or ancestor::style or ancestor::noscript or ancestor::template)]")


def _main_content(tree) -> Optional[list[Section]]:
    """The sections of the page's main content; None when trafilatura finds none or
    loses the headings. The tree is trafilatura's parse of the page, navigation pruned."""
    import trafilatura
    from lxml import etree

    # trafilatura finds a page's content in <main>, <article> or a div of a known class;
    # on a page with none (Texinfo, Sphinx, man2html output) it falls back to recovering
    # paragraphs and drops the headings. The body as <main> keeps them, and the pruning
    # (link density, navigation classes) still runs inside it.
    body = tree.find("body")
    if body is not None and not tree.xpath("//main|//article|//*[@role='main']"):
        main = etree.SubElement(body, "main")
        for child in list(body)[:-1]:
            main.append(child)
        main.text, body.text = body.text, None
    _wrap_loose_text(tree)
    # Only what the product needs: no metadata (its date search costs seconds on large
    # pages), no comments or images (links only to measure link density); fast skips the
    # comparison with the two fallback extractors, which drop headings. The tree is given,
    # so nothing is fetched.
    # bare_extraction: the XML output's clean-up is quadratic (half the time on a large page
    # such as Node.js's 8 MB all.html) and its tree is the one read here anyway
    # (bench/html_extraction.py measures a page's time).
    document = trafilatura.bare_extraction(
        tree, include_formatting=True, include_tables=True, include_comments=False, include_links=True,
        include_images=False, with_metadata=False, fast=True, deduplicate=False)
    main = getattr(document, "body", None)
    if main is None:
        return None
    # When trafilatura cannot place the content, it recovers the paragraphs without their
    # headings (DocBook's single-page manuals): the plain parser then keeps more.
    headings = len(tree.xpath("//body//*[self::h1 or self::h2 or self::h3 or self::h4 or self::h5 or self::h6]"))
    if headings >= 3 and len(main.xpath(".//head")) * 2 < headings:
        return None
    out = SectionBuilder()
    _walk(main, out)
    sections = out.finish()
    for section in sections:
        section.text = section.text.strip()
    return sections if any(s.text for s in sections) else None


class _HtmlText(HTMLParser):
    SKIP = {"script", "style", "nav", "noscript", "template", "header", "footer", "aside"}
    BLOCK = {"p", "div", "li", "br", "tr", "section", "article", "pre", "blockquote", "table"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out = SectionBuilder()
        self.parts: list[str] = []
        self.skip_depth = 0
        self.heading_level: Optional[int] = None
        self.heading_text: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag in self.SKIP:
            self.skip_depth += 1
        elif re.fullmatch(r"h[1-6]", tag) and not self.skip_depth:
            self.heading_level, self.heading_text = int(tag[1]), []
        elif tag in self.BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag):
        if tag in self.SKIP:
            self.skip_depth = max(0, self.skip_depth - 1)
        elif self.heading_level and tag == f"h{self.heading_level}":
            title = _PERMALINK.sub("", " ".join("".join(self.heading_text).split()))
            self.out.lines = ["".join(self.parts)]
            self.out.heading(self.heading_level, title)
            self.parts, self.heading_level = [title + "\n"], None
        elif tag in self.BLOCK:
            self.parts.append("\n")

    def handle_data(self, data):
        if self.skip_depth:
            return
        (self.heading_text if self.heading_level else self.parts).append(data)

    def finish(self) -> list[Section]:
        self.out.lines = ["".join(self.parts)]
        sections = self.out.finish()
        for s in sections:
            s.text = re.sub(r"\n\s*\n+", "\n\n", re.sub(r"[ \t]+", " ", s.text)).strip()
        return sections


# A CGI response's header kept before the page (Debian's man2html pages start with
# "Content-type: text/html"): lxml then reads the page as a fragment, without its <body>,
# and trafilatura found a third of bash's manual in it.
_CGI_HEADER = re.compile(rb"\A\s*(?:[A-Za-z][A-Za-z0-9-]*:[^\n]*\r?\n)+\r?\n(?=\s*<)")


NAVIGATION_ONLY = "the page holds only navigation and headings: nothing to index"
INDEX_ONLY = "the page is an index of links to other pages: nothing to index"
# A page whose text is almost all entries led by a link (list items, definition terms with
# their descriptions, table rows) is an index: a sitemap, a keyword or function index, a
# cross-reference, a list of the manual's pages. Its entries only repeat the titles of the
# pages they lead to, and in a search they took the place of those pages (bench/manuals.py:
# SQLite's docs.html, doc_target_crossref.html in a top 5). On Debian's sqlite3-doc the 12
# pages above the share hold 0.92 or more of their text in such entries, and all are indexes;
# the next hold 0.85 (a keyword cross-reference) and 0.81 (the virtual tables, a paragraph
# each). Of python3.11-doc's 530 pages, the 32 above it are its general and module indexes
# and tables of contents.
INDEX_ENTRY_SHARE = 0.9
INDEX_TERM_LINK_SHARE = 2 / 3


# What a table row of data does not hold: a row holding these lays out a page.
_LAYOUT = ("table", "div", "p", "ul", "ol", "dl", "pre")


def _links(element):
    """Its links, on the page's own tree."""
    return (a for a in element.iter("a") if a.get("href"))


def _led_by_link(entry) -> bool:
    """An item or row whose first text is a link's or that is mostly link text; a term that is
    mostly a link (not a signature whose types are links, as Sphinx renders an API)."""
    if entry.tag == "dt":
        return _link_share(entry, _links(entry)) >= INDEX_TERM_LINK_SHARE

    def first(node):
        if node is not entry and node.tag == "a" and node.get("href"):
            return "link"
        if (node.text or "").strip():
            return "text"
        for child in node:
            if isinstance(child.tag, str) and (found := first(child)):
                return found
            if (child.tail or "").strip():
                return "text"
        return None

    return first(entry) == "link" or _link_share(entry, _links(entry)) >= NAVIGATION_LINK_SHARE


def _is_index_page(tree, content_length: int) -> bool:
    """At least INDEX_ENTRY_SHARE of the body's text (headings aside; content_length characters
    without spaces) is in entries led by a link."""
    if not content_length:
        return False
    led, counted = 0, set()
    for entry in tree.iter("li", "dt", "tr"):
        if any(a in counted for a in entry.iterancestors()):
            continue
        if entry.tag == "tr" and next(entry.iter(*_LAYOUT), None) is not None:
            continue  # a layout table's row (a menu beside the page's text): its entries count on their own
        counted.add(entry)
        if _led_by_link(entry):
            led += _text_length(entry)
            description = entry.getnext()
            if entry.tag == "dt" and description is not None and description.tag == "dd":
                counted.add(description)
                led += _text_length(description)
    return led >= INDEX_ENTRY_SHARE * content_length


def read_html(data: bytes) -> Extracted:
    import lxml.html
    from trafilatura.utils import load_html

    tree = load_html(_CGI_HEADER.sub(b"", data, count=1))
    title = None
    if tree is None:  # not parseable as HTML at all
        sections = None
        markup = decode_text(data)
    else:
        title = " ".join("".join(tree.xpath("//head/title//text()")).split())[:200] or None
        _prune_navigation(tree)
        content_length = len("".join("".join(tree.xpath(_CONTENT_TEXT)).split()))
        if tree.find("body") is not None and not content_length:
            # A chapter page of Texinfo output is its title and a menu: nothing to search,
            # and nothing wrong with it either.
            return Extracted(HTML, [], note=NAVIGATION_ONLY)
        if _is_index_page(tree, content_length):
            return Extracted(HTML, [], note=INDEX_ONLY)
        markup = lxml.html.tostring(tree, encoding="unicode")
        sections = _main_content(tree)
    if sections is None:
        parser = _HtmlText()
        parser.feed(markup)
        parser.close()
        sections = parser.finish()
    return Extracted(HTML, sections, title=title)


FORMATS = (Format("HTML", (HTML,), lambda data, _type, _limits: read_html(data), library="trafilatura",
                  notes="main content only (navigation, tables of contents, footers and cookie banners"
                        " gone), headings as sections; a page trafilatura empties falls back to a plain"
                        " HTML parser",
                  extensions={".html": HTML, ".htm": HTML, ".xhtml": HTML},
                  looks_like=lambda data: bool(_HTML_HEAD.match(data[:1024]))),)
