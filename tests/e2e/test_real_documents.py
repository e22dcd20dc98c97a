"""Real documents through the deployed stack: sixteen pages of Node.js's HTML API
documentation (tests/data/nodejs_api), uploaded with their paths, asked questions a
developer would ask. The page that answers must be among the top 3 passages and no
navigation chunk among the top 5, for the default strategy and for semantic search."""
import json
import re
import time
from pathlib import Path

import lxml.html
import pytest

BUCKET = "kb-documents-local"
DATA = Path(__file__).resolve().parent.parent / "data" / "nodejs_api"
PAGES = sorted(p.relative_to(DATA).as_posix() for p in (DATA / "api").glob("*.html"))
QUESTIONS = json.loads((DATA / "questions.json").read_text())["questions"]
TOP_PAGE, TOP_NAVIGATION = 3, 5
# Share of questions whose page must be in the top 3 (the test prints each miss with -s):
# at most one of the 37 may miss. Measured: 37/37 with both strategies on trafilatura's
# text; 36/37 (default) and 37/37 (semantic) on the hand-written extractor it replaced,
# whose one miss was a near tie (the querystring-or-URLSearchParams question, url.html).
PAGE_HIT_BAR = 0.95
# A passage is a navigation chunk when at least this share of its characters is
# navigation: runs of at least NAVIGATION_RUN of the page's chrome labels in a row (see
# navigation_share). One label alone is not: every heading is also a table-of-contents
# entry, and an API entry's chunk holds its own heading or two.
NAVIGATION_SHARE = 0.5
NAVIGATION_RUN = 3

# Page chrome in these pages (and in most generated documentation): <nav>, any element
# with role="navigation" (Node.js's sidebar of every module, div#column2, and the page's
# table of contents, details#toc), the <header> (version pickers, "Edit on GitHub") and
# the skip link; plus the <title>, which is not body text either.
CHROME = ('//nav | //*[@role="navigation"] | //header | //a[contains(@class, "skip-to-content")]')
_MARKERS = re.compile(r"^(?:[-*\u2022]\s+|#+\s+)|#$")


def _normal(text: str) -> str:
    return " ".join(text.split())


def navigation_strings(html: bytes) -> set[str]:
    """The labels of a page's chrome: every link, summary and heading text inside it,
    each list item's own text, and the title, whitespace collapsed. Case counts: folded,
    a parameter line "buffer" or "options" matched the sidebar's "Buffer" and the
    header's "Options"."""
    root = lxml.html.fromstring(html)
    labels = [t.text_content() for t in root.xpath("//title")]
    for element in root.xpath(CHROME):
        labels.append(element.text_content() if element.tag == "a" else "")
        for node in element.iter("a", "summary", "h1", "h2", "h3", "h4", "h5", "h6", "li", "button"):
            labels.append(node.text or "" if node.tag == "li" else node.text_content())
    return {s for s in map(_normal, labels) if s}


def _labels_in_line(line: str, labels: set[str], longest: int) -> int:
    """How many labels the line is (fewest), less list or heading markers and a trailing
    anchor '#': one, several run together (an extractor that joins list items on one
    line), or 0 when it is not made of labels."""
    words = _normal(_MARKERS.sub("", line.strip())).split()
    fewest = [0] + [None] * len(words)  # fewest[i]: labels that make words[:i]
    for end in range(1, len(words) + 1):
        splits = [fewest[start] + 1 for start in range(max(0, end - longest), end)
                  if fewest[start] is not None and " ".join(words[start:end]) in labels]
        fewest[end] = min(splits) if splits else None
    return fewest[-1] or 0


def _lines(content: str) -> list[str]:
    return [line.strip() for line in content.splitlines() if line.strip()]


def navigation_share(content: str, labels: set[str]) -> float:
    """The share of a passage's characters (outside blank space) on lines that belong to
    a run of NAVIGATION_RUN or more chrome labels: consecutive lines each made of labels
    (a sidebar, a table of contents), or one line of several run together."""
    longest = max(len(s.split()) for s in labels)
    lines = _lines(content)
    counts = [_labels_in_line(line, labels, longest) for line in lines]
    nav, start = 0, 0
    while start < len(lines):
        end = start
        while end < len(lines) and counts[end]:
            end += 1
        if sum(counts[start:end]) >= NAVIGATION_RUN:
            nav += sum(len(line) for line in lines[start:end])
        start = end + 1
    total = sum(len(line) for line in lines)
    return nav / total if total else 1.0


def is_navigation_chunk(content: str, labels: set[str]) -> bool:
    """A navigation chunk: at least half its text is the page's chrome (the sidebar's
    module list, the table of contents, the header's pickers, the title) in runs."""
    return navigation_share(content, labels) >= NAVIGATION_SHARE


def is_heading_alone(content: str, labels: set[str]) -> bool:
    """A passage that is one heading (its table-of-contents entry) and nothing else."""
    lines = _lines(content)
    return len(lines) == 1 and _labels_in_line(lines[0], labels, max(len(s.split()) for s in labels)) == 1


LABELS = {page: navigation_strings((DATA / page).read_bytes()) for page in PAGES}


def test_the_navigation_rule_flags_the_sidebar_and_not_the_prose():
    """The rule could fail: a page's sidebar as a plain-text extractor gives it is
    navigation, a paragraph of the page is not, nor is a paragraph that names modules or
    an API entry whose headings are table-of-contents entries."""
    html = (DATA / "api" / "path.html").read_bytes()
    root = lxml.html.fromstring(html)
    sidebar = "\n".join(a.text_content() for a in root.xpath('//div[@id="column2"]//a'))
    toc = " ".join(a.text_content() for a in root.xpath('//details[@id="toc"]//a'))  # run together
    prose = next(t for t in (p.text_content() for p in root.xpath('//div[@id="apicontent"]//p')) if len(t) > 80)
    labels = LABELS["api/path.html"]
    assert is_navigation_chunk(sidebar, labels) and is_navigation_chunk(toc, labels)
    assert not is_navigation_chunk(prose, labels)
    assert not is_navigation_chunk("Path\nThe node:path module provides utilities for working with"
                                   " file and directory paths, like URL and OS do for theirs.", labels)
    # An API entry as trafilatura gives it (zlib.html's chunk 37, the types gone): its two
    # headings are table-of-contents entries, half its characters.
    entry = "\n".join(["zlib.brotliCompress(buffer[, options], callback)", "buffer", *"||||", "options",
                       "callback", "zlib.brotliCompressSync(buffer[, options])", "buffer", *"||||", "options",
                       "Compress a chunk of data with BrotliCompress."])
    assert not is_navigation_chunk(entry, LABELS["api/zlib.html"])
    assert is_heading_alone("path.basename(path[, suffix])#", labels)
    assert not is_heading_alone("path.sep\nProvides the platform-specific path segment separator.", labels)


def _documents(api, kb_id: str) -> list[dict]:
    items, token = [], None
    while True:
        answer = api.call("GET", f"/knowledge-bases/{kb_id}/documents",
                          params={"nextToken": token} if token else None)
        assert answer.status_code == 200, answer.text
        data = answer.json()["data"]
        items += data["items"]
        token = data.get("nextToken")
        if not token:
            return items


@pytest.fixture(scope="module")
def nodejs_kb(api, s3):
    """A knowledge base with the default chunking, the pages dropped into S3 under their
    paths (kb/{kbId}/api/fs.html), every one PROCESSED; with its documents."""
    answer = api.call("POST", "/knowledge-bases", {"name": "Node.js API", "description": "Node.js v20 API pages"})
    assert answer.status_code == 201, answer.text
    kb = answer.json()["data"]
    for page in PAGES:
        s3.put_object(Bucket=BUCKET, Key=f"kb/{kb['id']}/{page}", Body=(DATA / page).read_bytes(),
                      ContentType="text/html")
    deadline = time.monotonic() + 1800  # 469 chunks (642 with the extractor before trafilatura)
    while True:
        docs = _documents(api, kb["id"])
        done = [d for d in docs if d["status"] in ("PROCESSED", "FAILED")]
        if len(done) == len(PAGES):
            break
        assert time.monotonic() < deadline, f"{len(done)} of {len(PAGES)} pages ingested: {[d['status'] for d in docs]}"
        time.sleep(0.5)
    failed = {d["path"]: d["error"] for d in docs if d["status"] != "PROCESSED"}
    assert not failed, failed
    yield kb, docs
    api.call("DELETE", f"/knowledge-bases/{kb['id']}")


def test_every_page_is_a_document_named_by_its_path(nodejs_kb):
    _, docs = nodejs_kb
    assert sorted(d["path"] for d in docs) == PAGES
    assert all(d["filename"] == d["path"].rsplit("/", 1)[-1] for d in docs)


def _search(api, kb_id: str, question: str, strategy: str | None) -> list[dict]:
    body = {"query": question, "topK": TOP_NAVIGATION, **({"strategy": strategy} if strategy else {})}
    answer = api.call("POST", f"/knowledge-bases/{kb_id}/search", body)
    assert answer.status_code == 200, answer.text
    return answer.json()["data"]["results"]


@pytest.mark.parametrize("strategy", [None, "semantic"], ids=["default", "semantic"])
def test_the_answering_page_is_in_the_top_3_and_no_navigation_in_the_top_5(api, nodejs_kb, strategy):
    kb, _ = nodejs_kb
    misses, navigation = [], []
    for q in QUESTIONS:
        results = _search(api, kb["id"], q["question"], strategy)
        found = [r["path"] for r in results]
        if q["page"] not in found[:TOP_PAGE]:
            misses.append((q["question"], q["page"], found))
        for rank, (r, page) in enumerate(zip(results, found), 1):
            share = navigation_share(r["content"], LABELS[page])
            if share >= NAVIGATION_SHARE or is_heading_alone(r["content"], LABELS[page]):
                navigation.append((q["question"], rank, page, r["chunkIndex"], round(share, 2),
                                   " | ".join(r["content"].split("\n"))[:160]))
    hit_rate = 1 - len(misses) / len(QUESTIONS)
    print(f"\n{strategy or 'default'}: page in top {TOP_PAGE} for {len(QUESTIONS) - len(misses)}/{len(QUESTIONS)}"
          f" ({hit_rate:.1%}); navigation chunks or headings alone in top {TOP_NAVIGATION}: {len(navigation)}"
          f" in {len({n[0] for n in navigation})} questions")
    for question, page, found in misses:
        print(f"  miss: {question!r} wants {page}, got {found}")
    for item in navigation:
        print("  navigation: %r rank %d %s chunk %d share %.2f: %s" % item)
    assert not navigation, f"{len(navigation)} navigation chunks or headings alone in the top {TOP_NAVIGATION}"
    assert hit_rate >= PAGE_HIT_BAR, f"the page is in the top {TOP_PAGE} for {hit_rate:.1%} of the questions"
