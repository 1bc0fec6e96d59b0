"""A signed length prefix (sleb128, zigzag, a signed fixed-width integer) that decodes
negative is a ConstraintError at the first byte of the data, with the field's path, on
every decoder: fast checked ``_d_``, optimistic ``_u_``, many/prefix, and Construct
interpreted and compiled. It is never a backwards read nor a bare ValueError."""

from __future__ import annotations

import pytest

from bytewright.runtime.errors import ConstraintError

SCHEMA = """
bytewright: 1
family: negs
records:
  rec:
    fields:
      - {name: key, type: bytes, length: zigzag}
  text:
    fields:
      - {name: tag, type: u8}
      - {name: name, type: str, length: sleb128}
      - {name: after, type: u8}
  fixed:
    fields:
      - {name: blob, type: bytes, length: i16le}
"""


def _error(fn, data: bytes) -> tuple:
    with pytest.raises(ConstraintError) as info:
        fn(data)
    e = info.value
    return type(e), e.path, e.offset, "negative size" in str(e)


# zigzag 0x03 is -2 and 0x01 is -1; sleb128 0x7f is -1; i16le ff ff is -1.
@pytest.mark.parametrize("record,data,path,offset", [
    ("rec", b"\x03", "rec.key", 1),
    ("rec", b"\x01", "rec.key", 1),
    ("rec", b"\x03abc", "rec.key", 1),
    ("text", b"\x09\x7f\x00", "text.name", 2),
    ("text", b"\x09\x7e\x00\x00", "text.name", 2),
    ("fixed", b"\xff\xff", "fixed.blob", 2),
])
def test_negative_length_prefix_is_a_constraint_error_on_every_path(schema_module, record,
                                                                    data, path, offset):
    m = schema_module(SCHEMA, "negs")
    want = (ConstraintError, path, offset, True)
    paths = {
        "fast": lambda d: m.DECODERS[record](d),
        "optimistic": lambda d: getattr(m, f"_u_{record}")(memoryview(d), 0, len(d)),
        "many": lambda d: list(getattr(m, f"decode_many_{record}")(d)),
        "construct": lambda d: m.CONSTRUCT_DECODERS[record](d),
        "compiled": lambda d: m.CONSTRUCT_DECODERS[record](d, compiled=True),
    }
    got = {name: _error(fn, data) for name, fn in paths.items()}
    assert got["fast"] == want, got
    assert got["construct"] == want, got
    assert got["compiled"] == want, got
    # the optimistic twin raises the same class for the same rule
    assert got["optimistic"][0] is ConstraintError and got["optimistic"][3], got
    # the many-record decoder names the record's index in the log
    assert got["many"] == (ConstraintError, path.replace(".", "[0].", 1), offset, True), got


def test_zero_and_positive_signed_prefixes_still_decode(schema_module):
    m = schema_module(SCHEMA, "negs")
    for rec, value, data in (("rec", m.Rec(b""), b"\x00"), ("rec", m.Rec(b"ab"), b"\x04ab"),
                             ("text", m.Text(9, "é", 1), b"\x09\x02\xc3\xa9\x01"),
                             ("fixed", m.Fixed(b"z"), b"\x01\x00z")):
        assert m.ENCODERS[rec](value) == data
        assert m.DECODERS[rec](data) == (value, len(data))
        assert m.CONSTRUCT_DECODERS[rec](data) == value
        assert m.CONSTRUCT_DECODERS[rec](data, compiled=True) == value


def test_decode_prefix_stops_at_a_negative_prefix(schema_module):
    """The shape the fuzzers found: a good record, then one whose prefix is negative."""
    m = schema_module(SCHEMA, "negs")
    out = m.decode_prefix_rec(b"\x04ab\x03")
    records = out[0] if isinstance(out, tuple) else out
    assert list(records) == [m.Rec(b"ab")]
