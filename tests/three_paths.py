"""Helpers the language tests share: one value or one error on the three codec paths
(fast, Construct interpreted, Construct compiled)."""

from __future__ import annotations

import pytest

from bytewright.runtime.errors import DecodeError


def encode_all(m, record: str, value) -> bytes:
    """The bytes of ``value``, the same from every encoder."""
    data = m.ENCODERS[record](value)
    assert m.CONSTRUCT_ENCODERS[record](value) == data
    assert m.CONSTRUCT_ENCODERS[record](value, compiled=True) == data
    return data


def decode_all(m, record: str, data: bytes, offset: int = 0):
    """The value of ``data`` (which it must use up), the same from every decoder."""
    value, end = m.DECODERS[record](data, offset)
    assert end == len(data)
    assert m.CONSTRUCT_DECODERS[record](data, offset) == value
    assert m.CONSTRUCT_DECODERS[record](data, offset, compiled=True) == value
    return value


def errors_all(m, record: str, data: bytes, offset: int = 0) -> tuple:
    """The (class, path, offset) of the decode error, the same on every path."""
    seen = set()
    for call in (lambda: m.DECODERS[record](data, offset),
                 lambda: m.CONSTRUCT_DECODERS[record](data, offset),
                 lambda: m.CONSTRUCT_DECODERS[record](data, offset, compiled=True)):
        with pytest.raises(DecodeError) as info:
            call()
        seen.add((type(info.value), info.value.path, info.value.offset))
    assert len(seen) == 1, seen
    return seen.pop()
