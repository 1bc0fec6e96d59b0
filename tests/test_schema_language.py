"""Schema-language constructs HTT does not use, proven on small schemas."""

from __future__ import annotations

import numpy as np
import pytest

from bytewright.runtime.errors import ChecksumError, ConstraintError, DecodeError

VIEWS = """
bytewright: 1
family: views
records:
  node:
    fields:
      - {name: id, type: u32}
      - {name: score, type: f32}
      - {name: tag, type: bytes, size: 4}
  table:
    fields:
      - {name: count, type: u16}
      - {name: nodes, type: node, repeat: {count: count}, view: numpy}
      - {name: weights, type: i16be, repeat: {count: count}, view: numpy}
"""


def test_fixed_stride_numpy_view(schema_module):
    m = schema_module(VIEWS)
    nodes = np.array([(1, 0.5, b"abcd"), (2, -1.0, b"wxyz")], dtype=m.Node_DTYPE)
    value = m.Table(nodes, np.array([7, -3], dtype=">i2"))
    data = m.encode_table(value)
    assert len(data) == 2 + 2 * 12 + 2 * 2
    back, end = m.decode_table(data)
    assert end == len(data) and back == value
    assert np.shares_memory(back.nodes, np.frombuffer(data, np.uint8))  # zero-copy
    assert back.nodes["id"].tolist() == [1, 2] and back.weights.tolist() == [7, -3]
    assert m.construct_decode_table(data) == back
    assert m.construct_decode_table(data, compiled=True) == back
    assert m.construct_encode_table(back) == data
    with pytest.raises(DecodeError) as exc:
        m.decode_table(data[:-1])
    assert exc.value.path.startswith("table.weights")


MISC = """
bytewright: 1
family: misc
endian: be
enums:
  kind: {type: u8, retired: [3], values: {A: 1, B: 2}}
records:
  item:
    fields:
      - {name: magic, type: bytes, size: 2, const: "beef"}
      - {name: n, type: uleb128}
      - {name: kind, type: kind}
      - {name: big, type: u128}
      - {name: body, type: bytes, length: u16le}
      - {name: zero, type: u8, reserved: zero}
      - {name: pad, type: padding, align: 8}
      - {name: skip, type: u8}
      - name: crc
        type: u32
        checksum: {algorithm: crc32c, covers: preceding, except: [skip]}
      - {name: digest, type: bytes, size: 32, checksum: {algorithm: blake3, covers: [body]}}
      - {name: xx, type: u64, checksum: {algorithm: xxh3_64, covers: [n, kind]}}
      - {name: rest, switch: kind, cases: {A: empty}, default: bytes}
"""


def test_varint_be_u128_padding_and_checksums(schema_module):
    m = schema_module(MISC)
    v = m.Item(300, m.Kind.A, (1 << 100) + 5, b"hello", 9, None)
    data = m.encode_item(v)
    assert data[:2] == b"\xbe\xef" and data[2:4] == b"\xac\x02"
    assert int.from_bytes(data[5:21], "big") == (1 << 100) + 5
    back, end = m.decode_item(data)
    assert back == v and end == len(data)
    assert m.construct_decode_item(data) == v
    assert m.construct_encode_item(v) == data
    # the 'skip' byte is outside crc32c coverage: changing it keeps the crc valid
    skip_at = data.index(b"hello") + 5 + 1
    skip_at += (-skip_at) % 8
    changed = bytearray(data)
    changed[skip_at] = 42
    assert m.decode_item(bytes(changed))[0].skip == 42
    flipped = bytearray(data)
    flipped[data.index(b"hello") + 1] ^= 1  # inside body: crc32c and blake3 both cover it
    with pytest.raises(ChecksumError):
        m.decode_item(bytes(flipped))
    other = m.Item(300, m.Kind.B, 1, b"", 0, b"tail bytes")
    assert m.decode_item(m.encode_item(other))[0].rest == b"tail bytes"


def test_retired_and_unknown_enum_values_refused(schema_module):
    m = schema_module(MISC)
    data = bytearray(m.encode_item(m.Item(1, m.Kind.A, 0, b"", 0, None)))
    data[3] = 3
    with pytest.raises(ConstraintError) as exc:
        m.decode_item(bytes(data))
    assert exc.value.path == "item.kind" and exc.value.offset == 3


KINDS = """
bytewright: 1
family: kinds
records:
  blob: {fields: [{name: payload, type: bytes, length: u32}]}
  marker: {fields: [{name: n, type: u8}]}
  record:
    fields:
      - {name: kind, type: bytes, size: 16}
      - name: body
        switch: kind
        cases:
          "hex:00000000000000000000000000000001": blob
          "hex:000000000000000000000000000000ff": marker
        default: bytes
"""


def test_switch_on_byte_string_tags(schema_module):
    m = schema_module(KINDS)
    one = bytes(15) + b"\x01"
    v = m.Record(one, m.Blob(b"xyz"))
    data = m.encode_record(v)
    assert m.decode_record(data)[0] == v
    assert m.construct_decode_record(data, compiled=True) == v
    unknown = m.Record(bytes(16), b"opaque")  # unknown kinds are kept, not refused
    assert m.decode_record(m.encode_record(unknown))[0] == unknown


DEFERRED = """
bytewright: 1
family: deferred
records:
  frame:
    fields:
      - {name: magic, type: bytes, size: 2, const: "5a47"}
      - {name: payload_len, type: u32}
      - {name: header_checksum, type: u64, checksum: {algorithm: xxh3_64, covers: preceding}}
      - {name: payload, type: bytes, size: payload_len}
      - {name: checksum, type: u64, checksum: {algorithm: xxh3_64, covers: preceding}}
"""


def test_checksum_over_a_later_patched_size_is_deferred(schema_module):
    """A header checksum covering a size field derived from a later field is computed after
    the size is patched (both paths), so the size stays out of the object model."""
    import struct

    from bytewright.runtime.checksums import xxh3_64
    m = schema_module(DEFERRED)
    assert [f for f in m.Frame.__dataclass_fields__] == ["payload"]
    data = m.encode_frame(m.Frame(b"hello"))
    head = b"ZG" + struct.pack("<I", 5)
    assert data[:6] == head and data[6:14] == struct.pack("<Q", xxh3_64(head))
    assert data[-8:] == struct.pack("<Q", xxh3_64(data[:-8]))
    assert m.decode_frame(data) == (m.Frame(b"hello"), len(data))
    assert m.construct_encode_frame(m.Frame(b"hello")) == data
    assert m.construct_decode_frame(data) == m.Frame(b"hello")
    assert m.construct_decode_frame(data, compiled=True) == m.Frame(b"hello")
    bad = bytearray(data)
    bad[2] = 4
    with pytest.raises(ChecksumError):
        m.decode_frame(bytes(bad))
