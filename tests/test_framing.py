"""Framing layers (``framing:``): logical records carried in fixed-size blocks of
full/first/middle/last fragments (the LevelDB/RocksDB log layout) or in pages whose lacing
table splits their body into packets (the Ogg layout), on every codec path.

The expected bytes are written here by small independent writers (CRCs from
google_crc32c and zlib), never taken from the codec under test."""

from __future__ import annotations

import dataclasses
import struct
import zlib

import google_crc32c
import pytest

from bytewright.generator import pipeline
from bytewright.runtime.errors import (
    DecodeError,
    EncodeError,
)
from bytewright.runtime.framing import FramedList

BLOCK = 64
HEADER = 7  # u16 length + u8 kind + u32 crc (the CRC sits after the piece it covers)
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4

LOG = f"""
bytewright: 1
family: flog
enums:
  fragment_kind: {{type: u8, values: {{ZERO: 0, FULL: 1, FIRST: 2, MIDDLE: 3, LAST: 4}}}}
records:
  log_fragment:
    fields:
      - {{name: length, type: u16}}
      - {{name: kind, type: fragment_kind}}
      - {{name: piece, type: bytes, size: length}}
      - {{name: crc, type: u32, checksum: {{algorithm: crc32c, covers: [kind, piece]}}}}
  blob:
    fields:
      - {{name: data, type: bytes, size: eos}}
  batch:
    fields:
      - {{name: seq, type: u32}}
      - {{name: count, type: u8}}
      - {{name: data, type: bytes, length: u16}}
  log_file:
    fields:
      - name: records
        type: blob
        repeat: eos
        framing:
          blocks: {{size: {BLOCK}, tail: zero}}
          fragment: log_fragment
          piece: piece
          kind: kind
          kinds: {{full: FULL, first: FIRST, middle: MIDDLE, last: LAST}}
  batch_log:
    fields:
      - {{name: magic, type: u16, const: 0xb10c}}
      - name: batches
        type: batch
        repeat: eos
        framing:
          blocks: {{size: {BLOCK}}}
          fragment: log_fragment
          piece: piece
          kind: kind
          kinds: {{full: 1, first: 2, middle: 3, last: 4}}
"""


def fragment(kind: int, piece: bytes) -> bytes:
    crc = google_crc32c.value(bytes([kind]) + piece)
    return struct.pack("<HB", len(piece), kind) + piece + struct.pack("<I", crc)


def reference_log(records: list[bytes], block: int = BLOCK) -> tuple[bytes, list[int]]:
    """log_writer.cc's AddRecord, written out: the bytes and the kinds in order."""
    out, kinds = bytearray(), []
    for rec in records:
        left, begin = rec, True
        while True:  # do { ... } while (left > 0), an empty record written once
            leftover = block - len(out) % block
            if leftover < HEADER:
                out += b"\x00" * leftover  # too small for a header: zeros, a new block
            avail = block - len(out) % block - HEADER
            n = min(len(left), avail)
            end = n == len(left)
            kind = (FULL if end else FIRST) if begin else (LAST if end else MIDDLE)
            out += fragment(kind, left[:n])
            kinds.append(kind)
            left, begin = left[n:], False
            if not left:
                break
    return bytes(out), kinds


def decode_all(m, rec: str, data: bytes, framed=None):
    """The value on the three decode paths (they must agree, the fragments of the framed
    field ``framed(value)`` -- by default the last field -- included)."""
    if framed is None:
        def framed(v):
            return getattr(v, dataclasses.fields(v)[-1].name)
    value, end = m.DECODERS[rec](data)
    assert end == len(data)
    for compiled in (False, True):
        other = m.CONSTRUCT_DECODERS[rec](data, compiled=compiled)
        assert other == value
        assert framed(other).fragments == framed(value).fragments
    return value


def encode_all(m, rec: str, value) -> bytes:
    data = m.ENCODERS[rec](value)
    assert m.CONSTRUCT_ENCODERS[rec](value) == data
    assert m.CONSTRUCT_ENCODERS[rec](value, compiled=True) == data
    return data


def errors(m, rec: str, data: bytes) -> set[tuple]:
    """(class, path, offset) of the failure on every decode path (a set: one = agreed)."""
    out = set()
    for dec in (m.DECODERS[rec], m.CONSTRUCT_DECODERS[rec],
                lambda d: m.CONSTRUCT_DECODERS[rec](d, compiled=True)):
        with pytest.raises(DecodeError) as info:
            dec(data)
        out.add((type(info.value).__name__, info.value.path, info.value.offset))
    return out


def encode_errors(m, rec: str, value) -> set[str]:
    out = set()
    for enc in (m.ENCODERS[rec], m.CONSTRUCT_ENCODERS[rec],
                lambda v: m.CONSTRUCT_ENCODERS[rec](v, compiled=True)):
        with pytest.raises(EncodeError) as info:
            enc(value)
        out.add(info.value.path)
    return out


@pytest.fixture
def log(schema_module):
    return schema_module(LOG, "flog")


# -- blocks ------------------------------------------------------------------------------

# lengths chosen for the writer's edge cases in 64-byte blocks with 7-byte headers:
# 0 (one empty FULL), 57 (fills a block exactly), 50 (leaves exactly a header: the next
# record starts with a zero-length FIRST), 51 (leaves header-1 = 6 bytes: zero padding),
# and records spanning two and four blocks
LENGTHS = [0, 57, 50, 10, 30, 51, 5, 200, 0, 130, 57, 1]


def test_blocks_decode_and_encode_as_the_reference_writer(log):
    records = [bytes([i + 1]) * n for i, n in enumerate(LENGTHS)]
    data, kinds = reference_log(records)
    value = decode_all(log, "log_file", data)
    assert [r.data for r in value.records] == records
    assert isinstance(value.records, FramedList)
    assert [int(f.kind) for f in value.records.fragments] == kinds
    assert b"".join(f.piece for f in value.records.fragments) == b"".join(records)
    # from a plain list of records (no fragments kept): the same bytes on both paths
    plain = log.LogFile([log.Blob(r) for r in records])
    assert encode_all(log, "log_file", plain) == data
    assert encode_all(log, "log_file", value) == data
    assert value == plain  # a framed list equals the plain list of its records
    # block fragments are derived: kept ones (even wrong ones) do not change the bytes
    value.records.fragments = value.records.fragments[:1]
    assert encode_all(log, "log_file", value) == data


def test_block_edge_cases_by_hand(log):
    # record 0 (57 bytes) fills block 0; record 1 (50 bytes) leaves exactly 7 bytes
    data = encode_all(log, "log_file", log.LogFile([log.Blob(b"a" * 57), log.Blob(b"b" * 50),
                                                    log.Blob(b"c" * 3)]))
    assert data[:64] == fragment(FULL, b"a" * 57)
    assert data[64:121] == fragment(FULL, b"b" * 50)
    assert data[121:128] == fragment(FIRST, b"")  # exactly a header left: empty FIRST
    assert data[128:] == fragment(LAST, b"c" * 3)
    # header-1 bytes left: zero padding, the next record starts the next block
    data = encode_all(log, "log_file", log.LogFile([log.Blob(b"d" * 51), log.Blob(b"")]))
    assert data == fragment(FULL, b"d" * 51) + bytes(6) + fragment(FULL, b"")
    value = decode_all(log, "log_file", data)
    assert [r.data for r in value.records] == [b"d" * 51, b""]
    # an empty log, and one empty record
    assert encode_all(log, "log_file", log.LogFile([])) == b""
    assert decode_all(log, "log_file", b"").records == []
    assert encode_all(log, "log_file", log.LogFile([log.Blob(b"")])) == fragment(FULL, b"")


def test_a_non_zero_block_tail_is_an_error_at_its_byte(log):
    data = bytearray(fragment(FULL, b"d" * 51) + bytes(6) + fragment(FULL, b"x"))
    data[60] = 1
    assert errors(log, "log_file", bytes(data)) == {("ConstraintError", "log_file.records", 60)}


def test_fragment_sequence_violations(log):
    assert errors(log, "log_file", fragment(MIDDLE, b"ab")) == {
        ("ConstraintError", "log_file.records.fragments[0]", 0)}
    assert errors(log, "log_file", fragment(FULL, b"a") + fragment(LAST, b"b")) == {
        ("ConstraintError", "log_file.records.fragments[1]", 8)}
    assert errors(log, "log_file", fragment(FIRST, b"a") + fragment(FULL, b"b")) == {
        ("ConstraintError", "log_file.records.fragments[1]", 8)}
    assert errors(log, "log_file", fragment(FIRST, b"a") + fragment(FULL, b"b")) == {
        ("ConstraintError", "log_file.records.fragments[1]", 8)}
    # a first fragment whose last never comes: the data ends inside record 1
    cut = fragment(FULL, b"z") + fragment(FIRST, b"a") + fragment(MIDDLE, b"b")
    assert errors(log, "log_file", cut) == {("TruncatedError", "log_file.records[1]", 24)}
    # a kind of the enum that is not a fragment kind
    assert errors(log, "log_file", fragment(0, b"a")) == {
        ("ConstraintError", "log_file.records.fragments[0].kind", 0)}


def test_fragment_errors_are_the_fragment_decoders(log):
    data = bytearray(reference_log([b"x" * 100])[0])
    data[64 + 3 + 2] ^= 1  # a byte of the second fragment's piece (it starts at 64 + 3)
    got = errors(log, "log_file", bytes(data))
    (cls, path, off), = got
    assert cls == "ChecksumError" and path == "log_file.records.fragments[1].crc"
    piece_len = 100 - (BLOCK - HEADER)
    assert off == 64 + 3 + piece_len  # the CRC field of fragment 1
    # a fragment running past its block is cut by the block's end: its CRC (63..67)
    over = fragment(FULL, b"y" * 60) + bytes(8)
    assert errors(log, "log_file", over) == {("TruncatedError",
                                              "log_file.records.fragments[0].crc", 63)}


def test_an_error_inside_a_record_spanning_two_blocks_is_at_its_physical_offset(log):
    # blocks count from the field's first byte (offset 2, after the magic): block 0 is
    # 2..66. A 44-byte batch in a FULL fragment (2..53), then a batch whose FIRST fragment
    # (53..66) holds its first 6 bytes and whose LAST (66..) the rest, its piece from 69:
    # the u16 length (logical bytes 5..7, split by the block end) says 1000, 3 bytes follow
    first = struct.pack("<IBH", 1, 2, 37) + b"f" * 37
    bad = struct.pack("<IBH", 9, 1, 1000) + b"xyz"
    data = struct.pack("<H", 0xB10C) + fragment(FULL, first) + fragment(FIRST, bad[:6]) \
        + fragment(LAST, bad[6:])
    assert len(fragment(FULL, first)) + 2 == 53
    # logical offset 7 (the data after the length) = the LAST piece's start (69) + 1
    assert errors(log, "batch_log", data) == {("TruncatedError", "batch_log.batches[1].data",
                                               70)}
    # trailing bytes after a whole record: reported where they start, mapped back too
    extra = struct.pack("<IBH", 1, 2, 0) + b"!!"
    data = struct.pack("<H", 0xB10C) + fragment(FULL, extra)
    assert errors(log, "batch_log", data) == {("ConstraintError", "batch_log.batches[0]",
                                               2 + 3 + 7)}


def test_blocks_count_from_the_fields_first_byte(log):
    batches = [log.Batch(i, i, bytes([i]) * (i * 9)) for i in range(9)]
    value = log.BatchLog(batches)
    data = encode_all(log, "batch_log", value)
    raws = [struct.pack("<IBH", b.seq, b.count, len(b.data)) + b.data for b in batches]
    body, _ = reference_log(raws)
    assert data == struct.pack("<H", 0xB10C) + body
    back = decode_all(log, "batch_log", data)
    assert back == value and back.batches.fragments == \
        log.decode_log_file(body)[0].records.fragments


def test_a_record_that_cannot_be_encoded_names_its_index(log):
    value = log.BatchLog([log.Batch(1, 1, b""), log.Batch(2, 300, b"")])
    assert encode_errors(log, "batch_log", value) == {"batch_log.batches[1].count"}


# -- lacing ------------------------------------------------------------------------------

PAGES = """
bytewright: 1
family: fogg
flags:
  page_flags: {type: u8, bits: {continued: 0, first_page: 1, last_page: 2}}
records:
  page:
    fields:
      - {name: capture, type: bytes, size: 4, const: "4f676753"}
      - {name: version, type: u8, const: 0}
      - {name: header_type, type: page_flags}
      - {name: granule, type: u64}
      - {name: serial, type: u32}
      - {name: sequence, type: u32}
      - {name: segments, type: u8}
      - {name: segment_table, type: u8, repeat: {count: segments}}
      - {name: body, type: bytes, size: "sum(segment_table)"}
      - {name: crc, type: u32, checksum: {algorithm: crc32, covers: preceding}}
  packet:
    fields:
      - {name: data, type: bytes, size: eos}
  stream:
    fields:
      - name: packets
        type: packet
        repeat: eos
        framing:
          fragment: page
          piece: body
          lacing: segment_table
          continued: "header_type.continued"
"""


def page(flags: int, seq: int, lacing: list[int], body: bytes, granule: int = 7) -> bytes:
    head = b"OggS" + bytes([0, flags]) + struct.pack("<QII", granule, 99, seq) \
        + bytes([len(lacing)]) + bytes(lacing)
    return head + body + struct.pack("<I", zlib.crc32(head + body))


PACKETS = [b"", b"a" * 254, b"b" * 255, b"c" * 510, b"d" * 300]


def ogg_bytes() -> bytes:
    """Five packets of 0, 254, 255, 510 and 300 bytes in three pages; page 1 ends inside
    packet 3, page 2 inside packet 4 (both next pages say continued)."""
    p = PACKETS
    return (page(2, 0, [0, 254, 255, 0, 255], p[0] + p[1] + p[2] + p[3][:255])
            + page(1, 1, [255, 0, 255], p[3][255:] + p[4][:255], granule=9)
            + page(5, 2, [45], p[4][255:], granule=11))


@pytest.fixture
def ogg(schema_module):
    return schema_module(PAGES, "fogg")


def test_lacing_decodes_packets_across_pages(ogg):
    data = ogg_bytes()
    value = decode_all(ogg, "stream", data)
    assert [p.data for p in value.packets] == PACKETS
    pages = value.packets.fragments
    assert [pg.segment_table for pg in pages] == [[0, 254, 255, 0, 255], [255, 0, 255], [45]]
    assert [pg.header_type.continued for pg in pages] == [False, True, True]
    assert [pg.granule for pg in pages] == [7, 9, 11]


def test_lacing_re_encodes_byte_identical(ogg):
    data = ogg_bytes()
    value = ogg.decode_stream(data)[0]
    assert encode_all(ogg, "stream", value) == data
    # a packet changed within its segments: lacing, bodies and CRCs follow, pages stay
    value.packets[1] = ogg.Packet(b"A" * 200)
    p = [b"", b"A" * 200] + PACKETS[2:]
    expect = (page(2, 0, [0, 200, 255, 0, 255], p[0] + p[1] + p[2] + p[3][:255])
              + ogg_bytes()[len(page(2, 0, [0, 254, 255, 0, 255], b"x" * 764)):])
    assert encode_all(ogg, "stream", value) == expect


def test_lacing_structure_that_does_not_fit_the_packets_is_an_encode_error(ogg):
    value = ogg.decode_stream(ogg_bytes())[0]
    more = FramedList(list(value.packets), value.packets.fragments)
    more[1] = ogg.Packet(b"a" * 300)  # two segments now: the pages hold one too few
    assert encode_errors(ogg, "stream", ogg.Stream(more)) == {"stream.packets.fragments"}
    # no kept pages at all: nothing to take the page headers from
    assert encode_errors(ogg, "stream", ogg.Stream([ogg.Packet(b"x")])) == {
        "stream.packets.fragments"}


def test_a_stored_continued_flag_is_derived_a_computed_one_checked(ogg, schema_module):
    value = ogg.decode_stream(ogg_bytes())[0]
    flag = FramedList(list(value.packets), list(value.packets.fragments))
    last = flag.fragments[2]
    flag.fragments[2] = ogg.Page(ogg.PageFlags(continued=False, first_page=False,
                                               last_page=True),
                                 last.granule, last.serial, last.sequence,
                                 last.segment_table, last.body)
    # header_type.continued is a stored bit: set from the packets (page 1 ended inside one)
    assert encode_all(ogg, "stream", ogg.Stream(flag)) == ogg_bytes()
    # an expression is not a place to store into: a page that disagrees is refused
    computed = schema_module(PAGES.replace('continued: "header_type.continued"',
                                           'continued: "header_type.continued and '
                                           'granule >= 0"'), "fogg2")
    value = computed.decode_stream(ogg_bytes())[0]
    assert encode_all(computed, "stream", value) == ogg_bytes()
    pages = list(value.packets.fragments)
    pages[2] = computed.Page(computed.PageFlags(continued=False, first_page=False,
                                                last_page=True),
                             last.granule, last.serial, last.sequence, last.segment_table,
                             last.body)
    wrong = computed.Stream(FramedList(list(value.packets), pages))
    assert encode_errors(computed, "stream", wrong) == {"stream.packets.fragments[2]"}


def test_lacing_decode_errors(ogg):
    p = PACKETS
    # a first page that says it continues a packet
    assert errors(ogg, "stream", page(3, 0, [4], b"abcd")) == {
        ("ConstraintError", "stream.packets.fragments[0]", 0)}
    # a page that does not continue the packet the previous one left open
    data = page(2, 0, [255], p[2]) + page(0, 1, [0], b"")
    assert errors(ogg, "stream", data) == {
        ("ConstraintError", "stream.packets.fragments[1]", 23 + 1 + 255 + 4)}
    # the data ends inside a packet
    data = page(2, 0, [255], p[2])
    assert errors(ogg, "stream", data) == {("TruncatedError", "stream.packets[0]", len(data))}
    # a bad page CRC is the page decoder's own error
    bad = bytearray(ogg_bytes())
    bad[40] ^= 0xFF
    (cls, path, _), = errors(ogg, "stream", bytes(bad))
    assert cls == "ChecksumError" and path == "stream.packets.fragments[0].crc"


# -- schema problems ---------------------------------------------------------------------

def problems(tmp_path, text: str) -> list[str]:
    path = tmp_path / "p.yaml"
    path.write_text(text)
    return [str(p) for p in pipeline.run([path]).problems]


@pytest.mark.parametrize("change, message", [
    ("fragment: log_fragment", "unknown fragment record 'nope'"),
    ("piece: piece", "has no field 'bits'"),
    ("kinds: {full: FULL", "kind 'FOUR' is not a member of enum 'fragment_kind'"),
    ("blocks: {size: 64", "is not larger than the 7-byte fragment header"),
    ("kind: kind", "kind 'length' must be a stored integer or enum field"),
])
def test_misuse_is_a_schema_problem_with_its_line(tmp_path, change, message):
    bad = {"fragment: log_fragment": "fragment: nope",
           "piece: piece": "piece: bits",
           "kinds: {full: FULL": "kinds: {full: FOUR",
           "blocks: {size: 64": "blocks: {size: 7",
           "kind: kind": "kind: length"}[change]
    text = LOG.replace(change, bad, 1)
    got = problems(tmp_path, text)
    assert any(message in p and "records.log_file.fields[0].framing" in p
               and "p.yaml:" in p for p in got), got


def test_lacing_misuse_and_typos_are_schema_problems(tmp_path):
    got = problems(tmp_path, PAGES.replace("lacing: segment_table", "lacing: granule"))
    assert any("must be a counted list of u8" in p for p in got), got
    got = problems(tmp_path, PAGES.replace('continued: "header_type.continued"',
                                           'continued: "flags.continued"'))
    assert any("continued reads ['flags']" in p for p in got), got
    got = problems(tmp_path, PAGES.replace("lacing: segment_table", "lacnig: segment_table"))
    assert any("lacnig" in p for p in got), got  # the JSON Schema refuses the typo
    got = problems(tmp_path, LOG.replace("          kind: kind\n", "", 1))
    assert any("block framing needs kind and kinds" in p for p in got), got
    got = problems(tmp_path, LOG.replace("        type: blob\n        repeat: eos\n",
                                         "        type: blob\n", 1))
    assert any("framing needs a field of a record type with repeat: eos" in p
               and "records.log_file.fields[0].framing" in p for p in got), got


# -- the codec-truth property on framed records ------------------------------------------

@pytest.mark.parametrize("text, name, record", [
    (LOG, "flog", "log_file"), (LOG, "flog", "batch_log"), (PAGES, "fogg", "stream")])
def test_drawn_framed_values_hold_the_codec_truth_property(tmp_path, schema_module, text,
                                                           name, record):
    from bytewright.properties import Builder, run_record

    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    family = pipeline.run([path]).families[name]
    builder = Builder(family, schema_module(text, name))
    # near-valid changes live in the records (a packet of bytes to the end has none)
    kinds = (("valid", 25), ("near", 10)) if record != "stream" else (("valid", 25),)
    for kind, examples in kinds:
        result = run_record(builder, record, max_examples=examples, kind=kind, shrink=False)
        assert result.status == "ok", result.line()
        if kind == "valid":
            assert result.examples >= 10, result.line()


NESTED = """
bytewright: 1
family: fnest
records:
  frag:
    fields:
      - {name: length, type: u8}
      - {name: kind, type: u8}
      - {name: piece, type: bytes, size: length}
  item:
    fields:
      - {name: a, type: u16}
      - {name: b, type: u8}
  log:
    rows: true
    fields:
      - name: items
        type: item
        repeat: eos
        framing: {blocks: {size: 16, tail: any}, fragment: frag, piece: piece, kind: kind,
                  kinds: {full: 1, first: 2, middle: 3, last: 4}}
  file:
    fields:
      - {name: version, type: u8}
      - {name: size, type: u32}
      - {name: log, type: log, size: size}
      - {name: trailer, type: u16}
"""


def test_a_framed_log_in_a_sized_section_with_any_tail(schema_module):
    m = schema_module(NESTED, "fnest")
    items = [m.Item(i, i) for i in range(9)]
    value = m.File(3, m.Log(items), 0xBEEF)
    data = encode_all(m, "file", value)
    # 5-byte fragments (2-byte header + 3-byte item): three per 16-byte block, then one
    # byte of tail, written as zero; blocks count from the section's start (offset 5)
    body = b"".join(bytes([3, 1]) + struct.pack("<HB", i, i) for i in range(9))
    blocks = [body[k:k + 15] for k in range(0, len(body), 15)]
    assert data == bytes([3]) + struct.pack("<I", 16 * 2 + 15) + b"\x00".join(blocks) \
        + struct.pack("<H", 0xBEEF)
    back = decode_all(m, "file", data, lambda v: v.log.items)
    assert back == value and len(back.log.items.fragments) == 9
    # tail: any skips the tail bytes, whatever they are
    odd = bytearray(data)
    odd[5 + 15] = 0x7F
    assert decode_all(m, "file", bytes(odd), lambda v: v.log.items) == value
    # the many-record loop and rows give the same records
    (log,) = m.decode_many_log(data, 5, len(data) - 2)
    assert log.items == items and log.items.fragments == back.log.items.fragments
    rows, starts, stop = m.decode_rows_log(data, 5, len(data) - 2)
    assert starts == [5] and stop == len(data) - 2 and list(rows[0][0]) == items


def test_inspect_shows_fragments_at_their_physical_offsets(tmp_path, log):
    from bytewright.review import inspector

    records = [bytes([i + 1]) * n for i, n in enumerate([3, 120, 50, 10])]
    data, _ = reference_log(records)
    path = tmp_path / "flog.yaml"
    path.write_text(LOG)
    fam = pipeline.run([path]).families["flog"]
    res = inspector.inspect_bytes(data, log, fam, "log_file", {})
    assert res.ok
    crcs = [n.offset for top in res.records for n in top.walk()
            if n.path == "log_file.records.crc"]
    expected, o = [], 0  # walk the reference bytes: header, piece, CRC; zero tails
    while o < len(data):
        if BLOCK - o % BLOCK < HEADER:
            o += BLOCK - o % BLOCK
            continue
        n = struct.unpack_from("<H", data, o)[0]
        expected.append(o + 3 + n)
        o += HEADER + n
    assert crcs == expected and len(expected) > len(records)
