"""Integer kinds (``bytewright.runtime.numbers``): every kind on both codec paths (fast,
Construct interpreted and compiled), decode and encode, against bytes built by hand from
the specifications, by Python's ``tarfile`` and by GNU tar; errors with class, path and
absolute offset alike on every path; a plug-in kind; schema problems."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import tarfile
import textwrap

import pytest

from bytewright.generator import pipeline
from bytewright.properties import Builder, run_record
from bytewright.runtime import numbers, registry
from bytewright.runtime.errors import (
    ChecksumError,
    ConstraintError,
    EncodeError,
    TruncatedError,
)

from .conftest import build_module
from .three_paths import decode_all, encode_all, errors_all


def encode_errors_all(m, record: str, value) -> str:
    """The path of the EncodeError, the same on the fast and Construct paths (the
    compiled build refuses the value too)."""
    seen = set()
    for call in (m.ENCODERS[record], m.CONSTRUCT_ENCODERS[record]):
        with pytest.raises(EncodeError) as info:
            call(value)
        seen.add(info.value.path)
    with pytest.raises(EncodeError):
        m.CONSTRUCT_ENCODERS[record](value, compiled=True)
    assert len(seen) == 1, seen
    return seen.pop()


def harness(tmp_path, text: str, name: str, module) -> None:
    """The codec-truth property harness draws and round-trips every record."""
    path = tmp_path / f"{name}_h.yaml"
    path.write_text(text)
    fam = pipeline.run([path]).families[name]
    builder = Builder(fam, module)
    for rec in fam.records:
        for kind in ("valid", "near"):
            r = run_record(builder, rec, max_examples=25, kind=kind, shrink=False)
            assert r.status == "ok", r.line()


KINDS = """
bytewright: 1
family: kinds
records:
  vlq_one: {fields: [{name: x, type: vlq}]}
  ofs_one: {fields: [{name: x, type: vlq_offset}]}
  quic_one: {fields: [{name: x, type: quic_varint}]}
  vint_one: {fields: [{name: x, type: vint}]}
  uses:
    fields:
      - {name: magic, type: quic_varint, const: 15293}
      - {name: key, type: bytes, length: vlq}
      - {name: items, type: u16, repeat: {prefix: quic_varint}}
      - {name: tag, type: vint}
      - {name: body, switch: tag, cases: {1: vlq_one, 300: empty}}
      - {name: total, type: vlq_offset, value: "len(key) + 1"}
      - {name: n, type: vlq}
      - {name: data, type: bytes, size: n}
      - {name: bounded, type: quic_varint, valid: {max: 1000}}
"""

# Standard MIDI File 1.0, "Variable-length quantities" table
MIDI = [(0x00, "00"), (0x40, "40"), (0x7F, "7f"), (0x80, "8100"), (0x2000, "c000"),
        (0x3FFF, "ff7f"), (0x4000, "818000"), (0x100000, "c08000"), (0x1FFFFF, "ffff7f"),
        (0x200000, "81808000"), (0x8000000, "c0808000"), (0x0FFFFFFF, "ffffff7f")]
# git pack OFS_DELTA offsets: every continuation adds one (c = 128 + x: (x + 1) << 7 | low)
GIT = [(0, "00"), (127, "7f"), (128, "8000"), (255, "807f"), (256, "8100"),
       (16511, "ff7f"), (16512, "808000"), (2113663, "ffff7f"), (2113664, "80808000")]
# RFC 9000 appendix A.1
QUIC = [("c2197c5eff14e88c", 151288809941952652), ("9d7f3e7d", 494878333),
        ("7bbd", 15293), ("25", 37)]
# EBML: the first byte's leading zeros count the bytes that follow, its marker bit dropped
VINT = [(0, "80"), (1, "81"), (126, "fe"), (127, "407f"), (300, "412c"),
        (16382, "7ffe"), (16383, "203fff"), (2**21 - 2, "3ffffe")]


@pytest.fixture(scope="module")
def kinds(tmp_path_factory):


    return build_module(KINDS, tmp_path_factory.mktemp("kinds"), "kinds")


@pytest.mark.parametrize(("value", "hexed"), MIDI)
def test_midi_vlq_table(kinds, value, hexed):
    data = bytes.fromhex(hexed)
    assert encode_all(kinds, "vlq_one", kinds.VlqOne(value)) == data
    assert decode_all(kinds, "vlq_one", data).x == value


@pytest.mark.parametrize(("value", "hexed"), GIT)
def test_git_offset_varint(kinds, value, hexed):
    data = bytes.fromhex(hexed)
    assert encode_all(kinds, "ofs_one", kinds.OfsOne(value)) == data
    assert decode_all(kinds, "ofs_one", data).x == value


@pytest.mark.parametrize(("hexed", "value"), QUIC)
def test_quic_rfc9000_examples(kinds, hexed, value):
    data = bytes.fromhex(hexed)
    assert decode_all(kinds, "quic_one", data).x == value
    assert encode_all(kinds, "quic_one", kinds.QuicOne(value)) == data


def test_quic_non_minimal_decodes_and_encodes_minimal(kinds):
    assert decode_all(kinds, "quic_one", bytes.fromhex("4025")).x == 37  # RFC 9000 A.1
    assert encode_all(kinds, "quic_one", kinds.QuicOne(37)) == b"\x25"
    assert encode_all(kinds, "quic_one", kinds.QuicOne(2**62 - 1)) == b"\xff" * 8
    assert encode_errors_all(kinds, "quic_one", kinds.QuicOne(2**62)) == "quic_one.x"


@pytest.mark.parametrize(("value", "hexed"), VINT)
def test_leading_zero_count_varint(kinds, value, hexed):
    data = bytes.fromhex(hexed)
    assert encode_all(kinds, "vint_one", kinds.VintOne(value)) == data
    assert decode_all(kinds, "vint_one", data).x == value


def test_vint_non_minimal_and_refused_marker(kinds):
    assert decode_all(kinds, "vint_one", bytes.fromhex("4001")).x == 1
    assert decode_all(kinds, "vint_one", bytes.fromhex("10000001")).x == 1
    assert errors_all(kinds, "vint_one", b"\x00\x01") == (ConstraintError, "vint_one.x", 0)
    assert errors_all(kinds, "vint_one", b"\x20\x01") == (TruncatedError, "vint_one.x", 0)


def test_vlq_limits_and_errors(kinds):
    # at most four bytes: a fifth continuation is refused at the varint's offset
    assert errors_all(kinds, "vlq_one", bytes.fromhex("ff" * 5)) == \
        (ConstraintError, "vlq_one.x", 0)
    assert errors_all(kinds, "vlq_one", b"\x81") == (TruncatedError, "vlq_one.x", 0)
    assert encode_errors_all(kinds, "vlq_one", kinds.VlqOne(0x10000000)) == "vlq_one.x"
    assert encode_errors_all(kinds, "vlq_one", kinds.VlqOne(-1)) == "vlq_one.x"
    # absolute offsets: the record read at offset 3 of a larger buffer
    assert errors_all(kinds, "vlq_one", b"abc\x81", 3) == (TruncatedError, "vlq_one.x", 3)


def test_kinds_as_const_length_count_tag_value_and_size(kinds):
    v = kinds.Uses(b"k" * 130, [1, 2, 3], 1, kinds.VlqOne(0x80), b"d" * 200, 999)
    data = encode_all(kinds, "uses", v)
    assert data[:2] == bytes.fromhex("7bbd")  # const 15293 as a QUIC varint
    assert data[2:4] == bytes.fromhex("8102")  # length 130 as a VLQ
    assert data[134] == 3 and data[135:141] == b"\x01\x00\x02\x00\x03\x00"  # QUIC count
    assert data[141] == 0x81  # tag 1 as a vint
    assert data[142:144] == bytes.fromhex("8100")  # the case body: VLQ 0x80
    assert data[144:146] == bytes.fromhex("8003")  # value: len(key) + 1 = 131 (git offset)
    assert data[146:148] == bytes.fromhex("8148")  # derived size 200, VLQ, 2 bytes wide
    assert data[-2:] == bytes.fromhex("43e7")  # 999 as a 2-byte QUIC varint
    assert decode_all(kinds, "uses", data) == v
    v2 = kinds.Uses(b"", [], 300, None, b"", 0)
    assert decode_all(kinds, "uses", encode_all(kinds, "uses", v2)) == v2
    bad = bytearray(data)
    bad[1] = 0xBE  # the constant broken
    assert errors_all(kinds, "uses", bytes(bad)) == (ConstraintError, "uses.magic", 0)
    assert errors_all(kinds, "uses", data[:-1]) == (TruncatedError, "uses.bounded", len(data) - 2)
    assert encode_errors_all(kinds, "uses", kinds.Uses(b"", [], 300, None, b"", 1001)) == \
        "uses.bounded"


def test_kinds_through_the_property_harness(kinds, tmp_path):
    harness(tmp_path, KINDS, "kinds", kinds)


# -- ASCII numbers: tar, ar, cpio ---------------------------------------------------------

TAR_SUM = '''
def register(reg):
    # the tar header checksum: the byte sum of the header, its own field read as spaces
    reg.add_checksum("tar_header_sum", bits=32, safe=True, func=lambda data: sum(data))
'''

USTAR = """
bytewright: 1
family: ustar
plugins: ["tar_sum_plugin:register"]
types:
  oct8: {integer: ascii, radix: 8, width: 8, end: "hex:00"}
  oct12: {integer: ascii, radix: 8, width: 12, end: "hex:00"}
  chk: {integer: ascii, radix: 8, width: 8, end: "hex:0020"}
  dev: {integer: ascii, radix: 8, width: 8, end: "hex:00", blank: absent}
records:
  header:
    fields:
      - {name: name, type: bytes, size: 100}
      - {name: mode, type: oct8}
      - {name: uid, type: oct8}
      - {name: gid, type: oct8}
      - {name: size, type: oct12}
      - {name: mtime, type: oct12}
      - {name: chksum, type: chk,
         checksum: {algorithm: tar_header_sum, covers: all, filler: "        "}}
      - {name: typeflag, type: bytes, size: 1}
      - {name: linkname, type: bytes, size: 100}
      - {name: magic, type: bytes, size: 6, const: "7573746172 00"}
      - {name: version, type: bytes, size: 2}
      - {name: uname, type: bytes, size: 32}
      - {name: gname, type: bytes, size: 32}
      - {name: devmajor, type: dev}
      - {name: devminor, type: dev}
      - {name: prefix, type: bytes, size: 155}
      - {name: pad, type: bytes, size: 12, reserved: zero}
"""


@pytest.fixture(scope="module")
def ustar(tmp_path_factory):
    root = tmp_path_factory.mktemp("ustar")
    (root / "tar_sum_plugin.py").write_text(TAR_SUM)
    sys.path.insert(0, str(root))
    try:
        yield build_module(USTAR, root, "ustar")
    finally:
        sys.path.remove(str(root))


    return build_module(USTAR, tmp_path_factory.mktemp("ustar"), "ustar")


def _tar_checksum(header: bytes) -> int:
    return sum(header[:148]) + 8 * 0x20 + sum(header[156:])


def test_tarfile_header_decodes_and_reencodes_byte_identical(ustar):
    info = tarfile.TarInfo("docs/readme.txt")
    info.size, info.mode, info.uid, info.gid = 1234, 0o644, 1000, 100
    info.mtime, info.uname, info.gname = 1_700_000_000, "alice", "staff"
    raw = info.tobuf(format=tarfile.USTAR_FORMAT)[:512]
    h = decode_all(ustar, "header", raw)
    assert (h.mode, h.uid, h.gid, h.size, h.mtime) == (0o644, 1000, 100, 1234, 1_700_000_000)
    # tarfile leaves the device numbers of a regular file empty (NULs): absent
    assert (h.devmajor, h.devminor) == (None, None) and raw[329:345] == bytes(16)
    # the checksum is verified (it is not in the model): tarfile's value, recomputed
    assert raw[148:156] == b"%06o\x00 " % _tar_checksum(raw)
    # canonical encode: byte-identical to what tarfile wrote ("%07o\0", "%011o\0", "%06o\0 ")
    assert encode_all(ustar, "header", h) == raw
    assert raw[100:108] == b"0000644\x00" and raw[124:136] == b"00000002322\x00"


@pytest.mark.skipif(shutil.which("tar") is None, reason="GNU tar not installed")
def test_gnu_tar_header_reencodes_byte_identical(ustar, tmp_path):
    src = tmp_path / "f.bin"
    src.write_bytes(b"x" * 70000)
    out = subprocess.run(["tar", "--format=ustar", "--owner=0", "--group=0",
                          "--mtime=@1700000000", "-C", str(tmp_path), "-cf", "-", "f.bin"],
                         capture_output=True, check=True).stdout
    raw = out[:512]
    h = decode_all(ustar, "header", raw)
    assert h.size == 70000 and h.mtime == 1_700_000_000
    assert h.mode == 0o644 or h.mode & 0o777 == src.stat().st_mode & 0o777
    assert encode_all(ustar, "header", h) == raw


def test_ascii_lenient_decode_canonical_encode(ustar):
    info = tarfile.TarInfo("a")
    info.size = 10
    raw = bytearray(info.tobuf(format=tarfile.USTAR_FORMAT)[:512])
    raw[100:108] = b"   644 \x00"  # leading spaces, a trailing space (old tar writers)
    raw[124:136] = b"12\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"  # trailing NULs
    raw[148:156] = b"%06o\x00 " % _tar_checksum(bytes(raw))
    h = decode_all(ustar, "header", bytes(raw))
    assert h.mode == 0o644 and h.size == 0o12
    again = encode_all(ustar, "header", h)
    assert again[100:108] == b"0000644\x00" and again[124:136] == b"00000000012\x00"


def test_tar_checksum_mismatch_and_self_covering_encode(ustar):
    raw = bytearray(tarfile.TarInfo("a").tobuf(format=tarfile.USTAR_FORMAT)[:512])
    raw[0] = ord("b")  # the name changed, the stored checksum not
    assert errors_all(ustar, "header", bytes(raw)) == (ChecksumError, "header.chksum", 148)
    assert errors_all(ustar, "header", b"xy" + bytes(raw), 2) == \
        (ChecksumError, "header.chksum", 150)
    h = decode_all(ustar, "header", tarfile.TarInfo("b").tobuf(format=tarfile.USTAR_FORMAT)[:512])
    assert encode_all(ustar, "header", h) == raw[:148] + b"%06o\x00 " % _tar_checksum(raw) \
        + raw[156:]


def test_ascii_errors(ustar):
    raw = bytearray(tarfile.TarInfo("a").tobuf(format=tarfile.USTAR_FORMAT)[:512])
    raw[127] = ord("9")  # not an octal digit: the byte's own offset (read before the sum)
    assert errors_all(ustar, "header", bytes(raw)) == (ConstraintError, "header.size", 127)
    assert errors_all(ustar, "header", b"pre" + bytes(raw), 3) == \
        (ConstraintError, "header.size", 130)
    raw[127] = ord("x")
    assert errors_all(ustar, "header", bytes(raw))[2] == 127
    assert errors_all(ustar, "header", bytes(raw[:130]))[0] is TruncatedError
    h = decode_all(ustar, "header", tarfile.TarInfo("a").tobuf(format=tarfile.USTAR_FORMAT)[:512])
    h.size = 8**11  # twelve octal digits do not fit in "%011o\0"
    assert encode_errors_all(ustar, "header", h) == "header.size"
    h.size = 8**11 - 1
    assert encode_all(ustar, "header", h)[124:136] == b"77777777777\x00"


AR_CPIO = """
bytewright: 1
family: arcpio
types:
  dec12: {integer: ascii, radix: 10, width: 12, align: left}
  dec6: {integer: ascii, radix: 10, width: 6, align: left}
  oct8l: {integer: ascii, radix: 8, width: 8, align: left}
  dec10: {integer: ascii, radix: 10, width: 10, align: left}
  hex8: {integer: ascii, radix: 16, width: 8, upper: true}
records:
  ar_member:
    fields:
      - {name: name, type: bytes, size: 16}
      - {name: mtime, type: dec12}
      - {name: uid, type: dec6}
      - {name: gid, type: dec6}
      - {name: mode, type: oct8l}
      - {name: size, type: dec10}
      - {name: fmag, type: bytes, size: 2, const: "600a"}
      - {name: data, type: bytes, size: size}
  newc:
    fields:
      - {name: magic, type: bytes, size: 6, const: "303730373031"}
      - {name: ino, type: hex8}
      - {name: mode, type: hex8}
      - {name: namesize, type: hex8}
      - {name: name, type: bytes, size: namesize}
  dec_len:
    fields:
      - {name: text, type: str, length: dec10}
"""


@pytest.fixture(scope="module")
def arcpio(tmp_path_factory):


    return build_module(AR_CPIO, tmp_path_factory.mktemp("arcpio"), "arcpio")


def test_ar_member_header(arcpio):
    raw = (b"hello.txt/      " + b"1700000000  " + b"1000  " + b"100   " + b"100644  "
           + b"5         " + b"`\n" + b"hello")
    m = decode_all(arcpio, "ar_member", raw)
    assert (m.mtime, m.uid, m.gid, m.mode, m.data) == (1_700_000_000, 1000, 100, 0o100644,
                                                       b"hello")
    assert encode_all(arcpio, "ar_member", m) == raw  # size derived: "5         "


@pytest.mark.skipif(shutil.which("ar") is None, reason="GNU ar not installed")
def test_gnu_ar_header(arcpio, tmp_path):
    (tmp_path / "m.o").write_bytes(b"abcdefg")
    subprocess.run(["ar", "rcU", str(tmp_path / "x.a"), "m.o"], cwd=tmp_path, check=True,
                   capture_output=True)
    archive = (tmp_path / "x.a").read_bytes()
    assert archive[:8] == b"!<arch>\n"
    member = archive[8:8 + 60 + 7]
    m = decode_all(arcpio, "ar_member", member)
    assert m.data == b"abcdefg" and member[48:58] == b"7         "
    assert encode_all(arcpio, "ar_member", m) == member


def test_cpio_newc_hex(arcpio):
    raw = b"070701" + b"0001E240" + b"000081A4" + b"00000006" + b"a.txt\x00"
    n = decode_all(arcpio, "newc", raw)
    assert (n.ino, n.mode) == (123456, 0o100644)
    assert encode_all(arcpio, "newc", n) == raw
    lower = b"070701" + b"0001e240" + b"000081a4" + b"00000006" + b"a.txt\x00"
    assert decode_all(arcpio, "newc", lower) == n  # either case reads
    n.ino = 2**32
    assert encode_errors_all(arcpio, "newc", n) == "newc.ino"
    assert errors_all(arcpio, "newc", raw[:10] + b"G" + raw[11:]) == \
        (ConstraintError, "newc.ino", 10)


SIZED = """
bytewright: 1
family: sized
types:
  octal12: {integer: ascii, radix: 8, width: 12, end: "hex:00"}
records:
  hdr:
    fields:
      - {name: size, type: octal12}
      - {name: crc, type: u32, checksum: {algorithm: crc32, covers: all, filler: 0}}
      - {name: data, type: bytes, size: size}
"""


def test_fixed_width_size_before_a_self_covering_checksum(tmp_path):
    import zlib

    m = build_module(SIZED, tmp_path, "sized")
    data = encode_all(m, "hdr", m.Hdr(b"abc"))
    assert data[:12] == b"00000000003\x00" and data[16:] == b"abc"
    crc = zlib.crc32(data[:12] + bytes(4) + data[16:])
    assert data[12:16] == crc.to_bytes(4, "little")
    assert decode_all(m, "hdr", data) == m.Hdr(b"abc")
    bad = data[:-1] + b"d"
    assert errors_all(m, "hdr", bad) == (ChecksumError, "hdr.crc", 12)


def test_ascii_length_prefix(arcpio):
    data = encode_all(arcpio, "dec_len", arcpio.DecLen("héllo"))
    assert data == b"6         h\xc3\xa9llo"
    assert decode_all(arcpio, "dec_len", data).text == "héllo"


def test_ascii_kinds_through_the_property_harness(arcpio, tmp_path):
    harness(tmp_path, AR_CPIO, "arcpio", arcpio)


# -- the registry and plug-ins ------------------------------------------------------------

def test_builtins_are_registry_kinds():
    kinds = registry.REGISTRY.integer_kinds
    for name in ("uleb128", "sleb128", "zigzag", "vlq", "vlq_offset", "quic_varint", "vint",
                 "ascii"):
        assert name in kinds
    codec = registry.integer_codec("ascii", {"radix": 8, "width": 8, "end": b"\0 "})
    assert codec.encode(0o1234) == b"001234\x00 "
    assert codec.decode(b"001234\x00 ", 0, 8, "p") == (0o1234, 8)
    assert codec.bounds == (0, 8**6 - 1)
    assert numbers.encode_vlq(0x3FFF) == b"\xff\x7f"


PLUGIN = '''
from bytewright.runtime.errors import ConstraintError, EncodeError, TruncatedError


def decode_bcd(buf, offset=0, *, path="", digits=4):
    n = digits // 2
    if offset + n > len(buf):
        raise TruncatedError("BCD truncated", offset=offset, path=path)
    value = 0
    for k, b in enumerate(buf[offset:offset + n]):
        for d in (b >> 4, b & 15):
            if d > 9:
                raise ConstraintError("not a BCD digit", offset=offset + k, path=path)
            value = value * 10 + d
    return value, offset + n


def encode_bcd(value, *, digits=4):
    if not isinstance(value, int) or not 0 <= value < 10 ** digits:
        raise EncodeError(f"{value!r} does not fit in {digits} BCD digits")
    text = str(value).rjust(digits, "0")
    return bytes(int(text[i]) << 4 | int(text[i + 1]) for i in range(0, digits, 2))


def register(reg):
    reg.add_integer_kind("bcd", decode=decode_bcd, encode=encode_bcd,
                         max_bytes=lambda digits=4: digits // 2, params=("digits",),
                         bounds=lambda digits=4: (0, 10 ** digits - 1))
'''

PLUGIN_SCHEMA = """
bytewright: 1
family: plug
plugins: ["bcd_kind_plugin:register"]
types:
  bcd6: {integer: bcd, digits: 6}
records:
  rec:
    fields:
      - {name: year, type: bcd}
      - {name: code, type: bcd6}
      - {name: note, type: bytes, length: bcd}
"""


def test_plugin_integer_kind(tmp_path, monkeypatch):


    (tmp_path / "bcd_kind_plugin.py").write_text(textwrap.dedent(PLUGIN))
    monkeypatch.syspath_prepend(str(tmp_path))
    m = build_module(PLUGIN_SCHEMA, tmp_path, "plug")
    data = encode_all(m, "rec", m.Rec(2024, 123456, b"hi"))
    assert data == bytes.fromhex("2024" "123456" "0002") + b"hi"
    assert decode_all(m, "rec", data) == m.Rec(2024, 123456, b"hi")
    assert errors_all(m, "rec", bytes.fromhex("2024" "12a456" "0000")) == \
        (ConstraintError, "rec.code", 3)
    assert encode_errors_all(m, "rec", m.Rec(10000, 0, b"")) == "rec.year"
    harness(tmp_path, PLUGIN_SCHEMA, "plug", m)
    sys.modules.pop("bcd_kind_plugin", None)


@pytest.mark.parametrize(("types", "expected"), [
    ("t1: {integer: nope}", "p.yaml:4: error: types.t1.integer: unknown integer kind 'nope'"),
    ("t1: {integer: ascii, radix: 8}", "p.yaml:4: error: types.t1: integer kind 'ascii' "
                                       "needs width"),
    ("t1: {integer: ascii, radix: 8, width: 4, end: 'abcd'}",
     "p.yaml:4: error: types.t1: integer kind 'ascii': end must be bytes shorter than width"),
    ("t1: {integer: vlq, colour: 3}",
     "p.yaml:4: error: types.t1.colour: integer kind 'vlq' has no param 'colour'"),
    ("t1: {integer: ascii, radix: 7, width: 4}", "p.yaml:4: error: types.t1:"),
])
def test_schema_problems(tmp_path, types, expected):
    path = tmp_path / "p.yaml"
    path.write_text("bytewright: 1\nfamily: p\ntypes:\n  " + types + "\nrecords:\n"
                    "  r: {fields: [{name: a, type: u8}]}\n")
    text = "\n".join(str(p) for p in pipeline.run([path]).problems)
    assert expected in text, text


def test_unknown_kind_as_a_length_is_a_problem(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("bytewright: 1\nfamily: p\nrecords:\n  r:\n    fields:\n"
                    "      - {name: b, type: bytes, length: nokind}\n")
    text = "\n".join(str(p) for p in pipeline.run([path]).problems)
    assert "p.yaml:6: error: records.r.fields[0].length: unknown length type 'nokind'" in text


def test_stream_reads_of_a_kind_stop_at_its_end():
    """The Construct path reads ahead at most ``max_bytes`` and seeks back exactly."""
    import construct as cs

    codec = registry.integer_codec("quic_varint")
    con = cs.Struct("a" / numbers.IntegerKind(codec), "b" / cs.Int8ub)
    assert con.parse(bytes.fromhex("7bbd") + b"\x09") == cs.Container(a=15293, b=9)
    assert con.build({"a": 37, "b": 1}) == b"\x25\x01"
    stream = io.BytesIO(bytes.fromhex("c2197c5eff14e88c"))
    assert numbers.parse_stream(stream, codec) == 151288809941952652 and stream.tell() == 8


COMPRESSED = """
bytewright: 1
family: avroish
records:
  reading: {fields: [{name: v, type: zigzag}]}
  block:
    fields:
      - {name: count, type: zigzag}
      - {name: objects, type: reading, repeat: {count: count},
         compressed: {algorithm: zlib, length: zigzag}}
      - {name: tail, type: u8}
"""


def test_compressed_region_behind_an_integer_kind_length(tmp_path):
    """Avro data blocks: a zigzag count, a zigzag byte size, then the compressed objects."""
    import zlib

    m = build_module(COMPRESSED, tmp_path, "avroish")
    frame = zlib.compress(b"\x05" + b"\xe8\x07")  # zigzag -3, zigzag 500
    raw = b"\x04" + bytes([len(frame) * 2]) + frame + b"\x07"
    v = decode_all(m, "block", raw)
    assert v == m.Block([m.Reading(-3), m.Reading(500)], 7)
    data = encode_all(m, "block", v)
    assert data[0] == 4 and data[1] == 2 * (len(data) - 3) and decode_all(m, "block", data) == v
    assert errors_all(m, "block", raw[:1] + b"\x03" + raw[2:]) == \
        (ConstraintError, "block.objects", 2)  # a negative size
    assert errors_all(m, "block", raw[:1] + b"\xff") == \
        (TruncatedError, "block.objects.compressed_len", 1)


def test_kind_as_a_derived_count(tmp_path):
    m = build_module("""
bytewright: 1
family: dc
records:
  r:
    fields:
      - {name: n, type: quic_varint}
      - {name: a, type: u8}
      - {name: items, type: u16, repeat: {count: n}}
""", tmp_path, "dc")
    v = m.R(5, list(range(70)))
    data = encode_all(m, "r", v)
    assert data[:3] == bytes.fromhex("4046" "05")  # count 70 as a 2-byte QUIC varint
    assert len(data) == 3 + 140 and decode_all(m, "r", data) == v


@pytest.mark.parametrize("size_type", ["uleb128", "vlq", "quic_varint"])
def test_varint_size_before_a_self_covering_checksum(tmp_path, size_type):
    """A varint size is inserted once its field is written: a self-covering checksum's
    placeholder between them moves with it."""
    import zlib

    m = build_module(SIZED.replace("type: octal12}", f"type: {size_type}}}"), tmp_path, "sized")
    for payload in (b"abc", b"x" * 200):
        data = encode_all(m, "hdr", m.Hdr(payload))
        n = len(data) - len(payload) - 4
        assert data[n:n + 4] == zlib.crc32(data[:n] + bytes(4) + data[n + 4:]).to_bytes(4, "little")
        assert decode_all(m, "hdr", data) == m.Hdr(payload)
