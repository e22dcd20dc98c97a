"""Fetching a document from a URL (chalicelib/documents/url_fetch.py) against a local web
server: on AWS a URL must not reach inside the network, redirects included, and the
bytes are bounded before they are all read."""
import pytest

from chalicelib import netrules
from chalicelib.documents import url_fetch
from chalicelib.errors import Invalid, TooLarge
from tests.local_http import LocalPageServer


@pytest.fixture(scope="module")
def site():
    pages = {"/a.md": (200, {"Content-Type": "text/markdown; charset=utf-8"}, b"# A\n\ntext\n"),
             "/big": (200, {"Content-Type": "text/plain"}, b"x" * 5000),
             "/to-metadata": (302, {"Location": "http://169.254.169.254/latest/meta-data/"}, b"")}
    with LocalPageServer(pages) as server:
        yield server


@pytest.mark.parametrize("address, public", [
    ("8.8.8.8", True), ("2606:4700:4700::1111", True), ("127.0.0.1", False), ("10.1.2.3", False),
    ("172.16.0.9", False), ("192.168.1.1", False), ("169.254.169.254", False), ("100.64.0.1", False),
    ("::1", False), ("fd00::1", False), ("fe80::1", False), ("::ffff:10.0.0.1", False), ("0.0.0.0", False),
    ("224.0.0.1", False),
    # IPv4 carried in IPv6: NAT64, 6to4 (both to 169.254.169.254), Teredo (a documentation client)
    ("64:ff9b::a9fe:a9fe", False), ("2002:a9fe:a9fe::", False), ("2001:0:4136:e378:8000:63bf:3fff:fdd2", False),
    ("64:ff9b::808:808", True)])
def test_only_public_addresses_are_public(address, public):
    assert netrules.is_public(address) is public


def test_a_loopback_url_is_refused_unless_the_deployment_allows_it(site):
    with pytest.raises(Invalid) as refused:
        url_fetch.fetch(site.url("/a.md"), max_bytes=10_000, allow_private=False)
    assert refused.value.code == "URL_NOT_FETCHED" and "127.0.0.1" in refused.value.message
    assert site.paths == [], "nothing was sent to the refused address"
    fetched = url_fetch.fetch(site.url("/a.md"), max_bytes=10_000, allow_private=True)
    assert (fetched.content, fetched.content_type, fetched.filename) == (b"# A\n\ntext\n", "text/markdown", "a.md")


def test_a_redirect_into_the_network_is_checked_like_the_first_hop(site, monkeypatch):
    # The first hop is allowed by treating loopback as public; the redirect's target is not.
    monkeypatch.setattr(netrules, "is_public", lambda address: address == "127.0.0.1")
    with pytest.raises(Invalid) as refused:
        url_fetch.fetch(site.url("/to-metadata"), max_bytes=10_000, allow_private=False)
    assert "169.254.169.254" in refused.value.message


def test_an_answer_over_the_limit_is_refused(site):
    with pytest.raises(TooLarge) as refused:
        url_fetch.fetch(site.url("/big"), max_bytes=4000, allow_private=True)
    assert "5000 bytes" in refused.value.message


@pytest.mark.parametrize("url", ["http://example.com:99999/", "http://a:abc/", "http://[::1", "ftp://example.com/"])
def test_a_url_that_does_not_parse_is_refused_not_a_crash(url):
    with pytest.raises(Invalid) as refused:
        url_fetch.fetch(url, max_bytes=10, allow_private=True)
    assert refused.value.code == "URL_NOT_FETCHED"


def test_a_server_that_answers_a_byte_at_a_time_is_given_up_on_at_the_deadline(monkeypatch):
    """Each receive brings a byte within the read timeout; the whole fetch still ends."""
    import socket
    import threading
    import time

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()

    def drip():
        conn, _ = server.accept()
        with conn:
            conn.recv(4096)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\n")
            for _ in range(100):
                time.sleep(0.2)
                try:
                    conn.sendall(b"x")
                except OSError:
                    return

    threading.Thread(target=drip, daemon=True).start()
    monkeypatch.setattr(url_fetch.limits, "URL_TOTAL_SECONDS", 1)
    started = time.monotonic()
    with pytest.raises(Invalid, match="took longer than 1 s"):
        url_fetch.fetch(f"http://127.0.0.1:{server.getsockname()[1]}/slow", max_bytes=10_000, allow_private=True)
    assert time.monotonic() - started < 3
    server.close()
