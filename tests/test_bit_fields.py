"""Bit fields (``bits:`` on an integer field): named bit ranges are fields of the record,
in either byte order and either bit numbering, with enum, range and constant checks, on
both codec paths; a value assembled from bit ranges and a varint (git pack object header)
through a value with no bytes of its own."""

from __future__ import annotations

import pytest

from bytewright.generator import pipeline
from bytewright.properties import Builder, run_record
from bytewright.runtime.errors import ConstraintError, EncodeError

from .conftest import build_module
from .three_paths import decode_all, encode_all, errors_all


def encode_errors(m, record: str, value) -> str:
    paths = set()
    for call in (m.ENCODERS[record], m.CONSTRUCT_ENCODERS[record]):
        with pytest.raises(EncodeError) as info:
            call(value)
        paths.add(info.value.path)
    with pytest.raises(EncodeError):
        m.CONSTRUCT_ENCODERS[record](value, compiled=True)
    assert len(paths) == 1, paths
    return paths.pop()


SCHEMA = """
bytewright: 1
family: bitty
enums:
  obj_type: {type: u8, values: {COMMIT: 1, TREE: 2, BLOB: 3, TAG: 4, OFS_DELTA: 6, REF_DELTA: 7}}
  prio: {type: u8, open: true, values: {LOW: 0, HIGH: 3}}
records:
  word:
    fields:
      - {name: lead, type: u8}
      - name: head
        type: u16be
        bits:
          more: {bit: 15}
          kind: {bits: [12, 14], enum: obj_type}
          ver: {bits: [10, 11], const: 2}
          pr: {bits: [8, 9], enum: prio}
          low: {bits: [0, 7], valid: {min: 1, max: 200}}
      - {name: extra, type: u8, if: more}
  word_le:
    fields:
      - name: head
        type: u16
        bits:
          hi: {bits: [8, 15]}
          lo: {bits: [0, 3]}
  msb:
    fields:
      - name: b
        type: u8
        bit_order: msb0
        bits:
          version: {bits: [0, 1]}       # the two most significant bits (RTP-style)
          padding: {bit: 2}
          count: {bits: [3, 7]}
  ipv4_start:
    fields:
      - name: vihl
        type: u8
        bits: {version: {bits: [4, 7], const: 4}, ihl: {bits: [0, 3], valid: {min: 5}}}
      - {name: tos, type: u8}
  pack_header:
    fields:
      - name: head
        type: u8
        bits:
          more: {bit: 7, value: "size >= 16"}
          kind: {bits: [4, 6], enum: obj_type}
          size_low: {bits: [0, 3], value: "size & 15"}
      - {name: size_high, type: uleb128, if: more, value: "size >> 4"}
      - {name: base_offset, type: vlq_offset, if: "kind == 6"}
      - {name: size, value: "size_low | (size_high << 4 if more else 0)"}
  ev:
    fields:
      - name: status
        type: u8
        bits: {kind: {bits: [4, 7]}, channel: {bits: [0, 3]}}
      - {name: message, switch: "kind if kind < 15 else kind * 16 + channel",
         cases: {9: two, 0xff: one}}
  two: {fields: [{name: a, type: u16}]}
  one: {fields: [{name: b, type: u8}]}
"""


@pytest.fixture(scope="module")
def m(tmp_path_factory):
    return build_module(SCHEMA, tmp_path_factory.mktemp("bits"), "bitty")


def test_ranges_are_fields_of_the_record(m):
    assert list(m.Word.__dataclass_fields__) == ["lead", "more", "kind", "pr", "low", "extra"]
    v = m.Word(7, True, m.ObjType.BLOB, m.Prio.HIGH, 0x41, 9)
    data = encode_all(m, "word", v)
    # 1 011 10 11 01000001 (more, BLOB, ver 2, HIGH, 0x41) big-endian, then extra
    assert data == bytes([7, 0b10111011, 0x41, 9])
    back = decode_all(m, "word", data)
    assert back == v and back.more is True and back.kind is m.ObjType.BLOB
    assert back.pr is m.Prio.HIGH
    short = m.Word(7, False, m.ObjType.TREE, 1, 200, None)  # open enum: a plain int
    assert encode_all(m, "word", short) == bytes([7, 0b00101001, 200])
    assert decode_all(m, "word", bytes([7, 0b00101001, 200])) == short


def test_little_endian_and_msb_numbering(m):
    assert encode_all(m, "word_le", m.WordLe(0xAB, 0x5)) == b"\x05\xab"
    assert decode_all(m, "word_le", b"\x05\xab") == m.WordLe(0xAB, 5)
    # msb0: bit 0 is the most significant; 10 1 00011 = 0xA3 (RTP: V=2, P=1, CC=3)
    assert encode_all(m, "msb", m.Msb(2, True, 3)) == b"\xa3"
    assert decode_all(m, "msb", b"\xa3") == m.Msb(2, True, 3)


def test_decode_checks_name_the_range(m):
    assert errors_all(m, "word", bytes([7, 0b10001011, 0x41, 9])) == \
        (ConstraintError, "word.kind", 1)  # kind 0 is no obj_type
    assert errors_all(m, "word", bytes([7, 0b10110111, 0x41, 9])) == \
        (ConstraintError, "word.ver", 1)  # const 2 broken
    assert errors_all(m, "word", bytes([7, 0b10111011, 0, 9])) == \
        (ConstraintError, "word.low", 1)  # below min 1
    assert errors_all(m, "word", b"...." + bytes([7, 0b10111011, 201, 9]), 4) == \
        (ConstraintError, "word.low", 5)  # absolute offset in a larger buffer
    # bits no range names must be zero
    assert errors_all(m, "word_le", b"\x15\xab") == (ConstraintError, "word_le.head", 0)
    assert errors_all(m, "ipv4_start", b"\x65\x00") == (ConstraintError, "ipv4_start.version", 0)
    assert errors_all(m, "ipv4_start", b"\x44\x00") == (ConstraintError, "ipv4_start.ihl", 0)
    assert decode_all(m, "ipv4_start", b"\x45\x10") == m.Ipv4Start(5, 0x10)


def test_encode_refuses_what_does_not_fit(m):
    ok = m.Word(7, True, m.ObjType.BLOB, 3, 0x41, 9)
    assert encode_errors(m, "word", m.Word(7, True, m.ObjType.BLOB, 3, 201, 9)) == "word.low"
    assert encode_errors(m, "word", m.Word(7, True, 5, 3, 0x41, 9)) == "word.kind"
    assert encode_errors(m, "word", m.Word(7, 2, m.ObjType.BLOB, 3, 0x41, 9)) == "word.more"
    assert encode_errors(m, "word", m.Word(7, True, m.ObjType.BLOB, 4, 0x41, 9)) == "word.pr"
    assert encode_errors(m, "word", m.Word(7, True, m.ObjType.BLOB, "x", 0x41, 9)) == "word.pr"
    assert encode_errors(m, "msb", m.Msb(4, False, 0)) == "msb.version"
    assert encode_all(m, "word", ok)


# git pack object header: type in bits 4..6 of the first byte, the size's low four bits in
# bits 0..3, bit 7 says a little-endian base-128 continuation holds size >> 4
GIT = [
    (3, 5, None, "35"),
    (1, 15, None, "1f"),
    (1, 16, None, "9001"),
    (2, 1000, None, "a83e"),  # 1000 = 0x3e8: more | TREE << 4 | low 8, then high 62
    (6, 123456, 16511, "e0a43c" "ff7f"),  # OFS_DELTA: then the git offset varint
]


@pytest.mark.parametrize(("kind", "size", "base", "hexed"), GIT)
def test_git_pack_object_header(m, kind, size, base, hexed):
    v = m.PackHeader(m.ObjType(kind), base, size)
    data = bytes.fromhex(hexed)
    assert encode_all(m, "pack_header", v) == data
    assert decode_all(m, "pack_header", data) == v


def test_git_pack_header_by_hand_rule(m):
    """The header as git writes it (pack-objects.c encode_in_pack_object_header)."""
    def git_header(kind: int, size: int) -> bytes:
        c = (kind << 4) | (size & 15)
        size >>= 4
        out = bytearray()
        while size:
            out.append(c | 0x80)
            c = size & 0x7F
            size >>= 7
        out.append(c)
        return bytes(out)

    for size in (0, 15, 16, 127, 128, 2047, 2048, 1 << 20, (1 << 35) + 3):
        v = m.PackHeader(m.ObjType.BLOB, None, size)
        assert encode_all(m, "pack_header", v) == git_header(3, size)
        assert decode_all(m, "pack_header", git_header(3, size)).size == size


def test_switch_on_bit_ranges(m):
    assert decode_all(m, "ev", b"\x93\x01\x02") == m.Ev(9, 3, m.Two(0x0201))
    assert decode_all(m, "ev", b"\xff\x07") == m.Ev(15, 15, m.One(7))
    assert encode_all(m, "ev", m.Ev(9, 3, m.Two(0x0201))) == b"\x93\x01\x02"


def test_bit_fields_through_the_property_harness(m, tmp_path):
    path = tmp_path / "bitty.yaml"
    path.write_text(SCHEMA)
    fam = pipeline.run([path]).families["bitty"]
    builder = Builder(fam, m)
    for rec in fam.records:
        for kind in ("valid", "near"):
            r = run_record(builder, rec, max_examples=25, kind=kind, shrink=False)
            assert r.status == "ok", r.line()


@pytest.mark.parametrize(("field", "expected"), [
    ("{name: h, type: u8, bits: {a: {bits: [0, 3]}, b: {bits: [3, 5]}}}",
     "p.yaml:6: error: records.r.fields[0].bits.b: bit ranges overlap"),
    ("{name: h, type: u8, bits: {a: {bits: [0, 8]}}}",
     "p.yaml:6: error: records.r.fields[0].bits.a: bits outside 0..7 of u8"),
    ("{name: h, type: bytes, size: 1, bits: {a: 0}}",
     "p.yaml:6: error: records.r.fields[0].type: bits: needs a fixed-width integer type"),
    ("{name: h, type: u8, bits: {a: {bits: [0, 1], const: 4}}}",
     "p.yaml:6: error: records.r.fields[0].bits.a.const: const does not fit in 2 bit(s)"),
    ("{name: h, type: u8, bits: {a: {bit: 0, enum: nope}}}",
     "p.yaml:6: error: records.r.fields[0].bits.a.enum: unknown enum 'nope'"),
    ("{name: h, type: u8, bits: {x: 0}}",
     "p.yaml:6: error: records.r.fields[0].bits.x: bit field 'x' clashes with a field"),
    ("{name: h, type: u8, bits: {a: {bit: 0, colour: 1}}}", "p.yaml:6: error:"),
])
def test_schema_problems(tmp_path, field, expected):
    path = tmp_path / "p.yaml"
    path.write_text("bytewright: 1\nfamily: p\nrecords:\n  r:\n    fields:\n"
                    f"      - {field}\n      - {{name: x, type: u8}}\n")
    text = "\n".join(str(p) for p in pipeline.run([path]).problems)
    assert expected in text, text


ROWS = """
bytewright: 1
family: bitrows
records:
  ev:
    rows: true
    fields:
      - name: status
        type: u8
        bits: {kind: {bits: [4, 7]}, channel: {bits: [0, 3]}}
      - {name: delta, type: vlq}
"""


def test_rows_and_many_record_variants(tmp_path):
    m = build_module(ROWS, tmp_path, "bitrows")
    values = [m.Ev(9, 1, 0x80), m.Ev(8, 15, 5)]
    data = m.encode_many_ev(values)
    assert data == bytes([0x91, 0x81, 0x00, 0x8F, 0x05])
    assert m.decode_many_ev(data) == values
    rows, starts, end = m.decode_rows_ev(data)
    assert rows == [(9, 1, 0x80), (8, 15, 5)] and starts == [0, 3] and end == 5
    with pytest.raises(EncodeError) as info:
        m.encode_many_ev([values[0], m.Ev(16, 0, 0)])
    assert info.value.path == "ev[1].kind"
    with pytest.raises(EncodeError):
        m.construct_encode_ev(m.Ev(16, 0, 0))
