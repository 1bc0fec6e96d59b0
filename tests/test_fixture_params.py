"""A fixture file's params line keeps every param type a record can take, bytes included."""

from __future__ import annotations

import tempfile
from pathlib import Path

from bytewright.review.checks import fixture_text, parse_fixture


def test_a_fixture_keeps_a_bytes_param():
    text = fixture_text("block", {"sync": b"\x00\xffab", "n": 3}, b"\x01\x02", "a block")
    assert '#: params: {"n": 3, "sync": {"hex": "00ff6162"}}' in text
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "fam" / "x.hex"
        path.parent.mkdir()
        path.write_text(text)
        fx = parse_fixture(path)
    assert fx.params == {"sync": b"\x00\xffab", "n": 3} and fx.data == b"\x01\x02"
