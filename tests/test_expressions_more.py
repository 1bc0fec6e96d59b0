"""Expressions: lookups in key/value lists, bytes literals, enum members by name,
mismatched comparisons as schema errors, two-argument int and string repetition, text
switch tags, zero tails of computed size, and names YAML reads as booleans — on the fast
path (checked, optimistic many-record loop, rows) and the Construct path (interpreted and
compiled), decode and encode."""

from __future__ import annotations

import struct
import zlib

import pytest

from bytewright.generator import pipeline
from bytewright.runtime.errors import ConstraintError, DecodeError, EncodeError, TruncatedError

# -- helpers -------------------------------------------------------------------------------


def all_paths(m, record: str, value, **params) -> bytes:
    """Both encoders give the same bytes; all three decoders give the value back."""
    data = m.ENCODERS[record](value, **params)
    assert m.CONSTRUCT_ENCODERS[record](value, **params) == data
    assert m.CONSTRUCT_ENCODERS[record](value, compiled=True, **params) == data
    back, end = m.DECODERS[record](data, **params)
    assert back == value and end == len(data)
    assert m.CONSTRUCT_DECODERS[record](data, **params) == value
    assert m.CONSTRUCT_DECODERS[record](data, compiled=True, **params) == value
    return data


def same_error(m, record: str, data: bytes, cls=DecodeError, **params) -> tuple:
    """Every decoder refuses ``data`` with the same class, path and offset."""
    seen = []
    for dec in (lambda: m.DECODERS[record](data, **params),
                lambda: m.CONSTRUCT_DECODERS[record](data, **params),
                lambda: m.CONSTRUCT_DECODERS[record](data, compiled=True, **params)):
        with pytest.raises(cls) as info:
            dec()
        seen.append((type(info.value), info.value.path, info.value.offset))
    assert seen[0] == seen[1] == seen[2], seen
    return seen[0]


def same_encode_error(m, record: str, value, **params) -> str:
    """Both encoders refuse ``value`` with the same path (the compiled Construct builder
    refuses it too; Construct's compiled build code keeps no field path)."""
    paths = []
    for enc in (lambda: m.ENCODERS[record](value, **params),
                lambda: m.CONSTRUCT_ENCODERS[record](value, **params)):
        with pytest.raises(EncodeError) as info:
            enc()
        paths.append(info.value.path)
    with pytest.raises(EncodeError):
        m.CONSTRUCT_ENCODERS[record](value, compiled=True, **params)
    assert paths[0] == paths[1], paths
    return paths[0]


def problems(tmp_path, text: str) -> list[str]:
    path = tmp_path / "p.yaml"
    path.write_text(text)
    return [str(p) for p in pipeline.run([path]).problems]


def uleb(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def raw_deflate(data: bytes) -> bytes:
    c = zlib.compressobj(wbits=-15)
    return c.compress(data) + c.flush()


def property_holds(m, tmp_path, text: str, record: str) -> None:
    from bytewright.properties import Builder, run_record
    path = tmp_path / "prop.yaml"
    path.write_text(text)
    fam = next(iter(pipeline.run([path], render_modules=False).families.values()))
    for kind in ("valid", "near"):
        res = run_record(Builder(fam, m), record, max_examples=15, kind=kind, shrink=False)
        assert res.status == "ok", (kind, res.detail, res.example)


# -- lookups -------------------------------------------------------------------------------

AVRO = """
bytewright: 1
family: avroish
records:
  meta_entry:
    fields:
      - {name: name, type: str, length: uleb128}
      - {name: data, type: bytes, length: uleb128}
  object_file:
    fields:
      - {name: magic, type: bytes, size: 4, const: "4f626a01"}
      - {name: meta, type: meta_entry, repeat: {prefix: uleb128}}
      - name: sync
        type: bytes
        size: "int(lookup(meta, 'sync.size', b'16', key=name, value=data))"
      - name: block
        type: bytes
        size: eos
        compressed:
          algorithm: "lookup(meta, 'avro.codec', b'zlib', key=name, value=data)"
          codecs: {deflate: deflate, zlib: zlib, zstd: zstd}
          length: u32
"""


def entry(name: str, data: bytes) -> bytes:
    return uleb(len(name)) + name.encode() + uleb(len(data)) + data


def test_lookup_chooses_size_and_codec_as_documented(schema_module):
    """The docs' Avro-like header: the codec and the sync size come from the metadata."""
    m = schema_module(AVRO)
    plain = b"records " * 20
    v = m.ObjectFile([m.MetaEntry("avro.codec", b"deflate"), m.MetaEntry("sync.size", b"3")],
                    b"abc", plain)
    data = all_paths(m, "object_file", v)
    comp = raw_deflate(plain)  # deflate = raw RFC 1951, computed here independently
    want = (b"Obj\x01" + uleb(2) + entry("avro.codec", b"deflate") + entry("sync.size", b"3")
            + b"abc" + struct.pack("<I", len(comp)) + comp)
    assert data == want
    # no metadata: the defaults (16-byte sync, zlib)
    v2 = m.ObjectFile([], b"s" * 16, plain)
    data2 = all_paths(m, "object_file", v2)
    z = zlib.compress(plain)
    assert data2 == b"Obj\x01\x00" + b"s" * 16 + struct.pack("<I", len(z)) + z
    # the first matching item wins
    v3 = m.ObjectFile([m.MetaEntry("sync.size", b"1"), m.MetaEntry("sync.size", b"5")],
                     b"x", plain)
    assert all_paths(m, "object_file", v3)[5 + len(entry("sync.size", b"1")) * 2] == ord("x")


def test_lookup_schema_holds_the_codec_truth_property(schema_module, tmp_path):
    property_holds(schema_module(AVRO), tmp_path, AVRO, "object_file")


def test_lookup_errors_are_the_same_on_every_path(schema_module):
    m = schema_module(AVRO)
    head = b"Obj\x01" + uleb(1) + entry("avro.codec", b"lzma")
    z = zlib.compress(b"x")
    # unmapped codec value: UnsupportedError at the block, alike everywhere
    cls, path, _ = same_error(m, "object_file", head + b"s" * 16 + struct.pack("<I", len(z)) + z)
    assert path == "object_file.block"
    # a looked-up size larger than the buffer: truncated at the sync field's offset
    head = b"Obj\x01" + uleb(1) + entry("sync.size", b"99")
    cls, path, offset = same_error(m, "object_file", head + b"s" * 5, TruncatedError)
    assert path == "object_file.sync" and offset == len(head)
    # encode: the looked-up size disagrees with the value
    bad = m.ObjectFile([m.MetaEntry("sync.size", b"2")], b"abc", b"")
    assert same_encode_error(m, "object_file", bad) == "object_file.sync"


TLV = """
bytewright: 1
family: tlv
enums:
  kind: {type: u8, values: {NONE: 0, POINT: 1, NAME: 2}}
records:
  tag:
    fields:
      - {name: id, type: u8}
      - {name: kind, type: kind}
  point:
    fields:
      - {name: x, type: i16}
  name:
    fields:
      - {name: text, type: str, length: u8}
  item:
    params: {which: {type: int}}
    fields:
      - {name: tags, type: tag, repeat: {prefix: u8}}
      - name: body
        switch: "lookup(tags, which, kind.NONE, key=id, value=kind)"
        cases: {POINT: point, NAME: name, NONE: empty}
      - {name: n, type: u8}
      - {name: vals, type: u16, repeat: {count: "lookup(tags, 9, 0, key=id, value=kind) * n"}}
  log:
    rows: true
    fields:
      - {name: tags, type: tag, repeat: {prefix: u8}}
      - {name: size, type: u8, if: "lookup(tags, 1, Kind.NONE, key=id, value=kind) == Kind.NAME"}
"""


def test_lookup_as_switch_tag_and_count(schema_module, tmp_path):
    m = schema_module(TLV)
    v = m.Item([m.Tag(3, m.Kind.POINT), m.Tag(9, m.Kind.NAME)], m.Point(-2), 2, [1, 2, 3, 4])
    data = all_paths(m, "item", v, which=3)
    # count = kind of tag 9 (NAME = 2) * n (2) = 4 items
    assert data == bytes([2, 3, 1, 9, 2]) + struct.pack("<h", -2) + b"\x02" + \
        struct.pack("<4H", 1, 2, 3, 4)
    v2 = m.Item([], None, 5, [])  # key missing: default NONE (empty case), count 0
    assert all_paths(m, "item", v2, which=3) == b"\x00\x05"
    v3 = m.Item([m.Tag(4, m.Kind.NAME)], m.Name("hi"), 0, [])
    assert all_paths(m, "item", v3, which=4) == b"\x01\x04\x02\x02hi\x00"
    # decode_many (the optimistic loop) agrees with the checked decoder
    assert m.decode_many_item(data + data, which=3) == [v, v]
    property_holds(m, tmp_path, TLV, "item")


def test_lookup_in_rows_and_many(schema_module):
    m = schema_module(TLV)
    a = m.Log([m.Tag(1, m.Kind.NAME)], 7)
    b = m.Log([m.Tag(1, m.Kind.POINT)], None)
    data = all_paths(m, "log", a) + all_paths(m, "log", b)
    assert data == b"\x01\x01\x02\x07" + b"\x01\x01\x01"
    assert m.decode_many_log(data) == [a, b]
    rows, starts, stop = m.decode_rows_log(data)
    assert len(rows) == 2 and rows[0][1] == 7 and rows[1][1] is None
    assert starts == [0, 4] and stop == len(data)


# -- literals, enum members, int(x, base), repetition -----------------------------------

LITERALS = """
bytewright: 1
family: lits
enums:
  chunk_kind: {type: u8, values: {IHDR: 1, IEND: 2}}
records:
  rec:
    fields:
      - {name: magic, type: bytes, size: 4}
      - {name: kind, type: chunk_kind}
      - {name: text, type: str, length: u8}
      - {name: zip_end, type: u32, if: "magic == b'PK\\\\x05\\\\x06'"}
      - {name: end_mark, type: u8, if: "kind == chunk_kind.IEND"}
      - {name: head_mark, type: u8, if: "kind == ChunkKind.IHDR"}
      - {name: echo, type: u8, if: "text == 'ab' * 2"}
      - {name: tail, type: bytes, size: "len(b'\\\\x00' * 2)"}
  octal:
    fields:
      - {name: mode, type: bytes, size: 3}
      - {name: perms, type: u8, repeat: {count: "int(mode, 8) % 4"}}
      - {name: size, type: str, size: 2, encoding: ascii}
      - {name: data, type: bytes, size: "int(size, 16)"}
"""


def test_bytes_literals_enum_members_and_repetition(schema_module, tmp_path):
    m = schema_module(LITERALS)
    v = m.Rec(b"PK\x05\x06", m.ChunkKind.IEND, "abab", 0xDEADBEEF, 9, None, 4, b"zz")
    data = all_paths(m, "rec", v)
    # the bytes literal matched (zip_end present), IEND by name (end_mark), 'ab' * 2
    assert data == (b"PK\x05\x06" + b"\x02" + b"\x04abab" + struct.pack("<I", 0xDEADBEEF)
                    + b"\x09" + b"\x04zz")
    v2 = m.Rec(b"PK\x03\x04", m.ChunkKind.IHDR, "ab", None, None, 5, None, b"..")
    assert all_paths(m, "rec", v2) == b"PK\x03\x04\x01\x02ab\x05.."
    # a value whose absent field is set is refused alike
    assert same_encode_error(m, "rec", m.Rec(b"PK\x03\x04", m.ChunkKind.IHDR, "ab", 7, None,
                                             5, None, b"..")) == "rec.zip_end"
    property_holds(m, tmp_path, LITERALS, "rec")


def test_two_argument_int_reads_digits_in_a_base(schema_module):
    m = schema_module(LITERALS)
    v = m.Octal(b"017", [1, 2, 3], "0a", b"0123456789")
    # int(b'017', 8) = 15, % 4 = 3 perms; int('0a', 16) = 10 data bytes
    assert all_paths(m, "octal", v) == b"017\x01\x02\x030a0123456789"
    # digits that are not octal: a ConstraintError of the field read, alike everywhere
    _, path, offset = same_error(m, "octal", b"019\x01", ConstraintError)
    assert (path, offset) == ("octal.perms", 3)
    _, path, offset = same_error(m, "octal", b"000zz", ConstraintError)
    assert (path, offset) == ("octal.data", 5)


def test_mismatched_comparisons_are_schema_errors_with_lines(tmp_path):
    text = """bytewright: 1
family: bad
enums:
  a: {type: u8, values: {X: 1}}
  b: {type: u8, values: {Y: 1}}
records:
  kv:
    fields:
      - {name: k, type: u8}
      - {name: v, type: u8}
  r:
    fields:
      - {name: tag, type: bytes, size: 4}
      - {name: s, type: str, length: u8}
      - {name: e, type: a}
      - {name: kvs, type: kv, repeat: {prefix: u8}}
      - {name: x1, type: u8, if: "tag == 'PK'"}
      - {name: x2, type: u8, if: "s == 3"}
      - {name: x3, type: u8, if: "e == b.Y"}
      - {name: x4, type: u8, if: "e == 'X'"}
      - {name: x5, type: u8, if: "lookup(kvs, 'a', 0, key=k, value=v) > 0"}
      - {name: x6, type: u8, if: "lookup(kvs, 1, 0, key=kk, value=v) > 0"}
      - {name: x7, type: u8, if: "e == a.Z"}
      - {name: x8, type: u8, if: "lookup(kvs, 1) > 0"}
      - {name: x9, type: u8, if: "tag == b'PK' and e == a.X and s == 'hi' * 2"}
"""
    got = problems(tmp_path, text)
    assert any(":17: error: records.r.fields[4].if: tag == 'PK' compares bytes with a str" in p
               for p in got), got
    assert any(":18: error:" in p and "s == 3 compares a str with an integer" in p for p in got)
    assert any(":19: error:" in p and "enum 'a' with a member of enum 'b'" in p for p in got)
    assert any(":20: error:" in p and "(write ENUM.MEMBER)" in p for p in got)
    assert any(":21: error:" in p and "lookup key 'a'" in p for p in got)
    assert any(":22: error:" in p and "have no field 'kk'" in p for p in got)
    assert any(":23: error:" in p and "enum 'a' has no member 'Z'" in p for p in got)
    assert any(":24: error:" in p and "lookup takes a list, a key and a default" in p
               for p in got)
    assert not any(":25:" in p for p in got), got  # well-typed comparisons are fine
    assert len(got) == 8


# -- text switch tags, zero tails, boolean names -----------------------------------------

TEXT_TAGS = """
bytewright: 1
family: texttags
records:
  ihdr:
    fields:
      - {name: w, type: u8}
  iend:
    fields: []
  chunk:
    fields:
      - {name: kind, type: str, size: 4, encoding: ascii}
      - {name: body, switch: kind, cases: {"IHDR": ihdr, "hex:49454e44": iend}, default: bytes}
  tail_eos:
    fields:
      - {name: a, type: u8}
      - {name: pad, type: bytes, size: eos, reserved: zero}
  tail_expr:
    fields:
      - {name: a, type: u8}
      - {name: pad, type: bytes, size: "a * 2", reserved: zero}
      - {name: b, type: u8}
"""


def test_text_switch_tags_take_text_and_hex_labels(schema_module, tmp_path):
    m = schema_module(TEXT_TAGS)
    assert all_paths(m, "chunk", m.Chunk("IHDR", m.Ihdr(5))) == b"IHDR\x05"
    assert all_paths(m, "chunk", m.Chunk("IEND", m.Iend())) == b"IEND"  # the hex label
    assert all_paths(m, "chunk", m.Chunk("tEXt", b"hi")) == b"tEXthi"  # default: bytes
    assert m.decode_chunk(b"IEND")[0].body == m.Iend()
    property_holds(m, tmp_path, TEXT_TAGS, "chunk")
    bad = TEXT_TAGS.replace('"hex:49454e44": iend', '7: iend')
    assert any("case label 7 of a str tag must be text" in p for p in problems(tmp_path, bad))


def test_zero_tails_of_any_size_on_every_path(schema_module):
    m = schema_module(TEXT_TAGS)
    assert all_paths(m, "tail_eos", m.TailEos(1)) == b"\x01"
    assert m.decode_tail_eos(b"\x01\x00\x00\x00")[0] == m.TailEos(1)
    assert m.construct_decode_tail_eos(b"\x01\x00\x00\x00", compiled=True) == m.TailEos(1)
    _, path, offset = same_error(m, "tail_eos", b"\x01\x00\x00\x01\x00", ConstraintError)
    assert (path, offset) == ("tail_eos.pad", 1)
    assert all_paths(m, "tail_expr", m.TailExpr(2, 7)) == b"\x02\x00\x00\x00\x00\x07"
    _, path, offset = same_error(m, "tail_expr", b"\x02\x00\x00\x09\x00\x07", ConstraintError)
    assert (path, offset) == ("tail_expr.pad", 1)
    same_error(m, "tail_expr", b"\x03\x00\x00", TruncatedError)


@pytest.mark.parametrize("word", ["on", "yes", "no", "off"])
def test_names_yaml_reads_as_booleans_say_so(tmp_path, word):
    base = "bytewright: 1\nfamily: b\nrecords:\n  r:\n"
    got = problems(tmp_path, base + f"    params: {{{word}: {{type: int}}}}\n"
                   "    fields:\n      - {name: a, type: u8}\n")
    assert len(got) == 1 and ":5: error: records.r.params[" in got[0]
    assert "YAML boolean" in got[0] and 'quote the name, e.g. "on"' in got[0]
    got = problems(tmp_path, base + f"    fields:\n      - {{name: {word}, type: u8}}\n")
    assert len(got) == 1 and ":6: error: records.r.fields[0].name" in got[0]
    assert "YAML reads an unquoted" in got[0] and "quote it" in got[0]
    # quoted, the name is fine
    assert problems(tmp_path, base + f'    params: {{"{word}": {{type: int}}}}\n'
                    "    fields:\n      - {name: a, type: u8}\n") == []


# -- bytes params ------------------------------------------------------------------------

BLOCKS = """
bytewright: 1
family: blocks
records:
  kv:
    fields:
      - {name: key, type: str, length: u8}
      - {name: value, type: bytes, length: u8}
  file:
    fields:
      - {name: meta, type: kv, repeat: {prefix: u8}}
      - {name: sync, type: bytes, size: 4}
      - name: blocks
        type: block
        repeat: eos
        args: {header_sync: sync, codec: "lookup(meta, 'codec', b'null')"}
  block:
    params:
      header_sync: {type: bytes}
      codec: {type: bytes}
    fields:
      - {name: n, type: u8}
      - {name: data, type: bytes, size: n}
      - {name: extra, type: u8, if: "codec == b'deflate'"}
      - name: sync
        type: bytes
        size: 4
        assert: [{check: "sync == header_sync", message: "block sync marker differs"}]
"""


def test_bytes_params_carry_header_values_into_items(schema_module):
    m = schema_module(BLOCKS)
    v = m.File([m.Kv("codec", b"deflate")], b"SYNC",
               [m.Block(b"ab", 7, b"SYNC"), m.Block(b"", 8, b"SYNC")])
    data = all_paths(m, "file", v)
    assert data == (b"\x01" + b"\x05codec\x07deflate" + b"SYNC"
                    + b"\x02ab\x07SYNC" + b"\x00\x08SYNC")
    plain = m.File([], b"ABCD", [m.Block(b"x", None, b"ABCD")])
    assert all_paths(m, "file", plain) == b"\x00ABCD\x01x" + b"ABCD"
    # a block whose marker differs from the header's: refused alike, at that block
    bad = b"\x00ABCD\x01x" + b"ABCE"
    cls, path, offset = same_error(m, "file", bad, ConstraintError)
    assert path == "file.blocks[0].sync" and offset == 7
    assert m.decode_block(b"\x00WXYZ", header_sync=b"WXYZ", codec=b"null")[0] == \
        m.Block(b"", None, b"WXYZ")


NESTED = """
bytewright: 1
family: nested
records:
  kv:
    fields:
      - {name: key, type: u8}
      - {name: value, type: u16}
  header:
    fields:
      - {name: meta, type: kv, repeat: {prefix: u8}}
  msg:
    fields:
      - {name: header, type: header}
      - {name: body, type: bytes, size: "lookup(header.meta, 1, 2)"}
"""


def test_lookup_over_a_list_inside_a_sub_record(schema_module, tmp_path):
    m = schema_module(NESTED)
    v = m.Msg(m.Header([m.Kv(7, 9), m.Kv(1, 3)]), b"abc")
    assert all_paths(m, "msg", v) == b"\x02\x07\x09\x00\x01\x03\x00abc"
    assert all_paths(m, "msg", m.Msg(m.Header([]), b"xy")) == b"\x00xy"  # the default: 2
    cls, path, offset = same_error(m, "msg", b"\x01\x01\x05\x00abc", TruncatedError)
    assert (path, offset) == ("msg.body", 4)
    property_holds(m, tmp_path, NESTED, "msg")
