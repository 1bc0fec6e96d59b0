"""Random access (``at:``): records found at an offset, from the end of the buffer, by a
signature searched back from the end, or one per item of a list of offsets; decoded lazily
on both codec paths (fast, Construct interpreted and compiled), placed on encode with
their offsets filled. The bytes are made by Python's zipfile or by hand."""

from __future__ import annotations

import io
import struct
import zipfile
import zlib

import pytest

from bytewright.generator import pipeline
from bytewright.runtime.errors import (
    ChecksumError,
    ConstraintError,
    DecodeError,
    EncodeError,
    TruncatedError,
)
from bytewright.runtime.located import Lazy, LazyList, Located

ZIP = """
bytewright: 1
family: ziplike
records:
  local_file:
    fields:
      - {name: signature, type: bytes, size: 4, const: "504b0304"}
      - {name: version_needed, type: u16}
      - {name: flags, type: u16}
      - {name: method, type: u16}
      - {name: mtime, type: u16}
      - {name: mdate, type: u16}
      - {name: crc32, type: u32, checksum: {algorithm: crc32, covers: [data]}}
      - {name: csize, type: u32}
      - {name: usize, type: u32}
      - {name: name_len, type: u16}
      - {name: extra_len, type: u16}
      - {name: filename, type: bytes, size: name_len}
      - {name: extra, type: bytes, size: extra_len}
      - name: data
        type: bytes
        compressed: {algorithm: deflate, when: "method == 8", stored_size: csize, plain_size: usize}
  central_entry:
    fields:
      - {name: signature, type: bytes, size: 4, const: "504b0102"}
      - {name: version_made, type: u16}
      - {name: version_needed, type: u16}
      - {name: flags, type: u16}
      - {name: method, type: u16}
      - {name: mtime, type: u16}
      - {name: mdate, type: u16}
      - {name: crc32, type: u32}
      - {name: csize, type: u32}
      - {name: usize, type: u32}
      - {name: name_len, type: u16}
      - {name: extra_len, type: u16}
      - {name: comment_len, type: u16}
      - {name: disk_start, type: u16}
      - {name: internal_attr, type: u16}
      - {name: external_attr, type: u32}
      - {name: local_offset, type: u32}
      - {name: filename, type: bytes, size: name_len}
      - {name: extra, type: bytes, size: extra_len}
      - {name: comment, type: bytes, size: comment_len}
  eocd:
    fields:
      - {name: signature, type: bytes, size: 4, const: "504b0506"}
      - {name: disk, type: u16}
      - {name: cd_disk, type: u16}
      - {name: disk_entries, type: u16, value: total_entries}
      - {name: total_entries, type: u16}
      - {name: cd_size, type: u32}
      - {name: cd_offset, type: u32}
      - {name: comment_len, type: u16}
      - {name: comment, type: bytes, size: comment_len}
  zip_file:
    fields:
      - {name: eocd, type: eocd, at: {find_last: "hex:504b0506", within: 65557}}
      - name: entries
        type: central_entry
        at: eocd.cd_offset
        repeat: {count: eocd.total_entries}
        size: eocd.cd_size
      - {name: files, type: local_file, at: {each: entries, offset: local_offset}}
"""

TIFF = """
bytewright: 1
family: tiffish
records:
  entry:
    fields:
      - {name: tag, type: u16}
      - {name: kind, type: u16}
      - {name: count, type: u32}
      - {name: value, type: u32}
  ifd:
    fields:
      - {name: n, type: u16}
      - {name: entries, type: entry, repeat: {count: n}}
      - {name: next_ifd, type: u32}
  header:
    fields:
      - {name: order, type: bytes, size: 2, const: "4949"}
      - {name: magic, type: u16, const: 42}
      - {name: first_ifd, type: u32}
  tiff:
    fields:
      - {name: header, type: header}
      - {name: ifd, type: ifd, at: header.first_ifd}
  chained_ifd:
    fields:
      - {name: n, type: u16}
      - {name: entries, type: entry, repeat: {count: n}}
      - {name: next_ifd, type: u32}
      - {name: next, type: chained_ifd, at: next_ifd, if: "next_ifd != 0"}
  chained:
    fields:
      - {name: header, type: header}
      - {name: ifd, type: chained_ifd, at: header.first_ifd}
  tiff_eager:
    fields:
      - {name: header, type: header}
      - {name: ifd, type: ifd, at: header.first_ifd, lazy: false}
"""

FOOTER = """
bytewright: 1
family: footer
records:
  tail:
    fields:
      - {name: meta_len, type: u32}
      - {name: magic, type: bytes, size: 4, const: "50415231"}
  meta:
    fields:
      - {name: data_at, type: u32}
      - {name: data_len, type: u16}
      - {name: title, type: str, length: u8}
  blob:
    fields:
      - {name: payload, type: bytes, size: eos}
  note:
    fields:
      - {name: text, type: str, length: u8}
  pq_file:
    fields:
      - {name: magic, type: bytes, size: 4, const: "50415231"}
      - {name: note_at, type: u8}
      - {name: tail, type: tail, at: {from_end: 8}}
      - {name: meta, type: meta, at: {from_end: "8 + tail.meta_len"}, size: tail.meta_len}
      - {name: data, type: blob, at: meta.data_at, size: meta.data_len}
      - {name: note, type: note, at: {offset: note_at, base: _start}}
  rel_file:
    fields:
      - {name: magic, type: u16, const: 0x1234}
      - {name: table_at, type: u8}
      - {name: pad, type: bytes, size: 3}
      - {name: table, type: note, at: {offset: table_at, base: pad}}
"""


def paths(m, record: str):
    """(label, decode -> value, encode -> bytes) of the three paths."""
    return [
        ("fast", lambda b: m.DECODERS[record](b)[0], m.ENCODERS[record]),
        ("construct", lambda b: m.CONSTRUCT_DECODERS[record](b),
         lambda v: m.CONSTRUCT_ENCODERS[record](v)),
        ("compiled", lambda b: m.CONSTRUCT_DECODERS[record](b, compiled=True),
         lambda v: m.CONSTRUCT_ENCODERS[record](v, compiled=True)),
    ]


def same_error(calls, cls, path: str, offset: int | None):
    """Every call raises ``cls`` with ``path`` and ``offset``; returns the errors."""
    errs = []
    for call in calls:
        with pytest.raises(cls) as info:
            call()
        assert info.value.path == path, (info.value.path, path)
        if offset is not None:
            assert info.value.offset == offset, (info.value.offset, offset)
        errs.append(info.value)
    return errs


CONTENT_A = b"hello hello hello hello world\n" * 20
CONTENT_B = bytes(range(256)) * 3


def python_zip(comment: bytes = b"a comment") -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(zipfile.ZipInfo("a.txt", (2020, 1, 2, 3, 4, 6)), CONTENT_A,
                   compress_type=zipfile.ZIP_STORED)
        z.writestr(zipfile.ZipInfo("dir/b.bin", (2021, 5, 6, 7, 8, 10)), CONTENT_B,
                   compress_type=zipfile.ZIP_DEFLATED)
        z.comment = comment
    return buf.getvalue()


# -- ZIP: EOCD from the end, central directory at its offset, local headers at theirs ----

def test_zip_written_by_zipfile_decodes_and_reencodes_byte_identical(schema_module):
    m = schema_module(ZIP, "ziplike")
    data = python_zip()
    eocd_at = data.rindex(b"PK\x05\x06")
    cd_size, cd_offset = struct.unpack_from("<II", data, eocd_at + 12)
    second_entry = data.index(b"PK\x01\x02", data.index(b"PK\x01\x02", cd_offset) + 1)
    local_b = struct.unpack_from("<I", data, second_entry + 42)
    for label, dec, enc in paths(m, "zip_file"):
        v = dec(data)
        assert isinstance(v.eocd, Lazy) and v.eocd.offset == eocd_at, label
        assert v.eocd.total_entries == 2 and v.eocd.comment == b"a comment"
        assert v.eocd.cd_offset == cd_offset and v.eocd.cd_size == cd_size
        assert v.entries.offset == cd_offset
        assert [e.filename for e in v.entries] == [b"a.txt", b"dir/b.bin"]
        assert isinstance(v.files, LazyList) and v.files.offsets[0] == 0
        assert v.files.offsets[1] == v.entries[1].local_offset
        # the plain bytes of a stored and of a deflated member, their CRC-32 verified
        assert v.files[0].method == 0 and v.files[0].data == CONTENT_A
        assert v.files[1].method == 8 and v.files[1].data == CONTENT_B
        assert v.entries[1].crc32 == zlib.crc32(CONTENT_B)
        assert enc(v) == data, label
    # the local header the central directory points at is the second member's
    assert m.decode_zip_file(data)[0].files.offsets[1] == local_b[0]


def test_zip_built_from_values_is_read_by_zipfile(schema_module):
    """Offsets, counts, sizes, CRCs and compressed sizes are all the encoder's."""
    m = schema_module(ZIP, "ziplike")
    body = b"derived values " * 40
    local = m.LocalFile(version_needed=20, flags=0, method=8, mtime=0, mdate=33,
                        filename=b"x.txt", extra=b"", data=body)
    entry = m.CentralEntry(version_made=20, version_needed=20, flags=0, method=8, mtime=0,
                           mdate=33, crc32=zlib.crc32(body), csize=0, usize=len(body),
                           disk_start=0, internal_attr=0, external_attr=0,
                           filename=b"x.txt", extra=b"", comment=b"")
    co = zlib.compressobj(6, zlib.DEFLATED, -15)
    entry.csize = len(co.compress(body) + co.flush())  # the central copy is a value
    value = m.ZipFile(eocd=m.Eocd(disk=0, cd_disk=0, comment=b""), entries=[entry],
                      files=[local])
    data = m.encode_zip_file(value)
    assert m.construct_encode_zip_file(value) == data
    assert m.construct_encode_zip_file(value, compiled=True) == data
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        assert z.testzip() is None
        assert z.read("x.txt") == body
    back = m.decode_zip_file(data)[0]
    assert back == value  # filled offsets are not compared; everything else is
    assert back.eocd.total_entries == 1
    assert struct.unpack_from("<HH", data, len(data) - 22 + 8) == (1, 1)  # value: total
    assert back.eocd.cd_size == 46 + 5
    # local header, then the central directory, then the end record
    assert back.files.offsets == [0] and back.entries.offset == back.eocd.cd_offset
    assert back.eocd.offset == len(data) - 22


def test_zip_member_damage_surfaces_on_first_use_with_offset_and_path(schema_module):
    m = schema_module(ZIP, "ziplike")
    data = bytearray(python_zip())
    second = m.decode_zip_file(bytes(data))[0].files.offsets[1]
    data[second + 30 + 9 + 5] ^= 0xFF  # a byte of the deflated member's stream
    data = bytes(data)
    for _label, dec, _enc in paths(m, "zip_file"):
        v = dec(data)  # only the end record and the directory are read so far
        assert v.files[0].data == CONTENT_A
        with pytest.raises(ConstraintError) as info:
            len(v.files[1].data)
        # at the deflated bytes' absolute start (30-byte header, 9-byte name); the stored
        # plain size (768) caps the output of the damaged stream
        assert info.value.path == "zip_file.files[1].data"
        assert info.value.offset == second + 30 + 9
        assert "768" in str(info.value)


def test_zip_crc_of_the_plain_bytes_is_checked(schema_module):
    m = schema_module(ZIP, "ziplike")
    data = bytearray(python_zip())
    data[14:18] = struct.pack("<I", zlib.crc32(CONTENT_A) ^ 1)  # first member's CRC
    calls = [lambda d=dec: d(bytes(data)).files[0] for _l, dec, _e in paths(m, "zip_file")]
    errs = same_error(calls, ChecksumError, "zip_file.files[0].crc32", 14)
    assert errs[0].expected == zlib.crc32(CONTENT_A)


def test_signature_not_found_within_the_last_bytes(schema_module):
    m = schema_module(ZIP, "ziplike")
    data = python_zip()
    broken = data.replace(b"PK\x05\x06", b"PK\x05\x07")
    calls = [lambda d=dec: d(broken) for _l, dec, _e in paths(m, "zip_file")]
    same_error(calls, ConstraintError, "zip_file.eocd", 0)
    # found only when it starts within the last 65,557 bytes
    short = schema_module(ZIP.replace("within: 65557", "within: 40"), "zipshort")
    with_comment = python_zip(comment=b"c" * 30)  # end record 22 + 30 bytes > 40
    lo = len(with_comment) - 40
    calls = [lambda d=dec: d(with_comment) for _l, dec, _e in paths(short, "zip_file")]
    errs = same_error(calls, ConstraintError, "zip_file.eocd", lo)
    assert "504b0506" in str(errs[0]) and "40" in str(errs[0])


def test_directory_past_the_end_is_truncated(schema_module):
    m = schema_module(ZIP, "ziplike")
    data = bytearray(python_zip())
    at = data.rindex(b"PK\x05\x06")
    cd_size, cd_offset = struct.unpack_from("<II", data, at + 12)
    data[at + 12:at + 16] = struct.pack("<I", len(data))  # cd_size past the buffer
    calls = [lambda d=dec: list(d(bytes(data)).entries) for _l, dec, _e in paths(m, "zip_file")]
    same_error(calls, TruncatedError, "zip_file.entries", cd_offset)


# -- TIFF-like: a header, an IFD at the offset it names -----------------------------------

def tiff_bytes(first_ifd: int = 8) -> bytes:
    ifd = struct.pack("<H", 2) + struct.pack("<HHII", 256, 3, 1, 640) + \
        struct.pack("<HHII", 257, 3, 1, 480) + struct.pack("<I", 0)
    return b"II" + struct.pack("<HI", 42, first_ifd) + ifd


def test_tiff_ifd_at_its_offset_on_every_path(schema_module):
    m = schema_module(TIFF, "tiffish")
    data = tiff_bytes()
    for label, dec, enc in paths(m, "tiff"):
        v = dec(data)
        assert v.ifd.offset == 8, label
        assert [(e.tag, e.value) for e in v.ifd.entries] == [(256, 640), (257, 480)]
        assert v.header.first_ifd == 8
        assert enc(v) == data, label


def test_tiff_offset_filled_on_encode(schema_module):
    m = schema_module(TIFF, "tiffish")
    value = m.Tiff(m.Header(), m.Ifd([m.Entry(256, 3, 1, 640), m.Entry(257, 3, 1, 480)],
                                     next_ifd=0))
    for _label, _dec, enc in paths(m, "tiff"):
        assert enc(value) == tiff_bytes()
    # a value may ask for a place: the gap before it is zero
    placed = m.Tiff(m.Header(), Located(value.ifd, offset=16))
    data = m.encode_tiff(placed)
    assert data == b"II" + struct.pack("<HI", 42, 16) + bytes(8) + tiff_bytes()[8:]
    assert m.construct_encode_tiff(placed, compiled=True) == data
    assert m.decode_tiff(data)[0] == value


def test_chain_of_directories_each_at_the_offset_the_previous_names(schema_module):
    m = schema_module(TIFF, "tiffish")
    first = struct.pack("<HHHII", 1, 256, 3, 1, 640) + struct.pack("<I", 34)
    second = struct.pack("<HHHII", 1, 257, 3, 1, 480) + struct.pack("<I", 0)
    data = b"II" + struct.pack("<HI", 42, 8) + first + bytes(8) + second
    for label, dec, enc in paths(m, "chained"):
        v = dec(data)
        assert v.ifd.entries[0].value == 640 and v.ifd.next.offset == 34, label
        assert v.ifd.next.entries[0].value == 480 and v.ifd.next.next is None
        assert enc(v) == data, label
    # built without offsets: each directory right after the one naming it
    fresh = m.Chained(m.Header(), m.ChainedIfd([m.Entry(256, 3, 1, 640)], next=m.ChainedIfd(
        [m.Entry(257, 3, 1, 480)])))
    packed = b"II" + struct.pack("<HI", 42, 8) + first[:-4] + struct.pack("<I", 26) + second
    for _label, _dec, enc in paths(m, "chained"):
        assert enc(fresh) == packed
    assert m.decode_chained(packed)[0] == fresh


def test_a_cycle_of_offsets_is_refused_when_read_eagerly(schema_module):
    m = schema_module(TIFF.replace('if: "next_ifd != 0"}', 'if: "next_ifd != 0", lazy: false}'),
                      "tiffcycle")
    ifd = struct.pack("<HHHII", 1, 256, 3, 1, 640) + struct.pack("<I", 8)  # names itself
    data = b"II" + struct.pack("<HI", 42, 8) + ifd
    calls = [lambda d=dec: d(data).ifd.n for _l, dec, _e in paths(m, "chained")]
    errs = same_error(calls, ConstraintError, "chained.ifd.next", 8)
    assert "cycle" in str(errs[0])


def test_offset_out_of_range(schema_module):
    m = schema_module(TIFF, "tiffish")
    data = tiff_bytes(first_ifd=999)
    calls = [lambda d=dec: d(data).ifd.n for _l, dec, _e in paths(m, "tiff")]
    errs = same_error(calls, ConstraintError, "tiff.ifd", 999)
    assert "out of range" in str(errs[0])
    # decoded eagerly, the error comes with the record itself
    calls = [lambda d=dec: d(data) for _l, dec, _e in paths(m, "tiff_eager")]
    same_error(calls, ConstraintError, "tiff_eager.ifd", 999)


def test_eager_and_lazy_values_compare_equal(schema_module):
    m = schema_module(TIFF, "tiffish")
    data = tiff_bytes()
    lazy = m.decode_tiff(data)[0]
    eager = m.decode_tiff_eager(data)[0]
    assert not lazy.ifd.loaded and eager.ifd.loaded
    assert lazy.ifd == eager.ifd and lazy.ifd.loaded
    bad = tiff_bytes()[:-2]  # the IFD's next-offset cut short
    for _label, dec, _enc in paths(m, "tiff"):
        dec(bad)  # nothing read past the header yet
    calls = [lambda d=dec: d(bad) for _l, dec, _e in paths(m, "tiff_eager")]
    same_error(calls, TruncatedError, "tiff_eager.ifd.next_ifd", 34)


def test_overlapping_placement_is_an_encode_error(schema_module):
    m = schema_module(TIFF, "tiffish")
    value = m.decode_tiff(tiff_bytes())[0]
    clash = m.Tiff(value.header, Located(value.ifd.get(), offset=4))  # over the header
    for _label, _dec, enc in paths(m, "tiff"):
        with pytest.raises(EncodeError) as info:
            enc(clash)
        assert info.value.path == "tiff.ifd" and "overlapping placement" in str(info.value)


# -- a footer: magic at the end, the metadata's length before it --------------------------

def footer_bytes() -> bytes:
    payload = b"hello"
    note = bytes([3]) + b"abc"
    meta = struct.pack("<IH", 9, len(payload)) + bytes([2]) + b"t1"
    # magic, note_at, note, payload, meta, meta length, magic
    return b"PAR1" + bytes([5]) + note + payload + meta + struct.pack("<I", len(meta)) + b"PAR1"


def test_footer_length_then_magic(schema_module):
    m = schema_module(FOOTER, "footer")
    data = footer_bytes()
    for label, dec, enc in paths(m, "pq_file"):
        v = dec(data)
        assert v.tail.meta_len == 9 and v.tail.offset == len(data) - 8, label
        assert v.meta.title == "t1" and v.meta.offset == len(data) - 8 - 9
        assert v.data.payload == b"hello" and v.data.offset == 9
        assert v.note.text == "abc" and v.note.offset == 5
        assert enc(v) == data, label
    # built from values: sequential bytes, the note after them, then what is found from
    # the end, the first declared last
    fresh = m.PqFile(tail=m.Tail(), meta=m.Meta(title="t1"), data=m.Blob(b"hello"),
                     note=m.Note("abc"))
    for _label, _dec, enc in paths(m, "pq_file"):
        assert enc(fresh) == data


def test_offset_relative_to_a_field_of_the_record(schema_module):
    m = schema_module(FOOTER, "footer")
    data = bytes([0x34, 0x12, 4, 1, 2, 3, 0, 3]) + b"abc"  # the table 4 bytes after pad
    for label, dec, enc in paths(m, "rel_file"):
        v = dec(data)
        assert v.table.text == "abc" and v.table.offset == 7 and v.table_at == 4, label
        assert enc(v) == data, label
    fresh = m.RelFile(pad=b"\x01\x02\x03", table=m.Note("abc"))
    for _label, _dec, enc in paths(m, "rel_file"):
        assert enc(fresh) == bytes([0x34, 0x12, 3, 1, 2, 3, 3]) + b"abc"


BMP = """
bytewright: 1
family: bmpish
records:
  bmp:
    fields:
      - {name: magic, type: bytes, size: 2, const: "424d"}
      - {name: file_size, type: u32}
      - {name: reserved, type: u32, reserved: zero}
      - {name: pixels_at, type: u32}
      - {name: width, type: i32}
      - {name: palette, type: u32, repeat: {count: 2}}
      - {name: pixels, type: bytes, at: pixels_at, size: "4 * width"}
"""


def test_located_bytes_at_an_offset_bmp_style(schema_module):
    m = schema_module(BMP, "bmpish")
    head = b"BM" + struct.pack("<IIIi", 42, 0, 32, 2) + struct.pack("<2I", 0, 0xFFFFFF)
    data = head + bytes(6) + bytes(range(8))  # 6 bytes of gap, then the pixels at 32
    for label, dec, enc in paths(m, "bmp"):
        v = dec(data)
        assert v.pixels.offset == 32 and v.pixels == bytes(range(8)), label
        assert enc(v) == data, label
    fresh = m.Bmp(file_size=42, width=2, palette=[0, 0xFFFFFF], pixels=bytes(range(8)))
    want = head[:10] + struct.pack("<I", 26) + head[14:] + bytes(range(8))
    for _label, _dec, enc in paths(m, "bmp"):
        assert enc(fresh) == want  # the pixels right after the header, their offset filled
    fresh.pixels = bytes(range(7))  # a size the encoder checks (4 * width), cannot fill
    for _label, _dec, enc in paths(m, "bmp"):
        with pytest.raises(EncodeError) as info:
            enc(fresh)
        assert info.value.path == "bmp.pixels" and "takes 7 bytes" in str(info.value)


# -- schema problems ----------------------------------------------------------------------

def problems(tmp_path, text: str) -> list[str]:
    path = tmp_path / "p.yaml"
    path.write_text(text)
    return [str(p) for p in pipeline.run([path]).problems]


@pytest.mark.parametrize("field, message", [
    ("{name: x, type: u32, at: 0}", "is a record"),
    ("{name: x, type: inner, at: nowhere}", "'nowhere' is no field"),
    ("{name: x, type: inner, at: {each: nope, offset: o}}", "is no earlier field"),
    ("{name: x, type: inner, at: {offset: 4, base: elsewhere}}", "neither _start"),
    ("{name: x, type: inner, at: {offset: 4, base: o}}", None),
    ("{name: x, type: inner, at: 4, repeat: eos}", "needs its size"),
    ("{name: x, type: inner, at: 4, valid: {min: 1}}", "takes only"),
    ("{name: x, type: inner, at: 4, if: 'missing > 1'}", "'missing' is no field"),
    ("{name: x, type: inner, at: {find_last: 'hex:0102030405', within: 2}}", "longer than"),
])
def test_misuse_is_a_schema_problem(tmp_path, field, message):
    text = f"""bytewright: 1
family: bad
records:
  inner:
    fields:
      - {{name: a, type: u8}}
  holder:
    fields:
      - {{name: o, type: u8}}
      - {field}
"""
    found = problems(tmp_path, text)
    if message is None:  # `o` is at offset 0: a fine base
        assert found == []
        return
    assert any(message in p and "p.yaml:10:" in p and "records.holder.fields[1]" in p
               for p in found), found


def test_a_base_field_needs_a_fixed_offset(tmp_path):
    text = """bytewright: 1
family: bad
records:
  inner:
    fields:
      - {name: a, type: u8}
  holder:
    fields:
      - {name: name, type: str, length: u8}
      - {name: o, type: u8}
      - {name: x, type: inner, at: {offset: 4, base: o}}
"""
    found = problems(tmp_path, text)
    assert any("p.yaml:11:" in p and "'o' is not at a fixed offset" in p for p in found), found


def test_a_record_with_located_fields_is_not_a_sequential_field(tmp_path):
    text = """bytewright: 1
family: bad
records:
  inner:
    fields:
      - {name: a, type: u8}
  holder:
    fields:
      - {name: o, type: u8}
      - {name: x, type: inner, at: o}
  outer:
    fields:
      - {name: h, type: holder}
"""
    found = problems(tmp_path, text)
    assert any("records.holder" in p and "not as a field of another record" in p
               for p in found), found


def test_json_schema_rejects_a_misspelt_location(tmp_path):
    text = """bytewright: 1
family: bad
records:
  inner:
    fields:
      - {name: a, type: u8}
  holder:
    fields:
      - {name: x, type: inner, at: {find_lst: "PK", within: 9}}
"""
    found = problems(tmp_path, text)
    assert any("records.holder.fields[0].at" in p for p in found), found


# -- the codec-truth property harness -----------------------------------------------------

@pytest.mark.parametrize("schema, family, records", [
    (TIFF, "tiffish", ["tiff", "tiff_eager", "chained"]),
    (FOOTER, "footer", ["pq_file"]),
    (ZIP, "ziplike", ["zip_file"]),
    (BMP, "bmpish", ["bmp"]),
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


def test_kaitai_export_reads_located_fields_as_instances(tmp_path):
    from bytewright.review import export_ksy

    src = tmp_path / "footer.yaml"
    src.write_text(FOOTER)
    exp = export_ksy.export_family(pipeline.run([src]).families["footer"])
    inst = exp.ksy["types"]["pq_file"]["instances"]
    assert inst["tail"] == {"pos": "_io.size - (8)", "type": "tail"}
    assert inst["meta"]["size"] == "tail.meta_len"
    assert inst["data"] == {"pos": "meta.data_at", "type": "blob", "size": "meta.data_len"}
    src = tmp_path / "ziplike.yaml"
    src.write_text(ZIP)
    exp = export_ksy.export_family(pipeline.run([src]).families["ziplike"])
    assert any("zip_file.eocd" in n and "not expressible" in n for n in exp.notes)


def test_inspect_traces_located_structures_where_they_lie(schema_module, tmp_path):
    from bytewright.review import inspector

    m = schema_module(ZIP, "ziplike")
    src = tmp_path / "zl.yaml"
    src.write_text(ZIP)
    fam = pipeline.run([src]).families["ziplike"]
    data = python_zip()
    res = inspector.inspect_bytes(data, m, fam, "zip_file", {})
    assert res.failure is None
    nodes = {n.path: n for top in res.records for n in top.walk()}
    eocd_at = data.rindex(b"PK\x05\x06")
    assert nodes["zip_file.eocd"].offset == eocd_at
    assert nodes["zip_file.eocd"].size == len(data) - eocd_at
    second = struct.unpack_from("<I", data, nodes["zip_file.entries[1]"].offset + 42)[0]
    assert nodes["zip_file.files[1]"].offset == second
    assert nodes["zip_file.files[1].crc32"].checksum == "ok"
    bad = bytearray(data)
    bad[14] ^= 1  # the first member's CRC
    res = inspector.inspect_bytes(bytes(bad), m, fam, "zip_file", {})
    assert res.failure is not None and res.failure.path == "zip_file.files[0].crc32"
    assert res.failure.offset == 14
    assert [n.path for n in res.bad_checksums] == ["zip_file.files[0].crc32"]


def test_diff_reports_a_changed_location_as_wire_breaking(tmp_path, capsys):
    from bytewright.cli.main import main as cli_main

    old, new = tmp_path / "old.yaml", tmp_path / "new.yaml"
    old.write_text(ZIP)
    new.write_text(ZIP.replace("within: 65557", "within: 1024"))
    code = cli_main(["diff", str(old), str(new)])
    out = capsys.readouterr().out
    assert code == 1
    assert "W021 located-field-changed: ziplike.zip_file.eocd" in out
    assert "within 65557 -> 1024" in out


def _force(v, names):
    """Every located structure of ``v`` (decoded), followed through ``names``."""
    out = []
    for n in names:
        x = getattr(v, n)
        out.append(list(x) if isinstance(x, (LazyList, list)) or (
            isinstance(x, Lazy) and isinstance(x.get(), list)) else x.get())
    return out


@pytest.mark.parametrize("which", ["zip", "tiff", "footer"])
def test_corrupted_inputs_give_the_same_value_or_error_on_every_path(schema_module, which):
    import random

    schema, family, record, data, names = {
        "zip": (ZIP, "ziplike", "zip_file", python_zip(), ["eocd", "entries", "files"]),
        "tiff": (TIFF, "tiffish", "tiff", tiff_bytes(), ["ifd"]),
        "footer": (FOOTER, "footer", "pq_file", footer_bytes(),
                   ["tail", "meta", "data", "note"]),
    }[which]
    m = schema_module(schema, family)
    rnd = random.Random(11)
    for _ in range(120):
        d = bytearray(data)
        if rnd.random() < 0.3:
            d = d[:rnd.randrange(len(d))]
        else:
            for _ in range(rnd.randrange(1, 4)):
                d[rnd.randrange(len(d))] = rnd.randrange(256)
        outcomes = []
        for _label, dec, _enc in paths(m, record):
            try:
                outcomes.append(("ok", _force(dec(bytes(d)), names)))
            except DecodeError as exc:  # nothing but the project's own errors
                outcomes.append((type(exc).__name__, exc.path, exc.offset))
        assert outcomes[0] == outcomes[1] == outcomes[2], (bytes(d).hex(), outcomes)
