"""Absent values: a length or count prefix equal to a declared sentinel (``absent: -1``)
decodes the field to ``None`` and ``None`` encodes as the sentinel, on both codec paths;
optional fields (``if:``, ``absent:``) are not required constructor arguments."""

from __future__ import annotations

import pytest

from bytewright.generator import pipeline
from bytewright.properties import Builder, run_record
from bytewright.runtime.errors import ConstraintError, EncodeError, TruncatedError

from .conftest import build_module
from .three_paths import decode_all, encode_all, errors_all

# Kafka protocol primitives: NULLABLE_BYTES (INT32 length, -1 = null), NULLABLE_STRING
# (INT16 length, -1 = null), ARRAY (INT32 count, -1 = null), COMPACT_* (unsigned varint
# N + 1, 0 = null: here a zigzag varint with -1 as the sentinel plays the same part)
SCHEMA = """
bytewright: 1
family: nulls
endian: be
records:
  kafka:
    fields:
      - {name: key, type: bytes, length: i32, absent: -1}
      - {name: client, type: str, length: i16, absent: -1}
      - {name: partitions, type: i32, repeat: {prefix: i32, absent: -1}}
      - {name: tail, type: u8}
  varint_prefixed:
    fields:
      - {name: data, type: bytes, length: zigzag, absent: -1}
      - {name: ids, type: u8, repeat: {prefix: sleb128, absent: -1}}
  unsigned_sentinel:
    fields:
      - {name: blob, type: bytes, length: u32, absent: 0xFFFFFFFF}
      - {name: zero_means_none, type: bytes, length: u8, absent: 0}
  derived:
    fields:
      - {name: key_len, type: i32, absent: -1}
      - {name: key, type: bytes, size: key_len}
      - {name: n, type: i16, absent: -1}
      - {name: ids, type: u8, repeat: {count: n}}
  maybe:
    fields:
      - {name: flags, type: u8}
      - {name: extra, type: u16, if: "flags & 1"}
      - {name: count, type: u8}
      - {name: note, type: bytes, length: u8, absent: 255}
"""


@pytest.fixture(scope="module")
def m(tmp_path_factory):
    return build_module(SCHEMA, tmp_path_factory.mktemp("nulls"), "nulls")


def test_kafka_nullable_fields(m):
    present = m.Kafka(b"k1", "cli", [7, -1], 9)
    data = encode_all(m, "kafka", present)
    assert data == (b"\x00\x00\x00\x02k1" + b"\x00\x03cli"
                    + b"\x00\x00\x00\x02" + b"\x00\x00\x00\x07\xff\xff\xff\xff" + b"\x09")
    assert decode_all(m, "kafka", data) == present
    absent = m.Kafka(None, None, None, 9)
    data = encode_all(m, "kafka", absent)
    assert data == b"\xff\xff\xff\xff" + b"\xff\xff" + b"\xff\xff\xff\xff" + b"\x09"
    back = decode_all(m, "kafka", data)
    assert back.key is None and back.client is None and back.partitions is None
    empty = m.Kafka(b"", "", [], 0)  # empty is not absent
    assert encode_all(m, "kafka", empty) == bytes(4) + bytes(2) + bytes(4) + b"\x00"
    assert decode_all(m, "kafka", bytes(4) + bytes(2) + bytes(4) + b"\x00") == empty


def test_other_negative_lengths_and_truncation(m):
    assert errors_all(m, "kafka", b"\xff\xff\xff\xfe") == (ConstraintError, "kafka.key", 4)
    assert errors_all(m, "kafka", b"\xff\xff\xff\xff\xff\xfe") == \
        (ConstraintError, "kafka.client", 6)
    assert errors_all(m, "kafka", b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xfe") == \
        (ConstraintError, "kafka.partitions", 10)
    assert errors_all(m, "kafka", b"\x00\x00\x00\x05ab") == (TruncatedError, "kafka.key", 4)
    assert errors_all(m, "kafka", b"\xff\xff") == (TruncatedError, "kafka.key.length", 0)
    assert errors_all(m, "kafka", b"xx\xff\xff\xff\xff\xff", 2) == \
        (TruncatedError, "kafka.client.length", 6)
    assert errors_all(m, "kafka", b"\xff\xff\xff\xff\xff\xff\xff") == \
        (TruncatedError, "kafka.partitions.count", 6)


def test_a_size_or_count_field_with_a_sentinel(m):
    """The sentinel on the size/count field itself: the same bytes as ``length:``."""
    assert list(m.Derived.__dataclass_fields__) == ["key", "ids"]
    v = m.Derived(b"ab", [1, 2, 3])
    data = encode_all(m, "derived", v)
    assert data == b"\x00\x00\x00\x02ab" + b"\x00\x03\x01\x02\x03"
    assert decode_all(m, "derived", data) == v
    none = m.Derived(None, None)
    assert encode_all(m, "derived", none) == b"\xff\xff\xff\xff\xff\xff"
    assert decode_all(m, "derived", b"\xff\xff\xff\xff\xff\xff") == none
    assert errors_all(m, "derived", b"\xff\xff\xff\xfd") == (ConstraintError, "derived.key", 4)


def test_varint_prefixes(m):
    v = m.VarintPrefixed(None, None)
    assert encode_all(m, "varint_prefixed", v) == b"\x01\x7f"  # zigzag -1, sleb128 -1
    assert decode_all(m, "varint_prefixed", b"\x01\x7f") == v
    v = m.VarintPrefixed(b"abc", [1, 2])
    assert encode_all(m, "varint_prefixed", v) == b"\x06abc\x02\x01\x02"
    assert decode_all(m, "varint_prefixed", b"\x06abc\x02\x01\x02") == v


def test_unsigned_sentinels_and_a_value_that_would_read_as_none(m):
    v = m.UnsignedSentinel(None, None)
    assert encode_all(m, "unsigned_sentinel", v) == b"\xff\xff\xff\xff\x00"
    assert decode_all(m, "unsigned_sentinel", b"\xff\xff\xff\xff\x00") == v
    assert decode_all(m, "unsigned_sentinel", b"\x00\x00\x00\x00\x01z") == \
        m.UnsignedSentinel(b"", b"z")
    # an empty value's length is the sentinel 0: it would decode as None
    for call in (m.encode_unsigned_sentinel, m.construct_encode_unsigned_sentinel):
        with pytest.raises(EncodeError) as info:
            call(m.UnsignedSentinel(b"", b""))
        assert info.value.path == "unsigned_sentinel.zero_means_none"


def test_optional_fields_default_to_none(m):
    v = m.Maybe(0, count=3)  # extra and note left out
    assert v.extra is None and v.note is None
    assert encode_all(m, "maybe", v) == b"\x00\x03\xff"
    assert decode_all(m, "maybe", b"\x00\x03\xff") == v
    assert m.Maybe(1, 513, 3) == m.Maybe(flags=1, extra=513, count=3, note=None)
    with pytest.raises(TypeError, match="count"):
        m.Maybe(1)  # a required field after an optional one is still required
    assert m.Kafka(tail=1) == m.Kafka(None, None, None, 1)


def test_absent_values_through_the_property_harness(m, tmp_path):
    path = tmp_path / "nulls.yaml"
    path.write_text(SCHEMA)
    fam = pipeline.run([path]).families["nulls"]
    builder = Builder(fam, m)
    for rec in fam.records:
        for kind in ("valid", "near"):
            r = run_record(builder, rec, max_examples=30, kind=kind, shrink=False)
            assert r.status == "ok", r.line()


@pytest.mark.parametrize(("field", "expected"), [
    ("{name: a, type: bytes, size: 4, absent: -1}",
     "p.yaml:6: error: records.r.fields[0].absent: absent: needs a length:"),
    ("{name: a, type: bytes, length: u8, absent: -1}",
     "p.yaml:6: error: records.r.fields[0].absent: sentinel -1 does not fit u8"),
    ("{name: a, type: bytes, length: uleb128, absent: -1}",
     "p.yaml:6: error: records.r.fields[0].absent: sentinel -1 is negative but uleb128"),
    ("{name: a, type: u8, repeat: {count: 3, absent: -1}}",
     "p.yaml:6: error: records.r.fields[0].repeat.absent: absent: needs a length:"),
    ("{name: a, type: bytes, length: i8, absent: -1, if: 'x > 0'}",
     "p.yaml:6: error: records.r.fields[0].absent: absent: cannot be combined with if:"),
    ("{name: a, type: bytes, length: i8, absent: none}", "p.yaml:6: error:"),
    ("{name: a, type: i8, absent: -1}",
     "p.yaml:6: error: records.r.fields[0].absent: absent: on an integer field needs the "
     "field it sizes or counts right after it"),
])
def test_schema_problems(tmp_path, field, expected):
    path = tmp_path / "p.yaml"
    path.write_text("bytewright: 1\nfamily: p\nrecords:\n  r:\n    fields:\n"
                    f"      - {field}\n      - {{name: x, type: u8}}\n")
    text = "\n".join(str(p) for p in pipeline.run([path]).problems)
    assert expected in text, text


def test_a_sentinel_size_read_elsewhere_is_a_problem(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("bytewright: 1\nfamily: p\nrecords:\n  r:\n    fields:\n"
                    "      - {name: n, type: i8, absent: -1}\n"
                    "      - {name: d, type: bytes, size: n}\n"
                    "      - {name: e, type: u8, if: 'n > 2'}\n")
    text = "\n".join(str(p) for p in pipeline.run([path]).problems)
    assert ("p.yaml:6: error: records.r.fields[0].absent: a size or count with absent: "
            "is read by e (it is the prefix of d)") in text, text
