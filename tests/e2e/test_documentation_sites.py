"""A documentation site dropped into a knowledge base, through the emulator's pipeline: a
footer every page repeats leaves the chunks once enough pages hold it, and a page of
navigation alone is PROCESSED with no chunks and a note saying why."""
import time

import pytest

from tests.e2e.conftest import find_document, wait_for_status

BUCKET = "kb-documents-local"
FOOTER = "Part of the frob(1) suite of widget tools"
STRIP = "Home · Commands · Widget guide · Release notes"


def _page(n: int, body: str) -> bytes:
    return f"""<!DOCTYPE html><html><head><title>frob-{n}(1)</title></head><body><div id="content">
<p>{STRIP}</p>
<div class="sect1"><h2>NAME</h2><p>frob-{n} - {body.split('.')[0].lower()}</p></div>
<div class="sect1"><h2>DESCRIPTION</h2><p>{body}</p></div>
<div class="sect1"><h2>FROB</h2><p>{FOOTER}</p></div>
</div></body></html>""".encode()


BODIES = [
    "Sorts the widgets of a gadget by weight, the heaviest first. The order lasts until the gadget is sealed.",
    "Seals a gadget so its widgets stay where they are. A sealed gadget refuses new widgets until it is opened.",
    "Wraps the widget report at the given width in columns. Without a width the report is eighty columns wide.",
    "Prunes the widgets that no gadget refers to any longer. Pruned widgets are moved to the attic folder.",
    "Counts the widgets of every gadget and prints one line per gadget. The count excludes pruned widgets.",
]


@pytest.fixture(scope="module")
def kb(api):
    answer = api.call("POST", "/knowledge-bases", {"name": "Frob manual", "description": "",
                                                  "chunking": {"chunkTokens": 200, "chunkOverlap": 0}})
    assert answer.status_code == 201, answer.text
    return answer.json()["data"]


def _put_and_wait(api, s3, kb, name, body):
    before = find_document(api, kb["id"], name)
    s3.put_object(Bucket=BUCKET, Key=f"kb/{kb['id']}/{name}", Body=body)
    return wait_for_status(api, kb["id"], name, changed_since=before["updatedAt"] if before else None)[0]


def _text(db, doc_id) -> str:
    rows = db.execute("SELECT content FROM chunks c JOIN documents d ON d.id = c.document_id"
                      " AND d.chunks_version = c.version WHERE c.document_id = %s ORDER BY chunk_index",
                      (doc_id,)).fetchall()
    return "\n".join(r["content"] for r in rows)


def _footer_count(db, kb_id) -> int:
    from chalicelib.ingestion import common_lines
    line = common_lines._hash(common_lines._shape(FOOTER))
    row = db.execute("SELECT documents FROM kb_lines WHERE kb_id = %s AND line_hash = %s", (kb_id, line)).fetchone()
    return row["documents"] if row else 0


def test_a_footer_on_every_page_leaves_the_chunks_once_enough_pages_hold_it(api, s3, kb, db):
    docs = []
    for n, body in enumerate(BODIES):  # one after the other: each page's chunks see the pages before
        doc = _put_and_wait(api, s3, kb, f"frob-{n}.html", _page(n, body))
        assert doc["status"] == "PROCESSED" and doc["chunks"] >= 1, doc
        docs.append(doc)
    texts = [_text(db, d["id"]) for d in docs]
    for text, body in zip(texts, BODIES):
        assert body.split(".")[0] in text  # the page's own text stays
    # The first two pages were chunked while fewer than three pages held the footer.
    assert "Part of the frob(1) suite" in texts[0] and "Part of the frob(1) suite" in texts[1]
    for text in texts[2:]:
        assert "Part of the frob(1) suite" not in text and STRIP not in text, text
    assert _footer_count(db, kb["id"]) == 5

    # A page chunked again (here: changed) drops the footer it kept.
    changed = _put_and_wait(api, s3, kb, "frob-0.html", _page(0, BODIES[0] + " Ties keep their order."))
    assert "Part of the frob(1) suite" not in _text(db, changed["id"]) and "Ties keep" in _text(db, changed["id"])
    assert _footer_count(db, kb["id"]) == 5

    # A deleted page no longer counts.
    answer = api.call("DELETE", f"/knowledge-bases/{kb['id']}/documents/{docs[4]['id']}")
    assert answer.status_code in (200, 202, 204), answer.text
    deadline = time.monotonic() + 60
    while _footer_count(db, kb["id"]) != 4 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _footer_count(db, kb["id"]) == 4

    # A page holding nothing but the site's common lines has nothing to index, and says so.
    bare = f"<html><body><div id='content'><p>{STRIP}</p><p>{FOOTER}</p></div></body></html>".encode()
    doc = _put_and_wait(api, s3, kb, "frob-bare.html", bare)
    assert doc["status"] == "PROCESSED" and doc["chunks"] == 0 and "repeated across" in doc["note"], doc


def test_the_counts_are_per_knowledge_base(api, s3, kb, db):
    other = api.call("POST", "/knowledge-bases", {"name": "Another manual", "description": ""}).json()["data"]
    doc = _put_and_wait(api, s3, other, "frob-9.html", _page(9, BODIES[0]))
    assert "Part of the frob(1) suite" in _text(db, doc["id"])  # the first page of its knowledge base
    assert _footer_count(db, other["id"]) == 1


def test_a_page_of_navigation_alone_is_processed_with_no_chunks_and_a_note(api, s3, kb, db):
    menu = b"""<html><head><title>Commands</title></head><body><h2>Commands</h2>
<ul class="section-toc"><li><a href="frob-0.html">frob-0</a></li><li><a href="frob-1.html">frob-1</a></li>
<li><a href="frob-2.html">frob-2</a></li></ul></body></html>"""
    doc = _put_and_wait(api, s3, kb, "commands.html", menu)
    assert doc["status"] == "PROCESSED" and doc["error"] is None, doc
    assert doc["chunks"] == 0 and "navigation" in doc["note"]
    assert db.execute("SELECT count(*) AS n FROM chunks WHERE document_id = %s", (doc["id"],)).fetchone()["n"] == 0
    # A later version with text clears the note.
    doc = _put_and_wait(api, s3, kb, "commands.html", menu.replace(
        b"</ul>", b"</ul><p>Every command reads the widget catalogue named by FROB_HOME before it starts.</p>"))
    assert doc["status"] == "PROCESSED" and doc["chunks"] >= 1 and doc["note"] is None
