"""A knowledge base's source, as the API reads it (chalicelib/sources.parse_source) and as its
adapters read the source: what a deployment refuses before it calls anything, and what a
sync never sends or copies."""
import os
from html import escape
from http.server import BaseHTTPRequestHandler

import pytest

from chalicelib.errors import Invalid
from chalicelib.sources import FolderFiles, S3Files, Skipped, SourceConfig, SourceObject, SourceRules, parse_source
from tests.local_http import _LocalServer

AWS = SourceRules()  # no S3 endpoint of its own, no folder roots
LOCAL = SourceRules(own_endpoint="http://127.0.0.1:4566")
SECRET = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:kb-sources/org_1/minio-AbCdEf"


@pytest.mark.parametrize("endpoint, why", [
    ("http://storage.example.com", "not an https URL"),
    ("https://127.0.0.1:9000", "inside a network"),
    ("https://169.254.169.254", "inside a network"),
    ("https://[::ffff:10.0.0.1]", "inside a network"),
    ("https://localhost:9000", "inside a network"),
    ("https://0x7f000001", "inside a network"),
    ("https://2130706433", "inside a network"),
    ("file:///etc/passwd", "not an http or https URL"),
    ("gopher://storage.example.com:70/", "not an http or https URL"),
])
def test_an_endpoint_inside_a_network_or_without_tls_is_refused_on_aws(endpoint, why):
    with pytest.raises(Invalid) as err:
        parse_source({"type": "s3", "bucket": "team", "endpointUrl": endpoint, "secretArn": SECRET}, "org_1", "own",
                     AWS)
    assert err.value.message.startswith("source.endpointUrl:") and why in err.value.message


@pytest.mark.parametrize("endpoint", [
    "http://127.0.0.1:9000", "http://0x7f000001:9000", "http://[::1]:4566", "http://127.1:9000",
    "http://2130706433:9000", "http://169.254.169.254", "http://10.0.0.1:4566", "https://127.0.0.1:4566",
    "file:///etc/passwd", "gopher://127.0.0.1:4566/", "http://user:pw@127.0.0.1:4566"])
def test_the_local_stack_names_only_its_own_emulator(endpoint):
    with pytest.raises(Invalid) as err:
        parse_source({"type": "s3", "bucket": "team", "endpointUrl": endpoint}, "org_1", "own", LOCAL)
    assert err.value.message.startswith("source.endpointUrl:"), err.value.message


def test_the_local_stack_may_name_its_own_endpoint_and_a_secret_is_the_organisations():
    for own in ("http://127.0.0.1:4566", "http://127.0.0.1:4566/", "http://0x7f000001:4566"):
        assert parse_source({"type": "s3", "bucket": "team", "endpointUrl": own}, "org_1", "own", LOCAL).endpoint_url
    assert parse_source({"type": "s3", "bucket": "team", "secretArn": SECRET}, "org_1", "own", AWS).secret_arn == SECRET
    with pytest.raises(Invalid) as err:
        parse_source({"type": "s3", "bucket": "team", "secretArn": SECRET}, "org_2", "own", AWS)
    assert "kb-sources/org_2/" in err.value.message
    with pytest.raises(Invalid) as err:
        parse_source({"type": "s3", "bucket": "own"}, "org_1", "own", AWS)
    assert err.value.message.startswith("source.bucket")


@pytest.mark.parametrize("arn", [
    # the organisation's prefix somewhere in the string, not at the start of the secret's name
    "arn:aws:secretsmanager:eu-west-1:123456789012:secret:kb-sources/org_2/x:secret:kb-sources/org_1/",
    "arn:aws:secretsmanager:eu-west-1:123456789012:secret:other/x#:secret:kb-sources/org_1/y",
    "arn:aws:s3:eu-west-1:123456789012:secret:kb-sources/org_1/y",
    "arn:aws:secretsmanager:eu-west-1:123456789012:parameter:kb-sources/org_1/y",
    "xarn:aws:secretsmanager:eu-west-1:123456789012:secret:kb-sources/org_1/y",
    "arn:aws:secretsmanager:eu-west-1:123456789012:secret:kb-sources/org_1/",
    "kb-sources/org_1/y",
])
def test_a_secret_arn_is_parsed_and_its_name_starts_with_the_organisations_prefix(arn):
    with pytest.raises(Invalid) as err:
        parse_source({"type": "s3", "bucket": "team", "secretArn": arn}, "org_1", "own", AWS)
    assert err.value.message.startswith("source.secretArn:"), err.value.message


class _Listener(_LocalServer):
    """A stand-in for an S3-compatible store: a listing of `keys`, and every request's headers kept."""

    def __init__(self, keys=()):
        self.headers: list[dict] = []
        server = self
        contents = "".join(f"<Contents><Key>{escape(k)}</Key><Size>1</Size><ETag>&quot;e&quot;</ETag></Contents>"
                           for k in keys)
        body = (f'<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>team</Name>{contents}'
                f"<KeyCount>{len(keys)}</KeyCount><IsTruncated>false</IsTruncated></ListBucketResult>").encode()

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                server.headers.append(dict(self.headers))
                self.send_response(200)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._serve(Handler)


def test_an_endpoint_a_caller_named_never_gets_the_functions_credentials(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAFUNCTIONSOWN")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "functions-own-secret")
    with _Listener() as store:
        endpoint = store.address("")
        files = S3Files(SourceConfig("s3", bucket="team", endpoint_url=endpoint, region="us-east-1"),
                        SourceRules(own_endpoint=endpoint))
        assert list(files.list()) == []
    assert store.headers, "the listing reached the store"
    assert all("Authorization" not in h and "X-Amz-Security-Token" not in h for h in store.headers), store.headers
    assert all(h["Host"] == endpoint.split("//")[1] for h in store.headers), "path-style: the endpoint's own host"


def test_each_request_is_checked_again_before_it_is_sent():
    with _Listener() as store:
        files = S3Files(SourceConfig("s3", bucket="team", endpoint_url=store.address(""), region="us-east-1"), AWS)
        with pytest.raises(Invalid) as err:
            list(files.list())
    assert err.value.message.startswith("source.endpointUrl:") and store.headers == []


def test_listed_keys_are_cleaned_as_document_paths_or_skipped_with_why():
    keys = ["docs/../../kb_OTHER/evil.md", "docs/a/./b.md", "docs//abs/c.md", "docs/ok.md", "docs/sub/"]
    with _Listener(keys) as store:
        endpoint = store.address("")
        files = S3Files(SourceConfig("s3", bucket="team", prefix="docs", endpoint_url=endpoint, region="us-east-1"),
                        SourceRules(own_endpoint=endpoint))
        listed = list(files.list())
    assert listed == [Skipped("../../kb_OTHER/evil.md", "must not hold '.' or '..' segments"),
                      Skipped("a/./b.md", "must not hold '.' or '..' segments"),
                      SourceObject("abs/c.md", 1, "e", "/abs/c.md"), SourceObject("ok.md", 1, "e", "ok.md")]


def test_a_folder_source_needs_a_listed_root_links_resolved(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "notes").mkdir(parents=True)
    outside.mkdir()
    (root / "out").symlink_to(outside)
    rules = SourceRules(folder_roots=(str(root),))
    with pytest.raises(Invalid) as err:
        parse_source({"type": "folder", "path": str(root / "notes")}, "org_1", "own", AWS)
    assert err.value.message.startswith("source.type:")
    for path in (str(outside), str(root / "out"), str(root / "notes" / ".." / ".."), "/etc"):
        with pytest.raises(Invalid) as err:
            parse_source({"type": "folder", "path": path}, "org_1", "own", rules)
        assert err.value.message.startswith("source.path:"), path
    assert parse_source({"type": "folder", "path": str(root / "notes")}, "org_1", "own", rules).path
    # A source stored while the rules were wider is refused when it is read.
    with pytest.raises(Invalid) as err:
        list(FolderFiles(SourceConfig("folder", path=str(outside)), rules).list())
    assert err.value.message.startswith("source.path:")


def test_a_walk_skips_links_out_broken_links_and_what_is_not_a_file(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "notes" / "deep").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.txt").write_text("not the source's")
    (root / "notes" / "a.md").write_text("# A")
    (root / "notes" / "deep" / "b.md").write_text("# B")
    (root / "notes" / "leak.txt").symlink_to(outside / "secret.txt")
    (root / "notes" / "broken.md").symlink_to(root / "gone.md")
    (root / "notes" / "linked").symlink_to(outside)
    (root / "notes" / "alias.md").symlink_to(root / "notes" / "a.md")
    os.mkfifo(root / "notes" / "pipe")
    files = FolderFiles(SourceConfig("folder", path=str(root / "notes")), SourceRules(folder_roots=(str(root),)))
    listed = list(files.list())
    skipped = {s.name: s.reason for s in listed if isinstance(s, Skipped)}
    assert skipped == {"linked": "a link to a folder: not followed", "broken.md": "a broken link",
                       "leak.txt": "a link to outside the folders this deployment lists for sources",
                       "pipe": "not a regular file"}
    assert sorted(o.path for o in listed if isinstance(o, SourceObject)) == ["a.md", "alias.md", "deep/b.md"]
    assert files.download("alias.md", 100) == b"# A"


def test_a_download_stops_at_the_limit_whatever_the_listing_said(tmp_path):
    from chalicelib.sources import TooLargeObject

    (tmp_path / "big.txt").write_bytes(b"x" * 101)
    files = FolderFiles(SourceConfig("folder", path=str(tmp_path)), SourceRules(folder_roots=(str(tmp_path),)))
    assert files.download("big.txt", 101) == b"x" * 101
    with pytest.raises(TooLargeObject):
        files.download("big.txt", 100)
