"""Documentation sites read whole: a manual converted by man2html, a command index whose
terms are links, lines repeated across the pages of one site. The pages are written here,
shaped like the generators' output (not copied from any manual)."""
import pytest

from chalicelib.ingestion.chunk import SECTION_SEPARATOR, chunk_document
from chalicelib.ingestion.extract import HTML, TEXT, Extracted, Section, extract


def _text(extracted: Extracted) -> str:
    return SECTION_SEPARATOR.join(s.text for s in extracted.sections)


# man2html's output as Debian ships it: the CGI header before the page, text loose in the
# body between headings, options in <DL COMPACT> with <DT>/<DD> never closed, an index of
# the sections at the end.
MAN2HTML = b"""Content-type: text/html; charset=UTF-8

<!DOCTYPE HTML PUBLIC "-//W3C//DTD HTML 4.01 Transitional//EN">
<HTML><HEAD><TITLE>Man page of FROB</TITLE>
</HEAD><BODY>
<H1>FROB</H1>
Section: User Commands  (1)<BR>Updated: 2024 March 3<BR><A HREF="#index">Index</A>
<A HREF="/cgi-bin/man/man2html">Return to Main Contents</A><HR>
<A NAME="lbAB">&nbsp;</A>
<H2>NAME</H2>
frob - rearrange the widgets of a gadget
<A NAME="lbAC">&nbsp;</A>
<H2>OPTIONS</H2>
<B>frob</B>
reads the following options when it starts:
<P>
<DL COMPACT>
<DT><B>-k</B>

<DD>
Keep the original widget order when the gadget is
<I>sealed</I>;
without it the widgets are sorted by weight.
<DT><B>-w</B> <I>width</I>

<DD>
Wrap the report at
<I>width</I>
columns instead of eighty.
</DL>
<A NAME="lbAD">&nbsp;</A>
<H2>ENVIRONMENT</H2>
<DL COMPACT>
<DT><B>FROB_HOME</B>

<DD>
The directory holding the widget catalogue; the default is a folder named frob in the home directory.
</DL>
<A NAME="lbAE">&nbsp;</A>
<H2>FILES</H2>
<B>frob</B>
keeps its lock in
<I>~/.frob/lock</I>
while it runs.
<A NAME="index">&nbsp;</A><H2>Index</H2>
<DL>
<DT><A HREF="#lbAB">NAME</A><DD>
<DT><A HREF="#lbAC">OPTIONS</A><DD>
<DT><A HREF="#lbAD">ENVIRONMENT</A><DD>
<DT><A HREF="#lbAE">FILES</A><DD>
</DL>
</BODY>
</HTML>
"""


def test_a_man2html_page_is_read_whole_with_its_headings():
    """The CGI header made lxml read the page as a fragment without its <body>, and
    trafilatura then kept a third of bash's manual, without headings."""
    extracted = extract(MAN2HTML, "frob.1.html")
    text = _text(extracted)
    assert "Content-type" not in text
    for option in ("-k", "Keep the original widget order", "-w width", "columns instead of eighty",
                   "FROB_HOME", "The directory holding the widget catalogue"):
        assert option in text, option
    assert ["FROB", "OPTIONS"] in [s.headers for s in extracted.sections]
    assert ["FROB", "ENVIRONMENT"] in [s.headers for s in extracted.sections]
    # the Index at the end is navigation
    assert not any(s.headers[-1:] == ["Index"] for s in extracted.sections)


@pytest.mark.parametrize("page", [MAN2HTML, MAN2HTML.split(b"\n\n", 1)[1]], ids=["cgi-header", "page-alone"])
def test_loose_text_keeps_the_space_between_a_bold_word_and_the_next(page):
    """trafilatura makes text that stands outside any paragraph a paragraph of its own and
    trims every piece of it: "<B>frob</B>\\nreads" became "frobreads"."""
    text = " ".join(_text(extract(page, "frob.1.html")).split())
    assert "frob reads the following options" in text
    assert "keeps its lock in ~/.frob/lock while it runs" in text
    assert "frobreads" not in text and "frobkeeps" not in text


# A suite's command index as AsciiDoc renders it: each term a link to the command's page,
# each description beside it.
COMMAND_INDEX = b"""<!DOCTYPE html><html><head><title>frob(1)</title></head><body>
<div id="header"><h1>frob(1) Manual Page</h1></div>
<div id="content">
<div class="sect1"><h2 id="_name">NAME</h2><div class="sectionbody"><p>frob - the widget rearranger</p></div></div>
<div class="sect1"><h2 id="_frob_commands">FROB COMMANDS</h2><div class="sectionbody">
<div class="paragraph"><p>The commands below change the widget catalogue of a gadget.</p></div>
<div class="dlist"><dl>
<dt class="hdlist1"><a href="frob-sort.html">frob-sort(1)</a></dt>
<dd><p>Order the widgets of a gadget by weight</p></dd>
<dt class="hdlist1"><a href="frob-seal.html">frob-seal(1)</a></dt>
<dd><p>Seal a gadget so that its widgets stay put</p></dd>
<dt class="hdlist1"><a href="frob-wrap.html">frob-wrap(1)</a></dt>
<dd><p>Wrap the widget report at a given width</p></dd>
<dt class="hdlist1"><a href="frob-prune.html">frob-prune(1)</a></dt>
<dd><p>Remove widgets no gadget refers to</p></dd>
</dl></div>
<table class="tableblock"><thead><tr><th>Hook</th><th>When it runs</th></tr></thead><tbody>
<tr><td><p><a href="frobhooks.html#pre-sort">pre-sort</a></p></td><td><p>before the widgets are ordered</p></td></tr>
<tr><td><p><a href="frobhooks.html#post-seal">post-seal</a></p></td><td><p>once a gadget is sealed</p></td></tr>
</tbody></table>
</div></div>
<div class="sect1"><h2 id="_see_also">SEE ALSO</h2><div class="sectionbody">
<ul class="toc"><li><a href="frob-sort.html">frob-sort</a></li><li><a href="frob-seal.html">frob-seal</a></li></ul>
<div class="ulist"><ul><li><p><a href="index.html">Home</a></p></li><li><p><a href="frob.html">Up</a></p></li>
<li><p><a href="frobhooks.html">Next</a></p></li></ul></div>
</div></div>
</div></body></html>"""


def test_a_term_that_is_only_a_link_stays_beside_its_description():
    """A definition list or table judged as a whole is content: its terms stay even when
    each is only a link. Real navigation (a list of links alone) still goes."""
    text = _text(extract(COMMAND_INDEX, "frob.html"))
    for command, description in (("frob-sort(1)", "Order the widgets of a gadget by weight"),
                                 ("frob-prune(1)", "Remove widgets no gadget refers to"),
                                 ("pre-sort", "before the widgets are ordered")):
        assert command in text and description in text
        assert text.index(command) < text.index(description)
    assert "Home" not in text and "Next" not in text


DESCRIPTION = ("Order the widgets of the gadget by weight, heaviest first, unless --by names another key. "
               "With --reverse the lightest come first. The order is kept until the gadget is sealed; "
               "frob-seal refuses a gadget whose widgets are not ordered.")


# A manual's list of its pages, as a keyword index or a sitemap is: every entry a link with a
# few words after it.
PAGE_LIST = b"""<!DOCTYPE html><html><head><title>Frob documentation</title></head><body>
<h1>Documentation</h1><p>The frob manual.</p>
<ul>
<li><a href="frob-sort.html">Sorting widgets</a> &rarr; order the widgets of a gadget by weight</li>
<li><a href="frob-seal.html">Sealing a gadget</a> &rarr; keep its widgets in place</li>
<li><a href="frob-wrap.html">Wrapping reports</a> &rarr; the widget report at a given width</li>
<li><a href="frob-prune.html">Pruning</a> &rarr; remove widgets no gadget refers to</li>
</ul>
<dl><dt><a href="frobhooks.html">Hooks</a></dt><dd>commands run before and after each step</dd></dl>
</body></html>"""

# An API reference as Sphinx renders one: each signature's types are links, each with its
# description after it.
API_PAGE = b"""<!DOCTYPE html><html><head><title>Widget protocol</title></head><body>
<h1>Widget protocol</h1>
<dl class="c function"><dt class="sig"><a href="gadget.html#Widget">Widget</a> *Frob_Sort(<a href="gadget.html#Gadget">Gadget</a> *g)</dt>
<dd><p>Order the widgets of <em>g</em> by weight, the heaviest first.</p></dd></dl>
<dl class="c function"><dt class="sig"><a href="gadget.html#Widget">Widget</a> *Frob_Seal(<a href="gadget.html#Gadget">Gadget</a> *g)</dt>
<dd><p>Seal <em>g</em> so that its widgets stay put.</p></dd></dl>
</body></html>"""

# An older site's layout: one table row holding the menu beside the page's text.
LAYOUT_PAGE = b"""<!DOCTYPE html><html><head><title>Frob: introduction</title></head><body>
<table><tr><td><ul><li><a href="index.html">Home</a></li><li><a href="intro.html">Introduction</a></li>
<li><a href="docs.html">Documentation</a></li></ul></td>
<td><h1>Introduction</h1><p>Order the widgets of a gadget with frob, then seal it.</p></td></tr></table>
</body></html>"""


def test_an_index_of_pages_has_nothing_to_index_and_says_so():
    """Its entries repeat the titles of the pages they lead to: indexed, they answered in
    those pages' places."""
    extracted = extract(PAGE_LIST, "docs.html")
    assert extracted.sections == [] and "index of links" in extracted.note


@pytest.mark.parametrize("page", [COMMAND_INDEX, API_PAGE, LAYOUT_PAGE],
                         ids=["command-index-in-a-manual-page", "api-signatures", "menu-beside-the-text"])
def test_a_page_with_linked_terms_and_text_of_its_own_is_content(page):
    extracted = extract(page, "frob.html")
    assert extracted.note is None and "Order the widgets" in _text(extracted)


def test_a_short_synopsis_is_chunked_with_the_description_after_it():
    """Below the floor (40 tokens), a synopsis joined the section after it already."""
    extracted = Extracted(TEXT, [
        Section("frob-sort - order the widgets of a gadget", headers=["NAME"]),
        Section("SYNOPSIS\nfrob-sort [--reverse] [--by=weight|name] <gadget>", headers=["SYNOPSIS"]),
        Section("DESCRIPTION\n" + DESCRIPTION, headers=["DESCRIPTION"])])
    chunks = chunk_document(extracted, 200, 0, {})
    assert len(chunks) == 1 and "Order the widgets" in chunks[0].content
    assert chunks[0].content.startswith("frob-sort - order")


SYNOPSIS = ("frob-sort [--reverse | -r] [--by=<key>] [--stable] [--dry-run | -n] [--verbose | -v]\n"
            "          [--catalogue=<path>] [--ignore-missing] [--] [<gadget>...]")
SIGNATURE = "int frob_sort(frob_gadget *pGadget, int (*xCompare)(const frob_widget*, const frob_widget*), int flags);"


@pytest.mark.parametrize("lead", [SYNOPSIS, SIGNATURE])
def test_a_long_synopsis_or_signature_is_no_chunk_of_its_own(lead):
    """Over the floor, a NAME and SYNOPSIS (or a signature) made a run, so a chunk, alone;
    the description was the next chunk."""
    extracted = Extracted(HTML, [
        Section("NAME\nfrob-sort - order the widgets of a gadget", headers=["NAME"]),
        Section("SYNOPSIS\n" + lead, headers=["SYNOPSIS"]),
        Section("DESCRIPTION\n" + DESCRIPTION, headers=["DESCRIPTION"]),
        Section("OPTIONS\n" + "--stable keeps widgets of equal weight in their order. " * 6, headers=["OPTIONS"])])
    chunks = chunk_document(extracted, 200, 0, {})
    holding = next(c for c in chunks if "frob_sort(" in c.content or "frob-sort [" in c.content)
    assert "Order the widgets of the gadget by weight" in holding.content
    assert all(c.token_count >= 40 for c in chunks)


def test_a_section_of_sentences_still_ends_its_run():
    extracted = Extracted(HTML, [
        Section("NAME\nfrob-sort orders the widgets of a gadget by weight, the heaviest first, and keeps that order "
                "until the gadget is sealed by frob-seal or opened again by frob-open.", headers=["NAME"]),
        Section("DESCRIPTION\n" + DESCRIPTION, headers=["DESCRIPTION"])])
    assert [c.headers for c in chunk_document(extracted, 200, 0, {})] == [["NAME"], ["DESCRIPTION"]]
