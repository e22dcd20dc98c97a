"""What a request read from Redis before its view (chalicelib/kv.py), handed to that request alone."""
from chalicelib import kv


def test_values_and_the_keys_generation_read_ahead_are_handed_out_once_and_only_inside_the_request():
    assert kv.keys_generation() is None and kv.read_ahead(["a"]) is None
    with kv.reading_ahead({"a": b"1", "b": None}, "g1"):
        assert kv.read_ahead(["a", "c"]) is None  # not every key was read ahead: read them now
        assert kv.read_ahead(["b", "a"]) == [None, b"1"]
        assert kv.read_ahead(["a"]) is None  # handed out once
        assert kv.keys_generation() == "g1"
        assert kv.keys_generation() is None  # a batch's second search asks the database
    assert kv.keys_generation() is None and kv.read_ahead(["a"]) is None
