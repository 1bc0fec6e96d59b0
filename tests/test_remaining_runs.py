"""``encode_many_<r>`` of records whose layout reads ``_remaining`` (docs/schema-language.md,
"Positions in expressions"): each record is decoded back where it lies in the whole
buffer, so a run that is not self-delimiting is refused, naming the first record that
does not read back, instead of giving bytes that decode to other records."""

from __future__ import annotations

import pytest

from bytewright.runtime.errors import EncodeError

SCHEMA = """
bytewright: 1
family: rr
endian: le
records:
  frame:
    fields:
      - {name: kind, type: u8}
      - {name: body, type: bytes, size: _remaining}
  tailed:
    fields:
      - {name: kind, type: u8}
      - {name: tail, type: u8, if: "_remaining >= 1"}
"""


@pytest.fixture
def rr(schema_module):
    return schema_module(SCHEMA, "rr")


def test_a_record_reading_to_the_region_end_is_refused_in_a_run(rr):
    a, b = rr.Frame(kind=1, body=b"xy"), rr.Frame(kind=2, body=b"z")
    assert rr.encode_frame(a) == b"\x01xy"
    assert rr.encode_many_frame([a]) == b"\x01xy"  # the last record reads to the end
    assert rr.encode_many_frame([]) == b""
    # b"\x01xy\x02z" would read back as one frame with body b"xy\x02z"
    assert rr.decode_frame(b"\x01xy\x02z")[0] == rr.Frame(kind=1, body=b"xy\x02z")
    with pytest.raises(EncodeError) as err:
        rr.encode_many_frame([a, b])
    assert err.value.path == "frame[0]"
    assert "only a decoder knows" in err.value.message


def test_a_run_that_reads_back_is_encoded_one_by_one(rr):
    full = rr.Tailed(kind=1, tail=7)
    assert rr.encode_many_tailed([full, full]) == b"\x01\x07\x01\x07"
    # a record without its tail, followed by another: the next record's byte is read as
    # its tail
    bare = rr.Tailed(kind=3, tail=None)
    assert rr.encode_many_tailed([full, bare]) == b"\x01\x07\x03"
    with pytest.raises(EncodeError) as err:
        rr.encode_many_tailed([full, bare, full])
    assert err.value.path == "tailed[1]"
