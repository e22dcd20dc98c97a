"""What every JSON body and payload is checked for before anything reads it."""
import json

import pytest

from chalicelib import limits
from chalicelib.errors import Invalid
from chalicelib.validate import check_text


def _nested(depth: int):
    value = "leaf"
    for _ in range(depth):
        value = {"a": value}
    return value


def test_nesting_is_bounded_without_recursion():
    check_text(_nested(limits.JSON_MAX_DEPTH))
    with pytest.raises(Invalid, match=f"nests deeper than {limits.JSON_MAX_DEPTH} levels"):
        check_text(_nested(limits.JSON_MAX_DEPTH + 1))
    deep = json.loads("[" * 900 + "]" * 900)  # what Python's parser still reads
    with pytest.raises(Invalid):
        check_text(deep)
    with pytest.raises(Invalid):
        check_text(_nested(100_000))  # would exhaust the stack if walked recursively


@pytest.mark.parametrize("number", [float("nan"), float("inf"), float("-inf")])
def test_numbers_must_be_finite(number):
    with pytest.raises(Invalid, match=r"^topK: must be a finite number"):
        check_text({"query": "x", "topK": number})


def test_the_first_bad_field_is_named_with_its_path():
    with pytest.raises(Invalid, match=r"^filters\.tags\[1\]: contains a NUL"):
        check_text({"query": "ok", "filters": {"tags": ["a", "b\x00"]}, "later": "\x00"})
    with pytest.raises(Invalid, match="invalid Unicode"):
        check_text({"bad\ud800key": 1})
    check_text({"query": "fine", "topK": 5, "minScore": 0.5, "tags": ["a"], "flag": True, "none": None})
