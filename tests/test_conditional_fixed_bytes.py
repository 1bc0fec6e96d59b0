"""A fixed-size byte string under ``if:`` is refused at another length by both encoders
(``struct`` would pad or cut it silently, and the bytes would decode to another value)."""

from __future__ import annotations

import pytest

from bytewright.runtime.errors import EncodeError

SCHEMA = """
bytewright: 1
family: condbytes
records:
  rec:
    fields:
      - {name: kind, type: u8}
      - {name: prefix, type: bytes, size: 4, if: "kind == 1", default: "hex:00000000"}
      - {name: tail, type: u8}
"""


@pytest.fixture
def m(schema_module):
    return schema_module(SCHEMA, "condbytes")


def test_the_right_length_encodes_alike(m):
    value = m.Rec(kind=1, prefix=b"abcd", tail=9)
    want = b"\x01abcd\x09"
    assert m.ENCODERS["rec"](value) == want
    for compiled in (False, True):
        assert m.CONSTRUCT_ENCODERS["rec"](value, compiled=compiled) == want


@pytest.mark.parametrize("prefix", [b"abcde", b"abc"])
def test_another_length_is_an_encode_error_on_every_path(m, prefix):
    value = m.Rec(kind=1, prefix=prefix, tail=9)
    with pytest.raises(EncodeError) as fast:
        m.ENCODERS["rec"](value)
    assert "prefix" in fast.value.path
    for compiled in (False, True):
        with pytest.raises(EncodeError):
            m.CONSTRUCT_ENCODERS["rec"](value, compiled=compiled)
