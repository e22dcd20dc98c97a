"""A document's path as the API takes it, and the document list's tokens (issue 27)."""
import pytest

from chalicelib.documents import listing, uploads
from chalicelib.errors import Invalid, Unsupported
from chalicelib.storage.documents import _prefix_end


@pytest.mark.parametrize("given, path", [
    ("guides/install/index.html", "guides/install/index.html"),
    ("/guides//install/index.html", "guides/install/index.html"),  # a leading or doubled / is no name
    ("guides\\install\\index.html", "guides/install/index.html"),  # Windows separators
    ("notes/caf\u0065\u0301.md", "notes/caf\u00e9.md"),  # NFC: one key however the client composed it
    ("a/b<c>|d.txt", "a/b_c_d.txt"),
    ("README", "README"),
])
def test_paths_are_cleaned_into_one_key(given, path):
    assert uploads.clean_path(given) == path


@pytest.mark.parametrize("given", ["../etc/passwd", "a/../b.txt", "a/./b.txt", "", "///", "a/%%%"])
def test_paths_that_leave_the_knowledge_base_or_name_nothing_are_refused(given):
    with pytest.raises(Invalid) as err:
        uploads.clean_path(given)
    assert err.value.message.startswith("path:")


def test_a_path_over_the_s3_key_limit_is_refused():
    with pytest.raises(Invalid):
        uploads.clean_path("d/" * 499 + "abc.txt")
    with pytest.raises(Invalid):
        uploads.clean_path("x" * 256)  # a name longer than any file system allows


def test_filename_alone_keeps_its_last_name_as_before_paths():
    assert uploads.name_as_path("C:\\Users\\me\\report.pdf") == "report.pdf"
    assert uploads.name_as_path("../../etc/notes.md") == "notes.md"
    with pytest.raises(Invalid) as err:
        uploads.name_as_path("..")
    assert err.value.message.startswith("filename:")


def test_binary_types_are_refused_by_name_or_declared_type():
    with pytest.raises(Unsupported) as err:
        uploads._check_type("photos/cat.png", None)
    assert "PNG" in err.value.message
    with pytest.raises(Unsupported):
        uploads._check_type("report.pdf", "image/png")
    uploads._check_type("LICENSE", None)
    uploads._check_type("config/app.yaml", "application/yaml")


def test_a_binary_file_is_refused_by_its_first_bytes_before_its_upload():
    import base64

    from chalicelib.errors import Invalid
    head = base64.b64encode(b"\x1f\x8b\x08\x00" + bytes(200)).decode()
    with pytest.raises(Unsupported) as err:
        uploads._check_head("backup.dat", head)
    assert err.value.message == ("head: backup.dat is gzip archive, which is not a document format this service"
                                 " reads")
    for readable in (b"# Notes\n\nplain text", b"%PDF-1.7\n", b"PK\x03\x04 a docx, told by its end"):
        uploads._check_head("notes", base64.b64encode(readable).decode())
    with pytest.raises(Invalid, match="head: must be base64"):
        uploads._check_head("notes", "not base64!")
    with pytest.raises(Invalid, match="first 4096 bytes"):
        uploads._check_head("notes", base64.b64encode(b"x" * 4097).decode())


def test_a_folder_prefix_keeps_its_slash():
    assert uploads.clean_prefix("guides/") == "guides/"
    assert uploads.clean_prefix("guides") == "guides"


def test_prefix_end_bounds_exactly_the_strings_with_the_prefix():
    end = _prefix_end("kb/x/a/")
    assert "kb/x/a/zzz" < end and "kb/x/a0" >= end and "kb/x/a/\U0010ffff" < end
    assert _prefix_end("\U0010ffff") is None


def test_tokens_round_trip_and_refuse_what_they_were_not_made_for():
    token = listing.encode_token("kb_1", "updatedAt", ("2026-11-25T03:00:00+00:00", "doc_9"))
    assert listing.decode_token(token, "kb_1", "updatedAt") == ("2026-11-25T03:00:00+00:00", "doc_9")
    for kb_id, sort, why in (("kb_2", "updatedAt", "another knowledge base"), ("kb_1", "path", "sort=")):
        with pytest.raises(Invalid) as err:
            listing.decode_token(token, kb_id, sort)
        assert why in err.value.message
    for bad, sort in (("!!!", "path"), ("e30", "path"), (listing.encode_token("kb_1", "path", ("a", "b")), "path"),
                      (listing.encode_token("kb_1", "updatedAt", ("yesterday", "doc_1")), "updatedAt")):
        with pytest.raises(Invalid):
            listing.decode_token(bad, "kb_1", sort)
