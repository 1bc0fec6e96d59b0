"""Derived values on encode: lengths, counts, compressed and uncompressed sizes, offsets
and checksums are computed by the encoders (both codec paths), never given as
constructor arguments. Expected bytes are computed here independently (zlib, struct)."""

from __future__ import annotations

import dataclasses
import struct
import zlib

import pytest

from bytewright.generator import pipeline
from bytewright.runtime.errors import ConstraintError, DecodeError, TruncatedError

SCHEMA = """
bytewright: 1
family: derived
records:
  member:
    fields:
      - {name: method, type: u8}
      - {name: crc, type: u32, checksum: {algorithm: crc32, covers: [data]}}
      - {name: csize, type: u32}
      - {name: usize, type: u32}
      - {name: name_len, type: u16be}
      - {name: name, type: str, size: name_len}
      - name: data
        type: bytes
        compressed: {algorithm: deflate, when: "method == 8", stored_size: csize, plain_size: usize}
  item:
    fields:
      - {name: key, type: bytes, length: uleb128}
      - {name: value, type: u16}
  packed:
    fields:
      - {name: n, type: u32}
      - {name: csize, type: u16}
      - {name: usize, type: uleb128}
      - name: items
        type: item
        repeat: {count: n}
        compressed: {algorithm: zlib, stored_size: csize, plain_size: usize}
      - {name: trailer, type: u8}
  reading:
    fields:
      - {name: sensor, type: zigzag}
      - {name: label, type: str, length: uleb128}
  avro_block:
    fields:
      - {name: count, type: zigzag}
      - {name: size, type: zigzag}
      - name: objects
        type: reading
        repeat: {count: count}
        compressed: {algorithm: deflate, stored_size: size}
      - {name: sync, type: bytes, size: 16}
"""


def deflate(raw: bytes) -> bytes:
    co = zlib.compressobj(6, zlib.DEFLATED, -15)
    return co.compress(raw) + co.flush()


def member_bytes(method: int, name: str, data: bytes) -> bytes:
    stored = deflate(data) if method == 8 else data
    return (struct.pack("<BIII", method, zlib.crc32(data), len(stored), len(data))
            + struct.pack(">H", len(name)) + name.encode() + stored)


def every_path(m, record: str, value) -> bytes:
    data = m.ENCODERS[record](value)
    assert m.CONSTRUCT_ENCODERS[record](value) == data
    assert m.CONSTRUCT_ENCODERS[record](value, compiled=True) == data
    assert m.DECODERS[record](data) == (value, len(data))
    assert m.CONSTRUCT_DECODERS[record](data) == value
    assert m.CONSTRUCT_DECODERS[record](data, compiled=True) == value
    # the many-record encoder and the one-loop reader agree with the single ones
    assert getattr(m, f"encode_many_{record}")([value, value]) == data + data
    assert getattr(m, f"decode_many_{record}")(data + data) == [value, value]
    return data


def model_names(cls) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


@pytest.mark.parametrize("method", [8, 0])
def test_compressed_and_plain_sizes_and_crc_are_derived(schema_module, method):
    m = schema_module(SCHEMA, "derived")
    body = b"the same words, the same words, the same words " * 9
    value = m.Member(method=method, name="a.txt", data=body)
    assert every_path(m, "member", value) == member_bytes(method, "a.txt", body)
    # nothing derived is a constructor argument
    assert model_names(m.Member) == ["method", "name", "data"]


def test_compressed_records_with_stored_and_plain_sizes(schema_module):
    m = schema_module(SCHEMA, "derived")
    items = [m.Item(b"k" * i, 1000 + i) for i in range(5)]
    value = m.Packed(items=items, trailer=7)
    plain = b"".join(bytes([i]) + b"k" * i + struct.pack("<H", 1000 + i) for i in range(5))
    frame = zlib.compress(plain, 6)
    want = struct.pack("<IH", 5, len(frame)) + bytes([len(plain)]) + frame + b"\x07"
    assert every_path(m, "packed", value) == want
    assert model_names(m.Packed) == ["items", "trailer"]


def zigzag(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        b = z & 0x7F
        z >>= 7
        out.append(b | (0x80 if z else 0))
        if not z:
            return bytes(out)


@pytest.mark.parametrize("n", [2, 40])
def test_varint_stored_size_takes_its_real_width(schema_module, n):
    """Avro's block: a zigzag count and a zigzag byte size of the compressed objects."""
    m = schema_module(SCHEMA, "derived")
    objs = [m.Reading(-i * 1000, f"sensor-{i * 7919 % 1000}") for i in range(n)]
    value = m.AvroBlock(objects=objs, sync=bytes(range(16)))
    plain = b"".join(zigzag(-i * 1000) + bytes([len(f"sensor-{i * 7919 % 1000}")])
                     + f"sensor-{i * 7919 % 1000}".encode() for i in range(n))
    frame = deflate(plain)
    want = zigzag(n) + zigzag(len(frame)) + frame + bytes(range(16))
    assert every_path(m, "avro_block", value) == want
    assert (len(frame) > 63) == (n == 40)  # the large one needs a two-byte size
    assert model_names(m.AvroBlock) == ["objects", "sync"]


def test_stored_size_bounds_the_compressed_bytes(schema_module):
    m = schema_module(SCHEMA, "derived")
    good = member_bytes(8, "a", b"x" * 100)
    csize = struct.unpack_from("<I", good, 5)[0]
    data_at = 1 + 12 + 2 + 1
    cut = good[:-1]  # the deflated bytes one short of their stored size
    for call in (lambda: m.decode_member(cut), lambda: m.construct_decode_member(cut),
                 lambda: m.construct_decode_member(cut, compiled=True)):
        with pytest.raises(TruncatedError) as info:
            call()
        assert info.value.path == "member.data" and info.value.offset == data_at
        assert info.value.expected == csize


def test_plain_size_is_checked_and_caps_decompression(schema_module):
    m = schema_module(SCHEMA, "derived")
    body = b"y" * 100
    bad = bytearray(member_bytes(8, "a", body))
    bad[9:13] = struct.pack("<I", 99)  # the stored plain size one short
    for call in (lambda: m.decode_member(bytes(bad)),
                 lambda: m.construct_decode_member(bytes(bad)),
                 lambda: m.construct_decode_member(bytes(bad), compiled=True)):
        with pytest.raises(DecodeError) as info:
            call()
        assert info.value.path == "member.data" and info.value.offset == 16


def test_crc_of_the_plain_bytes_is_verified(schema_module):
    m = schema_module(SCHEMA, "derived")
    bad = bytearray(member_bytes(8, "a", b"z" * 50))
    bad[1] ^= 1
    for call in (lambda: m.decode_member(bytes(bad)),
                 lambda: m.construct_decode_member(bytes(bad)),
                 lambda: m.construct_decode_member(bytes(bad), compiled=True)):
        with pytest.raises(DecodeError) as info:
            call()
        assert info.value.path == "member.crc" and info.value.offset == 1
        assert info.value.expected == zlib.crc32(b"z" * 50)


OFFSETS = """
bytewright: 1
family: offsets
records:
  body:
    fields:
      - {name: count, type: u8}
      - {name: values, type: u16, repeat: {count: count}}
  head:
    fields:
      - {name: magic, type: bytes, size: 2, const: "4844"}
      - {name: body_at, type: u32}
      - {name: body_len, type: u16}
  file:
    fields:
      - {name: head, type: head}
      - {name: body, type: body, at: head.body_at, size: head.body_len}
"""


def test_offsets_and_sizes_of_later_structures_are_derived(schema_module):
    m = schema_module(OFFSETS, "offsets")
    # not constructor arguments: keyword fields with a default, never compared
    assert m.Head() == m.Head(body_at=123, body_len=9)
    value = m.File(m.Head(), m.Body([1, 2, 3]))
    want = b"HD" + struct.pack("<IH", 8, 7) + bytes([3]) + struct.pack("<3H", 1, 2, 3)
    for enc in (m.encode_file, m.construct_encode_file,
                lambda v: m.construct_encode_file(v, compiled=True)):
        assert enc(value) == want
    back = m.decode_file(want)[0]
    assert back == value and back.head.body_at == 8 and back.head.body_len == 7
    # a size that disagrees with the structure found there
    bad = b"HD" + struct.pack("<IH", 8, 9) + want[8:] + b"\0\0"
    for call in (lambda: m.decode_file(bad)[0].body.count,
                 lambda: m.construct_decode_file(bad).body.count,
                 lambda: m.construct_decode_file(bad, compiled=True).body.count):
        with pytest.raises(ConstraintError) as info:
            call()
        assert info.value.path == "file.body" and info.value.offset == 15


def problems(tmp_path, text: str) -> list[str]:
    path = tmp_path / "p.yaml"
    path.write_text(text)
    return [str(p) for p in pipeline.run([path]).problems]


@pytest.mark.parametrize("fields, message", [
    ("""      - {name: data, type: bytes, compressed: {algorithm: zlib, stored_size: later, plain_size: u}}
      - {name: later, type: u32}""", "is no field before"),
    ("""      - {name: label, type: bytes, size: 2}
      - {name: data, type: bytes, compressed: {algorithm: zlib, stored_size: label, plain_size: u}}""",
     "not a plain integer"),
    ("""      - {name: c, type: u32}
      - {name: data, type: bytes, compressed: {algorithm: zlib, length: u32, stored_size: c, plain_size: u}}""",
     "keep one"),
    ("""      - {name: data, type: bytes, size: u, compressed: {algorithm: zlib, plain_size: u}}""",
     "keep one"),
])
def test_misused_sizes_are_schema_problems(tmp_path, fields, message):
    text = f"""bytewright: 1
family: bad
records:
  rec:
    fields:
      - {{name: u, type: u32}}
{fields}
"""
    found = problems(tmp_path, text)
    assert any(message in p and "p.yaml:" in p and "records.rec.fields[" in p
               for p in found), found


@pytest.mark.parametrize("schema, family, records", [
    (SCHEMA, "derived", ["member", "packed", "avro_block"]),
    (OFFSETS, "offsets", ["file"]),
])
def test_drawn_values_agree_on_every_path(schema_module, tmp_path, schema, family, records):
    from bytewright.properties import Builder, run_record

    m = schema_module(schema, family)
    src = tmp_path / f"{family}.yaml"
    src.write_text(schema)
    builder = Builder(pipeline.run([src]).families[family], m)
    for rec in records:
        for kind in ("valid", "near"):
            r = run_record(builder, rec, max_examples=10, kind=kind, shrink=False)
            assert r.status == "ok", r.line()
