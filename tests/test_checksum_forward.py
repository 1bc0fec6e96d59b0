"""Checksums that come before, or sit inside, the bytes they cover: forward lists,
``following``, ``all`` with a filler, a list naming the checksum itself, spans over
sibling fields (a repeat of records included) and absolute file ranges. Every form on
every path (fast; Construct interpreted and compiled), decode and encode, against bytes
built here with checksums computed independently (zlib, google_crc32c, own code); plus
the built-in internet16, parametrised crc and crc32_ogg against published check values."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import google_crc32c
import pytest

from bytewright.generator import pipeline
from bytewright.runtime import registry
from bytewright.runtime.errors import ChecksumError, DecodeError, EncodeError, TruncatedError

# -- independent reference implementations -------------------------------------------


def crc32c(data: bytes) -> int:
    return google_crc32c.value(bytes(data))


def ones_complement16(data: bytes) -> int:
    """RFC 1071 by the book: add 16-bit big-endian words with end-around carry."""
    if len(data) % 2:
        data += b"\x00"
    total = 0
    for i in range(0, len(data), 2):
        total += (data[i] << 8) | data[i + 1]
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def ogg_crc(data: bytes) -> int:
    """Ogg's CRC bit by bit: poly 0x04C11DB7, init 0, MSB first, no final xor."""
    reg = 0
    for byte in data:
        reg ^= byte << 24
        for _ in range(8):
            reg = ((reg << 1) ^ 0x04C11DB7) if reg & 0x80000000 else reg << 1
            reg &= 0xFFFFFFFF
    return reg


DECODERS = ("fast", "construct", "compiled")


def decode(m, record: str, data: bytes, path: str, offset: int = 0, **params):
    if path == "fast":
        value, end = getattr(m, f"decode_{record}")(data, offset, **params)
        assert end == len(data)
        return value
    return getattr(m, f"construct_decode_{record}")(data, offset, compiled=path == "compiled",
                                                    **params)


def encode_both(m, record: str, value, **params) -> bytes:
    """Both encoders (Construct interpreted and compiled) write identical bytes."""
    data = getattr(m, f"encode_{record}")(value, **params)
    assert getattr(m, f"construct_encode_{record}")(value, **params) == data
    assert getattr(m, f"construct_encode_{record}")(value, compiled=True, **params) == data
    return data


def round_trip(m, record: str, value, want: bytes, **params) -> None:
    """``value`` encodes to exactly ``want`` on both paths, which decodes back on all."""
    assert encode_both(m, record, value, **params) == want
    for path in DECODERS:
        assert decode(m, record, want, path, **params) == value, path


def errors(m, record: str, data: bytes, offset: int = 0, **params) -> list[tuple]:
    """(class, path, offset, expected, found) per decode path."""
    out = []
    for path in DECODERS:
        with pytest.raises(DecodeError) as info:
            decode(m, record, data, path, offset, **params)
        e = info.value
        out.append((type(e).__name__, e.path, e.offset, e.expected, e.found))
    return out


def flip(data: bytes, at: int) -> bytes:
    bad = bytearray(data)
    bad[at] ^= 0x40
    return bytes(bad)


def problems(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "p.yaml"
    path.write_text(text)
    return [str(p) for p in pipeline.run([path]).problems]


# -- forward: a LevelDB-style fragment, CRC-32C first over kind + piece ------------------

LOG = """
bytewright: 1
family: fwdlog
records:
  frag:
    fields:
      - {name: crc, type: u32, checksum: {algorithm: crc32c, covers: [kind, piece]}}
      - {name: length, type: u16}
      - {name: kind, type: u8}
      - {name: piece, type: bytes, size: length}
  log:
    fields:
      - {name: items, type: frag, repeat: eos}
  sized_first:
    fields:
      # covers the size of a field written after it: patched once the piece is written
      - {name: crc, type: u32, checksum: {algorithm: crc32c, covers: [length, kind]}}
      - {name: length, type: u16}
      - {name: kind, type: u8}
      - {name: piece, type: bytes, size: length}
"""


def frag_bytes(kind: int, piece: bytes) -> bytes:
    rest = struct.pack("<HB", len(piece), kind) + piece
    return struct.pack("<I", crc32c(rest[2:])) + rest


def test_forward_crc_over_the_fields_after_it(schema_module):
    m = schema_module(LOG)
    want = frag_bytes(1, b"hello")
    assert want[:4] == struct.pack("<I", google_crc32c.value(b"\x01hello"))
    round_trip(m, "frag", m.Frag(kind=1, piece=b"hello"), want)
    round_trip(m, "frag", m.Frag(kind=4, piece=b""), frag_bytes(4, b""))
    # a flipped covered byte: the checksum field's offset and path on every path
    got = errors(m, "frag", flip(want, 8))
    assert {g[:3] for g in got} == {("ChecksumError", "frag.crc", 0)}
    assert {g[3:] for g in got} == {(crc32c(flip(want, 8)[6:]), crc32c(want[6:]))}
    # decoded at an offset of a larger buffer: the offset is the buffer's
    got = errors(m, "frag", b"pad" + flip(want, 8), offset=3)
    assert {g[:3] for g in got} == {("ChecksumError", "frag.crc", 3)}
    # the length is not covered: a wrong one is a truncation, not a checksum error
    assert {g[0] for g in errors(m, "frag", want[:4] + b"\x09" + want[5:])} == {
        "TruncatedError"}


def test_forward_crc_in_a_list_carries_the_item_index(schema_module):
    m = schema_module(LOG)
    pieces = [(1, b"a"), (2, b"bcd"), (3, b""), (4, b"efghij")]
    want = b"".join(frag_bytes(k, p) for k, p in pieces)
    log = m.Log(items=[m.Frag(kind=k, piece=p) for k, p in pieces])
    round_trip(m, "log", log, want)
    assert m.encode_many_frag(log.items) == want
    assert m.decode_many_frag(want) == log.items
    third = len(frag_bytes(1, b"a")) + len(frag_bytes(2, b"bcd"))  # items[2] starts here
    bad = flip(want, third + 6)  # items[2].kind
    assert {g[:3] for g in errors(m, "log", bad)} == {("ChecksumError", "log.items[2].crc",
                                                       third)}
    with pytest.raises(ChecksumError) as info:
        m.decode_many_frag(bad)
    assert (info.value.path, info.value.offset) == ("frag[2].crc", third)
    with pytest.raises(ChecksumError) as info:
        list(m.iter_frag(bad))
    assert (info.value.path, info.value.offset) == ("frag[2].crc", third)


def test_forward_crc_over_a_size_patched_later(schema_module):
    m = schema_module(LOG)
    rest = struct.pack("<HB", 3, 7) + b"xyz"
    want = struct.pack("<I", crc32c(rest[:3])) + rest
    round_trip(m, "sized_first", m.SizedFirst(kind=7, piece=b"xyz"), want)
    # the piece is not covered: changing it keeps the checksum valid
    other = want[:7] + b"XYZ"
    assert decode(m, "sized_first", other, "fast").piece == b"XYZ"
    assert {g[:3] for g in errors(m, "sized_first", flip(want, 6))} == {
        ("ChecksumError", "sized_first.crc", 0)}


# -- following / spans ---------------------------------------------------------------------

FOLLOW = """
bytewright: 1
family: fwdspan
records:
  following:
    fields:
      - {name: tag, type: u8}
      - {name: crc, type: u32be, checksum: {algorithm: crc32, covers: following}}
      - {name: n, type: u16}
      - {name: data, type: bytes, size: n}
      - {name: extra, type: u8, if: "n > 2"}
  span_to:
    fields:
      - {name: crc, type: u32, checksum: {algorithm: crc32, covers: [{from: a, to: b}]}}
      - {name: a, type: u8}
      - {name: b, type: bytes, length: u8}
      - {name: c, type: u8}
  entry:
    fields:
      - {name: key, type: u16}
      - {name: value, type: bytes, length: u8}
  summary:
    fields:
      - {name: count, type: u8}
      - {name: records, type: entry, repeat: {count: count}}
      - {name: pad, type: u8}
      - {name: summary_crc, type: u32, checksum: {algorithm: crc32, covers: [{from: records}]}}
"""


def test_following_covers_every_later_field_present(schema_module):
    m = schema_module(FOLLOW)
    body = struct.pack("<H", 3) + b"abc" + b"\x09"
    want = b"\x05" + struct.pack(">I", zlib.crc32(body)) + body
    round_trip(m, "following", m.Following(tag=5, data=b"abc", extra=9), want)
    short = struct.pack("<H", 1) + b"z"  # no `extra`: the condition is false
    round_trip(m, "following", m.Following(tag=5, data=b"z", extra=None),
               b"\x05" + struct.pack(">I", zlib.crc32(short)) + short)
    assert {g[:3] for g in errors(m, "following", flip(want, len(want) - 1))} == {
        ("ChecksumError", "following.crc", 1)}
    # the tag before the checksum is not covered
    assert decode(m, "following", b"\x06" + want[1:], "compiled").tag == 6


def test_span_from_to_covers_only_its_fields(schema_module):
    m = schema_module(FOLLOW)
    covered = b"\x07" + b"\x02hi"
    want = struct.pack("<I", zlib.crc32(covered)) + covered + b"\x63"
    round_trip(m, "span_to", m.SpanTo(a=7, b=b"hi", c=0x63), want)
    assert decode(m, "span_to", want[:-1] + b"\x00", "construct").c == 0  # c: outside
    assert {g[:3] for g in errors(m, "span_to", flip(want, 6))} == {
        ("ChecksumError", "span_to.crc", 0)}


def test_span_from_a_repeat_of_records_to_the_checksum(schema_module):
    m = schema_module(FOLLOW)
    entries = [(1, b"one"), (2, b""), (300, b"three")]
    recs = b"".join(struct.pack("<HB", k, len(v)) + v for k, v in entries)
    covered = recs + b"\xaa"  # from the records up to the checksum: the pad too
    want = b"\x03" + covered + struct.pack("<I", zlib.crc32(covered))
    value = m.Summary(records=[m.Entry(key=k, value=v) for k, v in entries], pad=0xAA)
    round_trip(m, "summary", value, want)
    # the count is before the span: not covered (a changed count is another error)
    got = errors(m, "summary", flip(want, 4))  # records[0].value
    assert {g[:3] for g in got} == {("ChecksumError", "summary.summary_crc", len(want) - 4)}


# -- self-covering: IPv4 internet checksum, Ogg page, tar header -----------------------

IPV4 = """
bytewright: 1
family: ipv4x
records:
  ipv4:
    fields:
      - {name: version_ihl, type: u8}
      - {name: tos, type: u8}
      - {name: total_length, type: u16be}
      - {name: ident, type: u16be}
      - {name: frag, type: u16be}
      - {name: ttl, type: u8}
      - {name: proto, type: u8}
      - {name: hdr_check, type: u16be, checksum: {algorithm: internet16, covers: all, filler: 0}}
      - {name: src, type: u32be}
      - {name: dst, type: u32be}
  packets:
    fields:
      - {name: items, type: ipv4, repeat: eos}
"""

IP_HEADER = bytes.fromhex("45000073000040004011b861c0a80001c0a800c7")


def test_ipv4_header_checksum_covers_itself_as_zeros(schema_module):
    m = schema_module(IPV4)
    assert ones_complement16(IP_HEADER[:10] + b"\0\0" + IP_HEADER[12:]) == 0xB861
    value = m.Ipv4(version_ihl=0x45, tos=0, total_length=0x73, ident=0, frag=0x4000, ttl=0x40,
                   proto=0x11, src=0xC0A80001, dst=0xC0A800C7)
    round_trip(m, "ipv4", value, IP_HEADER)
    got = errors(m, "ipv4", flip(IP_HEADER, 15))
    assert {g[:3] for g in got} == {("ChecksumError", "ipv4.hdr_check", 10)}
    assert {g[4] for g in got} == {0xB861}
    # a wrong stored checksum alone is refused too (it is read as zeros, never as itself)
    assert {g[1] for g in errors(m, "ipv4", flip(IP_HEADER, 10))} == {"ipv4.hdr_check"}
    items = [value, value, value]
    data = encode_both(m, "packets", m.Packets(items=items))
    assert data == IP_HEADER * 3
    assert {g[:3] for g in errors(m, "packets", flip(data, 40 + 19))} == {
        ("ChecksumError", "packets.items[2].hdr_check", 50)}


OGG = """
bytewright: 1
family: oggx
records:
  page:
    fields:
      - {name: capture, type: u32be, const: 0x4f676753}
      - {name: version, type: u8}
      - {name: header_type, type: u8}
      - {name: granule, type: u64}
      - {name: serial, type: u32}
      - {name: seq, type: u32}
      - name: page_crc
        type: u32
        checksum:
          algorithm: crc32_ogg
          covers: [capture, version, header_type, granule, serial, seq, page_crc, segments,
                   lacing, body]
      - {name: segments, type: u8}
      - {name: lacing, type: u8, repeat: {count: segments}}
      - {name: body, type: bytes, size: eos}
  param_page:
    fields:
      - {name: capture, type: u32be, const: 0x4f676753}
      - name: page_crc
        type: u32
        checksum:
          algorithm: crc
          params: {width: 32, poly: 0x04c11db7, init: 0, refin: false, refout: false, xorout: 0}
          covers: all
      - {name: body, type: bytes, size: eos}
"""


def ogg_page(body: bytes, seq: int) -> bytes:
    lacing = bytes([255] * (len(body) // 255) + [len(body) % 255])
    head = b"OggS" + struct.pack("<BBQII", 0, 2, 0, 0x1234, seq)
    tail = bytes([len(lacing)]) + lacing + body
    crc = ogg_crc(head + b"\0\0\0\0" + tail)
    return head + struct.pack("<I", crc) + tail


def test_ogg_page_crc_inside_its_own_coverage(schema_module):
    m = schema_module(OGG)
    body = bytes(range(256)) * 2
    want = ogg_page(body, 7)
    lacing = list(want[27:27 + want[26]])
    value = m.Page(version=0, header_type=2, granule=0, serial=0x1234, seq=7,
                   lacing=lacing, body=body)
    round_trip(m, "page", value, want)
    got = errors(m, "page", flip(want, len(want) - 1))
    assert {g[:3] for g in got} == {("ChecksumError", "page.page_crc", 22)}
    assert {g[4] for g in got} == {struct.unpack_from("<I", want, 22)[0]}
    # the parametrised CRC computes the same CRC from its six parameters
    plain = b"OggS" + b"\0\0\0\0" + b"payload"
    pwant = b"OggS" + struct.pack("<I", ogg_crc(plain)) + b"payload"
    round_trip(m, "param_page", m.ParamPage(body=b"payload"), pwant)
    assert {g[1] for g in errors(m, "param_page", flip(pwant, 9))} == {"param_page.page_crc"}


TAR_PLUGIN = '''
def tarsum(data, seed=None):
    # tar: the unsigned byte sum as six octal digits, a NUL and a space
    return b"%06o\\0 " % sum(bytes(data))


def register(reg):
    reg.add_checksum("tarsum", bits=64, func=tarsum, digest=True, safe=True)
'''

TAR = """
bytewright: 1
family: tarx
plugins: ["{plugin}:register"]
records:
  header:
    fields:
      - {{name: name, type: bytes, size: 16}}
      - {{name: chksum, type: bytes, size: 8,
         checksum: {{algorithm: tarsum, covers: all, filler: "        "}}}}
      - {{name: typeflag, type: u8}}
      - {{name: pad, type: bytes, size: 7}}
"""


@pytest.fixture
def tar_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "bw_tarsum_plugin.py").write_text(TAR_PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "bw_tarsum_plugin"


def test_tar_style_checksum_reads_itself_as_eight_spaces(schema_module, tar_plugin):
    m = schema_module(TAR.format(plugin=tar_plugin))
    name, pad = b"hello.txt".ljust(16, b"\0"), b"\0" * 7
    total = sum(name) + 8 * 0x20 + ord("0") + sum(pad)
    want = name + (b"%06o" % total) + b"\0 " + b"0" + pad
    value = m.Header(name=name, typeflag=ord("0"), pad=pad)
    round_trip(m, "header", value, want)
    got = errors(m, "header", flip(want, 2))
    assert {g[:3] for g in got} == {("ChecksumError", "header.chksum", 16)}


# -- absolute ranges of the user's buffer --------------------------------------------------

FILE = """
bytewright: 1
family: filerange
records:
  trailer:
    fields:
      - {name: file_crc, type: u32, checksum: {algorithm: crc32, covers: [{file: [0, 12]}]}}
      - {name: mark, type: u8}
  whole:
    fields:
      - {name: magic, type: u32}
      - {name: body, type: bytes, size: 8}
      - {name: tail, type: trailer}
  inside:
    fields:
      # the range holds the checksum itself: its own bytes read as the filler
      - {name: pre, type: u32}
      - {name: crc, type: u32, checksum: {algorithm: crc32, covers: [{file: [0, 12]}], filler: 0xee}}
      - {name: post, type: u32}
  bounded:
    params: {upto: {type: int}}
    fields:
      - {name: crc, type: u32, checksum: {algorithm: crc32, covers: [{file: [4, upto]}]}}
      - {name: data, type: bytes, size: 4}
"""


def test_file_range_is_absolute_in_the_buffer(schema_module):
    m = schema_module(FILE)
    head = struct.pack("<I", 0xFEEDBEEF) + b"8 bytes!"
    want = head + struct.pack("<I", zlib.crc32(head)) + b"\x01"
    value = m.Whole(magic=0xFEEDBEEF, body=b"8 bytes!", tail=m.Trailer(mark=1))
    round_trip(m, "whole", value, want)
    # the trailer alone, decoded where it lies: still bytes 0..12 of the buffer passed
    for path in DECODERS:
        assert decode(m, "trailer", want, path, offset=12) == m.Trailer(mark=1)
    got = errors(m, "whole", flip(want, 5))
    assert {g[:3] for g in got} == {("ChecksumError", "whole.tail.file_crc", 12)}
    got = errors(m, "trailer", flip(want, 0), offset=12)
    assert {g[:3] for g in got} == {("ChecksumError", "trailer.file_crc", 12)}
    # a range reaching past the buffer is a truncation at the checksum field
    got = errors(m, "bounded", struct.pack("<I", 0) + b"abcd", upto=9)
    assert {g[:3] for g in got} == {("TruncatedError", "bounded.crc", 0)}


def test_a_file_range_over_the_checksum_reads_it_as_the_filler(schema_module):
    m = schema_module(FILE)
    pre, post = struct.pack("<I", 1), struct.pack("<I", 2)
    want = pre + struct.pack("<I", zlib.crc32(pre + b"\xee" * 4 + post)) + post
    round_trip(m, "inside", m.Inside(pre=1, post=2), want)
    assert {g[:3] for g in errors(m, "inside", flip(want, 9))} == {
        ("ChecksumError", "inside.crc", 4)}


SECTIONED = """
bytewright: 1
family: sectioned
records:
  trailer:
    fields:
      - {name: file_crc, type: u32, checksum: {algorithm: crc32, covers: [{file: [0, 4]}]}}
  middle:
    fields:
      - {name: t, type: trailer}
  outer:
    fields:
      - {name: magic, type: u32}
      - {name: n, type: u8}
      - {name: body, type: middle, size: n}
"""


def test_file_ranges_are_not_read_from_sections(tmp_path):
    found = problems(tmp_path, SECTIONED)
    assert any("records.outer.fields[2]" in p and "cannot be read from a size: or "
               "compressed section" in p for p in found), found
    assert problems(tmp_path, SECTIONED.replace(", size: n", "")) == []


def test_file_range_on_encode_is_of_the_bytes_produced(schema_module):
    m = schema_module(FILE)
    want = struct.pack("<I", zlib.crc32(b"abcd")) + b"abcd"
    round_trip(m, "bounded", m.Bounded(data=b"abcd"), want, upto=8)
    # a range the record does not reach is refused on both encoders
    for enc in (m.encode_bounded, m.construct_encode_bounded):
        with pytest.raises(EncodeError):
            enc(m.Bounded(data=b"abcd"), upto=9)
    # the trailer encoded alone has no bytes 0..12 before its end
    with pytest.raises(EncodeError):
        m.encode_trailer(m.Trailer(mark=1))
    with pytest.raises(EncodeError):
        m.construct_encode_trailer(m.Trailer(mark=1))


# -- registered checksums --------------------------------------------------------------------

CHECK = b"123456789"


@pytest.mark.parametrize("params, value", [
    # the published catalogue's check values (CRC RevEng)
    ({"width": 32, "poly": 0x04C11DB7, "init": 0xFFFFFFFF, "refin": False, "refout": False,
      "xorout": 0xFFFFFFFF}, 0xFC891918),  # CRC-32/BZIP2
    ({"width": 16, "poly": 0x1021, "init": 0xFFFF, "refin": False, "refout": False,
      "xorout": 0}, 0x29B1),  # CRC-16/CCITT-FALSE (IBM-3740)
    ({"width": 32, "poly": 0x04C11DB7, "init": 0xFFFFFFFF, "refin": False, "refout": False,
      "xorout": 0}, 0x0376E6E7),  # CRC-32/MPEG-2
    ({"width": 32, "poly": 0x04C11DB7, "init": 0xFFFFFFFF, "refin": True, "refout": True,
      "xorout": 0xFFFFFFFF}, 0xCBF43926),  # CRC-32/ISO-HDLC
    ({"width": 32, "poly": 0x1EDC6F41, "init": 0xFFFFFFFF, "refin": True, "refout": True,
      "xorout": 0xFFFFFFFF}, 0xE3069283),  # CRC-32/ISCSI (CRC-32C)
    ({"width": 16, "poly": 0x8005, "init": 0, "refin": True, "refout": True, "xorout": 0},
     0xBB3D),  # CRC-16/ARC
    ({"width": 8, "poly": 0x07, "init": 0, "refin": False, "refout": False, "xorout": 0},
     0xF4),  # CRC-8/SMBUS
    ({"width": 5, "poly": 0x05, "init": 0x1F, "refin": True, "refout": True, "xorout": 0x1F},
     0x19),  # CRC-5/USB
    ({"width": 7, "poly": 0x09, "init": 0, "refin": False, "refout": False, "xorout": 0},
     0x75),  # CRC-7/MMC
    ({"width": 64, "poly": 0x42F0E1EBA9EA3693, "init": 0, "refin": False, "refout": False,
      "xorout": 0}, 0x6C40DF5F0B497347),  # CRC-64/ECMA-182
])
def test_parametrised_crc_check_values(params, value):
    assert registry.checksum_func("crc")(CHECK, **params) == value


def test_crc32_ogg_and_internet16_values():
    assert registry.checksum_func("crc32_ogg")(CHECK) == 0x89A1897F
    assert registry.checksum_func("crc32_ogg")(CHECK) == ogg_crc(CHECK)
    assert registry.checksum_func("crc32_ogg")(b"\0" * 4096) == 0
    big = bytes(range(256)) * 64  # 16 KB through the cached table, against bit by bit
    assert registry.checksum_func("crc32_ogg")(big) == ogg_crc(big)
    internet16 = registry.checksum_func("internet16")
    # RFC 1071 section 3's worked example: words 0001 f203 f4f5 f6f7 sum to ddf2
    assert internet16(bytes.fromhex("0001f203f4f5f6f7")) == ~0xDDF2 & 0xFFFF
    assert internet16(IP_HEADER[:10] + b"\0\0" + IP_HEADER[12:]) == 0xB861
    assert internet16(IP_HEADER) == 0  # a header with its checksum in place sums to zero
    assert internet16(b"\x01") == ones_complement16(b"\x01") == 0xFEFF  # odd: zero-padded
    with pytest.raises(DecodeError):  # a bad parameter set is the project's error
        registry.checksum_func("crc")(CHECK, width=32, poly=0x04C11DB6)


# -- schema problems -----------------------------------------------------------------------

BASE = """
bytewright: 1
family: probs
records:
  rec:
    fields:
      - {name: a, type: u8}
      - {name: b, type: bytes, length: u8, if: "a > 1"}
      - CHECK
      - {name: c, type: u16}
"""


def check_problems(tmp_path: Path, check: str) -> list[str]:
    return problems(tmp_path, BASE.replace("CHECK", check))


def test_schema_problems_name_file_line_and_path(tmp_path):
    ok = "{name: ck, type: u32, checksum: {algorithm: crc32, covers: [b, c]}}"
    assert check_problems(tmp_path, ok) == []  # a field under `if:` may be covered
    assert check_problems(tmp_path, ok.replace("[b, c]", "following")) == []
    assert check_problems(tmp_path, ok.replace("[b, c]", "all, filler: 255")) == []
    found = check_problems(tmp_path, ok.replace("[b, c]", "all, filler: \"hex:0000\""))
    assert any("filler is 2 bytes, the field 4" in p and "p.yaml:9" in p
               and "checksum.filler" in p for p in found), found
    found = check_problems(tmp_path, ok.replace("[b, c]", "[c], filler: \"    \""))
    assert any("covers its own bytes" in p for p in found), found
    found = check_problems(tmp_path, ok.replace("[b, c]", "[{from: a, to: zz}]"))
    assert any("span names unknown field 'zz'" in p and "covers[0]" in p for p in found)
    found = check_problems(tmp_path, ok.replace("[b, c]", "[{from: c, to: a}]"))
    assert any("before its start 'c'" in p for p in found), found
    found = check_problems(tmp_path, ok.replace("[b, c]", "[{from: c}]"))
    assert any("must come before it" in p for p in found), found
    found = problems(tmp_path, BASE.replace("CHECK", ok.replace("[b, c]", "following"))
                     .replace("      - {name: c, type: u16}\n", ""))
    assert any("covers no bytes" in p for p in found), found  # nothing follows it
    found = check_problems(tmp_path, ok.replace("[b, c]", "[b, nope]"))
    assert any("covers unknown field 'nope'" in p for p in found), found
    found = check_problems(tmp_path, ok.replace("[b, c]", "[b, {file: [0, 4]}]"))
    assert any("not both" in p for p in found), found
    found = check_problems(tmp_path, ok.replace("[b, c]", "[{file: [0, zz]}]"))
    assert any("unknown name 'zz'" in p for p in found), found
    found = check_problems(tmp_path, ok.replace("covers: [b, c]", "covers: all, filer: 0"))
    assert found, "a misspelt key is refused by the JSON Schema"
    found = check_problems(tmp_path, ok.replace("covers: [b, c]", "covers: everything"))
    assert found
    found = check_problems(tmp_path, ok.replace("algorithm: crc32", "algorithm: crc")
                           .replace("[b, c]", "all, params: {width: 32}"))
    assert any("needs the param 'poly'" in p for p in found), found
    found = check_problems(tmp_path, ok.replace("algorithm: crc32", "algorithm: crc")
                           .replace("[b, c]", "all, params: {width: a, poly: 7}"))
    assert any("width must be a constant" in p for p in found), found
    narrow = ok.replace("type: u32", "type: u16").replace("algorithm: crc32", "algorithm: crc")
    assert check_problems(tmp_path, narrow.replace(
        "[b, c]", "all, params: {width: 16, poly: 0x1021}")) == []
    found = check_problems(tmp_path, narrow.replace(
        "[b, c]", "all, params: {width: 32, poly: 0x1021}"))
    assert any("narrower than crc's 32 bits" in p for p in found), found


def test_a_truncated_buffer_is_not_a_checksum_error(schema_module):
    m = schema_module(LOG)
    data = frag_bytes(2, b"abcdef")
    got = errors(m, "frag", data[:-1])
    assert {g[0] for g in got} == {"TruncatedError"}
    assert issubclass(TruncatedError, DecodeError) and issubclass(ChecksumError, DecodeError)


# -- with rows, conditions and versions ------------------------------------------------------

MISC = """
bytewright: 1
family: fwdmisc
records:
  row:
    rows: true
    fields:
      - {name: crc, type: u32, checksum: {algorithm: crc32, covers: following}}
      - {name: a, type: u16}
      - {name: b, type: u8}
  maybe:
    fields:
      - {name: flag, type: u8}
      - name: ck
        type: u16be
        if: "flag == 1"
        checksum: {algorithm: crc, covers: all, filler: 0xff,
                   params: {width: 16, poly: 0x1021, init: 0xffff}}
      - {name: body, type: bytes, length: u8}
  versioned:
    versions: {from: v, range: [1, 2]}
    fields:
      - {name: v, type: u8}
      - {name: ck, type: u32, checksum: {algorithm: crc32c, covers: following}}
      - {name: x, type: u16, since: 2}
      - {name: y, type: bytes, length: u8}
"""


def ccitt_false(data: bytes) -> int:
    reg = 0xFFFF
    for byte in data:
        reg ^= byte << 8
        for _ in range(8):
            reg = ((reg << 1) ^ 0x1021) if reg & 0x8000 else reg << 1
            reg &= 0xFFFF
    return reg


def test_rows_decoder_checks_a_forward_checksum(schema_module):
    m = schema_module(MISC)
    body = struct.pack("<HB", 0x1234, 9)
    one = struct.pack("<I", zlib.crc32(body)) + body
    round_trip(m, "row", m.Row(a=0x1234, b=9), one)
    assert m.decode_many_row(one * 3) == [m.Row(a=0x1234, b=9)] * 3
    rows, starts, stop = m.decode_rows_row(one * 3)
    assert (list(rows), list(starts), stop) == ([(0x1234, 9)] * 3, [0, 7, 14], 21)
    # rows stop before the record whose checksum fails; decoding it says why
    bad = one * 2 + flip(one, 5)
    rows, starts, stop = m.decode_rows_row(bad)
    assert (len(rows), stop) == (2, 14)
    with pytest.raises(ChecksumError) as info:
        m.decode_row(bad, stop)
    assert (info.value.path, info.value.offset) == ("row.crc", 14)
    with pytest.raises(ChecksumError) as info:
        m.decode_many_row(bad)
    assert (info.value.path, info.value.offset) == ("row[2].crc", 14)


def test_a_self_covering_checksum_under_a_condition(schema_module):
    m = schema_module(MISC)
    want = b"\x01" + struct.pack(">H", ccitt_false(b"\x01\xff\xff\x03abc")) + b"\x03abc"
    round_trip(m, "maybe", m.Maybe(flag=1, body=b"abc"), want)
    round_trip(m, "maybe", m.Maybe(flag=0, body=b"abc"), b"\x00\x03abc")
    assert {g[:3] for g in errors(m, "maybe", flip(want, 5))} == {
        ("ChecksumError", "maybe.ck", 1)}


@pytest.mark.parametrize("v, x", [(1, None), (2, 0x0708)])
def test_a_following_checksum_per_version(schema_module, v, x):
    m = schema_module(MISC)
    rest = (struct.pack("<H", x) if x is not None else b"") + b"\x01q"
    want = bytes([v]) + struct.pack("<I", crc32c(rest)) + rest
    round_trip(m, "versioned", m.Versioned(v=v, x=x, y=b"q"), want)
    assert {g[:3] for g in errors(m, "versioned", flip(want, len(want) - 1))} == {
        ("ChecksumError", "versioned.ck", 1)}


# -- more shapes: digests, coverage on both sides, compressed fields, late seeds ------------

SHAPES = """
bytewright: 1
family: fwdshapes
records:
  digest_first:
    fields:
      - {name: digest, type: bytes, size: 32, checksum: {algorithm: blake3, covers: following}}
      - {name: body, type: bytes, length: u16}
  both_sides:
    fields:
      - {name: a, type: u8}
      - {name: ck, type: u32, checksum: {algorithm: crc32, covers: [a, c], seed: salt}}
      - {name: b, type: u8}
      - {name: c, type: bytes, length: u8}
      - {name: salt, type: u32}
  truncated:
    fields:
      - name: ck
        type: u16
        checksum: {algorithm: crc32, covers: all, except: [skip], store: {bits: 16},
                   filler: "hex:abcd"}
      - {name: a, type: u8}
      - {name: skip, type: u8}
      - {name: b, type: bytes, length: u8}
  packed:
    fields:
      - {name: ck, type: u32, checksum: {algorithm: crc32c, covers: [kind, data]}}
      - {name: kind, type: u8}
      - {name: data, type: bytes, length: u32, compressed: {algorithm: zlib, length: u32}}
"""


def test_digest_first_over_the_rest(schema_module):
    import blake3

    m = schema_module(SHAPES)
    body = b"\x05\x00hello"
    want = blake3.blake3(body).digest() + body
    round_trip(m, "digest_first", m.DigestFirst(body=b"hello"), want)
    assert {g[:3] for g in errors(m, "digest_first", flip(want, 34))} == {
        ("ChecksumError", "digest_first.digest", 0)}


def test_coverage_on_both_sides_seeded_by_a_later_field(schema_module):
    m = schema_module(SHAPES)
    covered = b"\x01" + b"\x03xyz"
    salt = 0x01020304
    want = (b"\x01" + struct.pack("<I", zlib.crc32(covered, salt)) + b"\x02" + b"\x03xyz"
            + struct.pack("<I", salt))
    round_trip(m, "both_sides", m.BothSides(a=1, b=2, c=b"xyz", salt=salt), want)
    assert decode(m, "both_sides", want[:5] + b"\x09" + want[6:], "compiled").b == 9  # b: outside
    for at in (0, 8, len(want) - 1):  # a, c and the seed
        assert {g[:3] for g in errors(m, "both_sides", flip(want, at))} == {
            ("ChecksumError", "both_sides.ck", 1)}


def test_self_covering_truncated_with_a_hex_filler_and_except(schema_module):
    m = schema_module(SHAPES)
    crc = zlib.crc32(b"\xab\xcd" + b"\x01" + b"\x02xy") & 0xFFFF  # skip is left out
    want = struct.pack("<H", crc) + b"\x01\x07\x02xy"
    round_trip(m, "truncated", m.Truncated(a=1, skip=7, b=b"xy"), want)
    assert decode(m, "truncated", want[:3] + b"\x09" + want[4:], "construct").skip == 9
    assert {g[:3] for g in errors(m, "truncated", flip(want, 2))} == {
        ("ChecksumError", "truncated.ck", 0)}


def test_forward_checksum_over_plain_bytes_of_a_compressed_field(schema_module):
    m = schema_module(SHAPES)
    plain = b"abc" * 50
    value = m.Packed(kind=3, data=plain)
    data = encode_both(m, "packed", value)
    # the compressed region: u32 size of the stream, then the stream of the plain bytes
    # (the field's own length prefix and content), which the checksum covers
    stream = data[9:]
    assert struct.unpack_from("<I", data, 5)[0] == len(stream)
    inner = zlib.decompress(stream)
    assert inner == struct.pack("<I", len(plain)) + plain
    assert data[:4] == struct.pack("<I", crc32c(b"\x03" + inner))
    for path in DECODERS:
        assert decode(m, "packed", data, path) == value
    assert {g[:3] for g in errors(m, "packed", flip(data, 4))} == {
        ("ChecksumError", "packed.ck", 0)}


@pytest.mark.parametrize("schema, record, make", [
    (LOG, "log", lambda m: m.Log(items=[m.Frag(kind=k, piece=bytes([k]) * k) for k in range(4)])),
    (IPV4, "packets", lambda m: m.Packets(items=[m.Ipv4(
        version_ihl=0x45, tos=i, total_length=20, ident=i, frag=0, ttl=64, proto=6,
        src=i, dst=0x0A000001) for i in range(3)])),
    (OGG, "page", lambda m: m.Page(version=0, header_type=0, granule=9, serial=1, seq=2,
                                   lacing=[3], body=b"abc")),
    (FOLLOW, "summary", lambda m: m.Summary(records=[m.Entry(key=1, value=b"v")] * 3, pad=1)),
    (FILE, "whole", lambda m: m.Whole(magic=7, body=b"12345678", tail=m.Trailer(mark=1))),
    (FILE, "inside", lambda m: m.Inside(pre=5, post=6)),
    (SHAPES, "both_sides", lambda m: m.BothSides(a=1, b=2, c=b"xyz", salt=5)),
])
def test_every_path_reports_corruption_alike(schema_module, schema, record, make):
    """Truncations and bit flips: the same value, or the same error class, path and
    offset, on the fast path and on the Construct path interpreted and compiled."""
    import random

    m = schema_module(schema)
    data = encode_both(m, record, make(m))
    rng = random.Random(len(data))
    inputs = [data[:i] for i in range(len(data))]
    for _ in range(120):
        buf = bytearray(data)
        buf[rng.randrange(len(buf))] ^= 1 << rng.randrange(8)
        inputs.append(bytes(buf))
    for raw in inputs:
        got = []
        for path in DECODERS:
            try:
                got.append(("ok", decode(m, record, raw, path)))
            except DecodeError as e:
                got.append((type(e).__name__, e.path, e.offset))
        assert got[0] == got[1] == got[2], (raw.hex(), got)


def test_inspector_marks_a_bad_forward_checksum_at_its_field(schema_module, tmp_path):
    from bytewright.review import inspector

    m = schema_module(LOG)
    src = tmp_path / "fwdlog.yaml"
    src.write_text(LOG)
    fam = pipeline.run([src]).families["fwdlog"]
    good = frag_bytes(1, b"ab") + frag_bytes(2, b"cd")
    res = inspector.inspect_bytes(good, m, fam, "log", {})
    assert res.failure is None and res.bad_checksums == []
    bad = flip(good, len(good) - 1)
    res = inspector.inspect_bytes(bad, m, fam, "log", {})
    assert [(n.path, n.offset) for n in res.bad_checksums] == [("log.items[1].crc", 9)]
    assert "CHECKSUM BAD" in inspector.render_text(res)


# -- the codec-truth property on every record above -------------------------------------------

PROPERTY_RECORDS = [
    (LOG, "fwdlog", ["frag", "log", "sized_first"]),
    (FOLLOW, "fwdspan", ["following", "span_to", "summary"]),
    (IPV4, "ipv4x", ["ipv4", "packets"]),
    (OGG, "oggx", ["page", "param_page"]),
    (SHAPES, "fwdshapes", ["digest_first", "both_sides", "truncated", "packed"]),
    (MISC, "fwdmisc", ["row", "maybe", "versioned"]),
    (FILE, "filerange", ["whole", "inside"]),
]


@pytest.mark.parametrize("schema, family, records", PROPERTY_RECORDS,
                         ids=[p[1] for p in PROPERTY_RECORDS])
def test_drawn_values_agree_on_every_path(schema_module, tmp_path, schema, family, records):
    """Values drawn from the schema encode alike on both paths and decode back on all
    three; a near-valid value is refused by both encoders at the same field."""
    from bytewright.properties import Builder, run_record

    m = schema_module(schema)
    src = tmp_path / f"{family}.yaml"
    src.write_text(schema)
    builder = Builder(pipeline.run([src]).families[family], m)
    for rec in records:
        for kind in ("valid", "near"):
            r = run_record(builder, rec, max_examples=15, kind=kind, shrink=False)
            assert r.status == "ok", r.line()
            assert kind == "near" or r.examples >= 5, r.line()
