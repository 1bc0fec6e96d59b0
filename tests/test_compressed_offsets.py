"""A decode error inside a compressed section reports an offset of the input (where the
compressed bytes start, after their length prefix), the same on every codec path, never an offset into the decompressed
bytes: found by the long atheris run (a sidecar segment reported offset 302 on a 93-byte
input on the Construct path)."""

from __future__ import annotations

import zlib

import pytest

from bytewright.runtime.errors import DecodeError

SCHEMA = """
bytewright: 1
family: zsec
enums:
  colour: {type: u8, values: {RED: 1, BLUE: 2}}
records:
  item:
    fields:
      - {name: pad, type: bytes, size: 40}
      - {name: colour, type: colour}
  packed:
    fields:
      - {name: magic, type: u16, const: 0xBEEF}
      - {name: count, type: u8}
      - {name: items, type: item, repeat: {count: count}, compressed: {algorithm: zlib, length: u32}}
"""


@pytest.mark.parametrize("bad", ["enum", "trailing", "short"])
def test_error_inside_a_compressed_section_has_an_input_offset(schema_module, bad):
    m = schema_module(SCHEMA, "zsec")
    plain = (bytes(40) + b"\x01") * 3
    if bad == "enum":
        plain = plain[:-1] + b"\x07"       # unknown colour in the last item, at +122
    elif bad == "trailing":
        plain += b"\x00"
    else:
        plain = plain[:-1]
    frame = zlib.compress(plain)
    data = b"\xef\xbe\x03" + len(frame).to_bytes(4, "little") + frame
    seen = []
    for decode in (m.decode_packed,
                   m.construct_decode_packed,
                   lambda d: m.construct_decode_packed(d, compiled=True)):
        with pytest.raises(DecodeError) as info:
            decode(data)
        seen.append((type(info.value).__name__, info.value.offset))
    assert seen == [seen[0]] * 3, seen  # one class and one offset on every path
    assert seen[0][1] == 7  # the first compressed byte: magic (2) + count (1) + length (4)
