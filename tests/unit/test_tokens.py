"""Token counts in bounded slices: the same counts as the whole text, never the whole text at once."""
from chalicelib.embeddings import tokens
from tests.conftest import ROOT

TEXT = (ROOT / "tests" / "data" / "nodejs_api" / "api" / "permissions.html").read_text()


def _whole(texts: list[str]) -> list[int]:
    return [len(e.ids) for e in tokens._tokenizer().encode_batch(texts, add_special_tokens=False)]


def test_slices_count_what_the_whole_text_counts_and_hand_the_tokenizer_a_bounded_amount(monkeypatch):
    texts = [TEXT, "", "One short sentence.", TEXT[:5000], " \n\t "]
    expected = _whole(texts)
    real, handed = tokens._tokenizer().encode_batch, []
    monkeypatch.setattr(tokens, "PIECE_CHARS", 1000)
    monkeypatch.setattr(tokens, "_tokenizer", lambda: _Spy(real, handed))
    assert len(TEXT) > 20 * tokens.PIECE_CHARS
    assert tokens.count_tokens_batch(texts) == expected
    assert tokens.count_tokens(TEXT) == expected[0]
    # a group closes once it reaches PIECE_CHARS; no slice is longer than it
    assert max(sum(map(len, batch)) for batch in handed) < 2 * tokens.PIECE_CHARS
    assert max(len(piece) for batch in handed for piece in batch) <= tokens.PIECE_CHARS


def test_a_run_without_whitespace_is_cut_where_it_stands(monkeypatch):
    monkeypatch.setattr(tokens, "PIECE_CHARS", 50)
    assert list(tokens._slices("a" * 120)) == ["a" * 50, "a" * 50, "a" * 20]
    assert list(tokens._slices("word " * 30)) == ["word " * 10] * 3
    assert list(tokens._slices("")) == [""]  # one slice of no tokens


class _Spy:
    def __init__(self, encode_batch, handed: list):
        self._encode_batch, self._handed = encode_batch, handed

    def encode_batch(self, texts, add_special_tokens):
        self._handed.append(list(texts))
        return self._encode_batch(texts, add_special_tokens=add_special_tokens)
