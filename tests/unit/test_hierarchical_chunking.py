"""Hierarchical chunking's settings and the window arithmetic (ingestion/context.py), without a
database: what a knowledge base may ask of its model, the defaults per provider, and the count
that holds a chunk to a remote model's window."""
from pathlib import Path

import pytest

from chalicelib import limits
from chalicelib.embeddings.tokens import count_tokens
from chalicelib.errors import Invalid
from chalicelib.ingestion.context import (Chunking, child_limit, default_chunking, fitting_tokens, remote_tokens,
                                          settle_chunking, window_bytes, within_window)
from chalicelib.ingestion.model import Chunk

DATA = Path(__file__).resolve().parents[1] / "data"
SIZES = (500, 50)  # the deployment's chunkTokens and chunkOverlap for fixed and semantic


def _settle(fields, provider="local", base=None):
    return settle_chunking(fields, provider, base=base or default_chunking(provider), sizes=SIZES)


def _refused(fields, provider="local", base=None) -> str:
    with pytest.raises(Invalid) as raised:
        _settle(fields, provider, base)
    return str(raised.value)


def test_a_child_fits_the_window_less_its_context_line():
    assert child_limit("local") == 256 - 2 - limits.CHUNK_CONTEXT_TOKENS == 214
    assert child_limit("openai") == 8191 // 2 - limits.CHUNK_CONTEXT_TOKENS
    assert _settle({"strategy": "hierarchical", "parentTokens": 600, "childTokens": 214}) == \
        Chunking("hierarchical", 600, 50, 214)
    message = _refused({"strategy": "hierarchical", "parentTokens": 600, "childTokens": 215})
    assert message.startswith("chunking.childTokens") and "214" in message
    assert _settle({"strategy": "hierarchical", "parentTokens": 3000, "childTokens": 1000}, "openai").child_tokens == 1000


@pytest.mark.parametrize("fields, field", [
    ({"strategy": "hierarchical", "parentTokens": 100, "childTokens": 200}, "chunking.parentTokens"),
    ({"strategy": "hierarchical", "parentTokens": 9000, "childTokens": 200}, "chunking.parentTokens"),
    ({"strategy": "hierarchical", "parentTokens": "500", "childTokens": 200}, "chunking.parentTokens"),
    ({"strategy": "hierarchical", "childTokens": 10}, "chunking.childTokens"),
    ({"strategy": "hierarchical", "childTokens": True}, "chunking.childTokens"),
    ({"strategy": "hierarchical", "chunkTokens": 300}, "chunking.chunkTokens"),
    ({"strategy": "hierarchical", "childTokens": 100, "chunkOverlap": 60}, "chunking.chunkOverlap"),
    ({"strategy": "fixed", "parentTokens": 1000}, "chunking.parentTokens"),
    ({"strategy": "semantic", "childTokens": 100}, "chunking.childTokens"),
    ({"strategy": "topics"}, "chunking.strategy"),
])
def test_settings_that_do_not_hold_are_refused_naming_the_field(fields, field):
    assert _refused(fields).startswith(field)


def test_defaults_per_provider_fit_their_windows():
    local, bedrock, openai = (default_chunking(p) for p in ("local", "bedrock", "openai"))
    assert local.strategy == bedrock.strategy == "hierarchical" and openai.strategy == "fixed"
    assert (bedrock.chunk_tokens, bedrock.child_tokens) == (1500, 300)  # Bedrock Knowledge Bases' defaults
    assert (openai.chunk_tokens, openai.chunk_overlap) == (800, 400)  # OpenAI file search's
    for provider, chunking in (("local", local), ("bedrock", bedrock), ("openai", openai)):
        child = chunking.child_tokens or chunking.chunk_tokens
        assert child <= child_limit(provider) and chunking.chunk_overlap <= child // 2
        # every default is what settle_chunking would accept when asked for
        assert _settle(chunking.view(), provider) == chunking
    # no chunking: the provider's default; hierarchical alone on OpenAI: Bedrock's sizes
    assert _settle({}, "openai") == openai
    assert _settle({"strategy": "hierarchical"}, "openai") == Chunking("hierarchical", 1500, 60, 300)
    assert _settle({"chunkTokens": 300}) == Chunking("fixed", 300, 50)  # sized as before: fixed


def test_a_rebuild_keeps_what_it_does_not_name_and_can_move_to_hierarchical():
    before = Chunking("fixed", 400, 20)
    assert _settle({}, base=before) == before
    assert _settle({"chunkOverlap": 10}, base=before) == Chunking("fixed", 400, 10)
    moved = _settle({"strategy": "hierarchical"}, base=before)
    assert moved == default_chunking("local") and fitting_tokens(
        {"embedding_provider": "local", "chunk_tokens": moved.chunk_tokens, "child_tokens": moved.child_tokens}) == 214
    assert _settle({"childTokens": 100}, base=moved) == Chunking("hierarchical", 500, 50, 100)
    assert _settle({"strategy": "fixed"}, base=moved) == Chunking("fixed", 500, 50)


def _real_texts() -> list[str]:
    from chalicelib.ingestion.extract import extract

    texts = []
    for path in sorted((DATA / "manuals").rglob("*.html")) + sorted((DATA / "nodejs_api" / "api").glob("*"))[:3]:
        texts.extend(s.text for s in extract(path.read_bytes(), path.name).sections)
    return texts


def test_utf8_bytes_never_undercount_openais_tokens_where_wordpiece_does():
    bpe_openai = pytest.importorskip("bpe_openai")
    cl100k = bpe_openai.get_encoding("cl100k_base")
    texts = _real_texts()
    assert sum(len(t) for t in texts) > 50_000
    hostile = ["f3a9" * 2000, "😀" * 500, "日本語のテキスト" * 300, "=-" * 3000, "x" * 5000]
    for text in texts + hostile:
        assert remote_tokens(text) >= len(cl100k.encode(text))
    # the WordPiece estimate the window was sized with (two cl100k tokens a WordPiece token) is not
    # a bound: a word it does not know, of any length, is one [UNK]
    assert any(2 * count_tokens(t) < len(cl100k.encode(t)) for t in hostile)


def test_a_chunk_wordpiece_undercounts_is_cut_to_a_remote_window():
    blob = "f3a9" * 6000  # one "word": a single WordPiece token, 24,000 bytes
    chunk = Chunk(0, f"Data follows. {blob} End.", 0, 24_020, count_tokens(f"Data follows. {blob} End."),
                  title="Firmware › Image")
    assert chunk.token_count < 10
    assert within_window([chunk], "local") == [chunk]  # the local model's own tokenizer counted it
    cut = within_window([chunk, Chunk(1, "Short.", 24_021, 24_027, 2)], "openai")
    assert len(cut) == 5 and [c.chunk_index for c in cut] == list(range(5))
    room = window_bytes("openai")
    assert all(remote_tokens(f"{c.title}\n{c.content}") <= room for c in cut[:-1]) and cut[-1].content == "Short."
    assert "".join(c.content for c in cut[:-1]).replace(" ", "") == chunk.content.replace(" ", "")


def test_an_openai_request_is_filled_by_the_bound_not_by_wordpiece():
    from chalicelib.embeddings.openai_provider import MAX_TOKENS_PER_REQUEST, OpenAIEmbeddings

    texts = ["f3a9" * 2500] * 40  # 10,000 bytes each, one WordPiece token each: 400,000 of OpenAI's at most
    batches = OpenAIEmbeddings.batches(texts)
    assert len(batches) == 2 and sum(map(len, batches)) == 40
    assert all(sum(remote_tokens(t) for t in b) <= MAX_TOKENS_PER_REQUEST for b in batches)
