"""The Construct encoder measures a derived varint size of a repeat the way the fast
encoder does: the bytes of every item, not the element construct built from the list."""

from __future__ import annotations

import pytest

SCHEMA = """
bytewright: 1
family: measure
records:
  reading:
    fields:
      - {name: a, type: u8}
      - {name: s, type: str, length: zigzag}
  data_block:
    fields:
      - {name: count, type: zigzag}
      - {name: size, type: zigzag}
      - {name: objects, type: reading, repeat: {count: count}, size: size}
  words:
    fields:
      - {name: size, type: uleb128}
      - {name: values, type: u16, repeat: eos, size: size}
"""


@pytest.fixture
def m(schema_module):
    return schema_module(SCHEMA, "measure")


def test_a_derived_size_of_a_repeat_of_records_encodes_alike_on_both_paths(m):
    value = m.DataBlock(objects=[m.Reading(a=1, s="x"), m.Reading(a=2, s="yz")])
    # count 2 -> zigzag 04; size 7 -> zigzag 0e; items: 01 02 'x' | 02 04 'yz'
    want = bytes.fromhex("040e") + b"\x01\x02x" + b"\x02\x04yz"
    assert m.ENCODERS["data_block"](value) == want
    for compiled in (False, True):
        assert m.CONSTRUCT_ENCODERS["data_block"](value, compiled=compiled) == want
        assert m.CONSTRUCT_DECODERS["data_block"](want, compiled=compiled) == value
    assert m.DECODERS["data_block"](want) == (value, len(want))


def test_a_derived_size_of_a_repeat_of_scalars_encodes_alike_on_both_paths(m):
    value = m.Words(values=[1, 0x203])
    want = bytes.fromhex("04" "0100" "0302")
    assert m.ENCODERS["words"](value) == want
    for compiled in (False, True):
        assert m.CONSTRUCT_ENCODERS["words"](value, compiled=compiled) == want


STORED = """
bytewright: 1
family: storedsize
plugins: ["rev_codec:register"]
records:
  frame:
    fields:
      - {name: csize, type: u16}
      - {name: usize, type: u16}
      - name: data
        type: bytes
        compressed: {algorithm: rev, stored_size: csize, plain_size: usize}
      - {name: tail, type: u8}
"""


PLUGIN = """
def register(reg):
    reg.add_codec("rev", compress=lambda b: bytes(reversed(b)),
                  decompress=lambda b, limit: bytes(reversed(bytes(b)))[:limit])
"""


def test_a_stored_size_bounds_a_codec_that_is_not_self_terminating(schema_module, tmp_path,
                                                                     monkeypatch):
    (tmp_path / "rev_codec.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    m = schema_module(STORED, "storedsize")
    value = m.Frame(data=b"abc", tail=7)
    # the plug-in codec reverses its bytes and cannot find its own end
    want = bytes.fromhex("0300" "0300") + b"cba" + b"\x07"
    assert m.ENCODERS["frame"](value) == want
    assert m.DECODERS["frame"](want) == (value, len(want))
    for compiled in (False, True):
        assert m.CONSTRUCT_ENCODERS["frame"](value, compiled=compiled) == want
        assert m.CONSTRUCT_DECODERS["frame"](want, compiled=compiled) == value

