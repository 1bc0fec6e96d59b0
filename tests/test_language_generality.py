"""Language generality (non-registry half): every construct on both codec
paths (fast, Construct interpreted and compiled), decode and encode, on small schemas
written here and generated through ``generator.pipeline.run``."""

from __future__ import annotations

import keyword
import math
import struct

import pytest

from bytewright.generator import pipeline
from bytewright.runtime.codec import LogList, StopReason
from bytewright.runtime.errors import (
    ConstraintError,
    DecodeError,
    EncodeError,
    TruncatedError,
)


def both_paths(m, record: str, value, **params) -> bytes:
    """Encode on both paths (identical bytes), decode on all three paths (same value)."""
    data = m.ENCODERS[record](value, **params)
    assert m.CONSTRUCT_ENCODERS[record](value, **params) == data
    assert m.CONSTRUCT_ENCODERS[record](value, compiled=True, **params) == data
    back, end = m.DECODERS[record](data, **params)
    assert back == value and end == len(data)
    assert m.CONSTRUCT_DECODERS[record](data, **params) == value
    assert m.CONSTRUCT_DECODERS[record](data, compiled=True, **params) == value
    return data


def all_fail(m, record: str, data: bytes, error=DecodeError, **params) -> None:
    with pytest.raises(error):
        m.DECODERS[record](data, **params)
    with pytest.raises(DecodeError):
        m.CONSTRUCT_DECODERS[record](data, **params)
    with pytest.raises(DecodeError):
        m.CONSTRUCT_DECODERS[record](data, compiled=True, **params)


def problems(tmp_path, text: str) -> list[str]:
    path = tmp_path / "p.yaml"
    path.write_text(text)
    return [str(p) for p in pipeline.run([path]).problems]


# -- 1. any integer encoding as length, count, tag, constant ---------------------------

INTS = """
bytewright: 1
family: ints
enums:
  kind: {type: u8, values: {A: 1, B: 2}}
records:
  body_a:
    fields:
      - {name: x, type: sleb128}
  rec:
    fields:
      - {name: magic, type: uleb128, const: 300}
      - {name: key, type: bytes, length: uleb128}
      - {name: name, type: str, length: sleb128}
      - {name: big, type: bytes, length: u32be}
      - {name: items, type: zigzag, repeat: {prefix: uleb128}}
      - {name: words, type: u16, repeat: {prefix: zigzag}}
      - {name: n, type: zigzag}
      - {name: tag, type: uleb128}
      - {name: body, switch: tag, cases: {1: body_a, 200: empty}}
      - {name: total, type: uleb128, value: "len(key) + 1"}
  sized:
    fields:
      - {name: length, type: uleb128}
      - {name: data, type: bytes, size: length}
      - {name: after, type: u8}
"""


def test_varints_as_length_count_tag_const_value(schema_module):
    m = schema_module(INTS)
    v = m.Rec(b"k" * 200, "nm", b"BE", [-1, 5, -300], [7, 8], -7, 1, m.BodyA(-65))
    data = both_paths(m, "rec", v)
    assert data[:2] == b"\xac\x02"  # const 300 as ULEB128
    assert data[2:4] == b"\xc8\x01" and data[4:204] == b"k" * 200  # 2-byte varint length
    assert data[204:207] == b"\x02nm"  # sleb128 length
    assert data[207:213] == b"\x00\x00\x00\x02BE"  # big-endian u32 length
    assert data[-2:] == b"\xc9\x01"  # value: len(key) + 1 = 201
    v2 = m.Rec(b"", "", b"", [], [], 0, 200, None)
    both_paths(m, "rec", v2)
    bad = bytearray(m.encode_rec(v2))
    bad[0] = 0x2D  # the constant 300 broken
    all_fail(m, "rec", bytes(bad), ConstraintError)
    all_fail(m, "rec", m.encode_rec(v2)[:-1], TruncatedError)


def test_varint_derived_size_has_the_right_width(schema_module):
    """The Construct path used to write a 1-byte placeholder: 201 bytes, not 202."""
    m = schema_module(INTS)
    v = m.Sized(b"x" * 200, 7)
    data = both_paths(m, "sized", v)
    assert len(data) == 2 + 200 + 1 and data[:2] == b"\xc8\x01"
    small = both_paths(m, "sized", m.Sized(b"ab", 1))
    assert small == b"\x02ab\x01"
    all_fail(m, "sized", b"\x05ab\x01")


def test_sleb128_and_zigzag_round_trip_extremes():
    from bytewright.runtime import varint

    for x in (0, 1, -1, 63, -64, 64, -65, 2**63 - 1, -(2**63)):
        for kind in ("sleb128", "zigzag"):
            enc = varint.ENCODERS[kind](x)
            assert varint.DECODERS[kind](enc) == (x, len(enc))
    assert varint.encode_sleb128(-1) == b"\x7f" and varint.encode_sleb128(64) == b"\xc0\x00"
    assert varint.encode_zigzag(-1) == b"\x01" and varint.encode_zigzag(1) == b"\x02"
    with pytest.raises(EncodeError):
        varint.encode_sleb128(2**63)


# -- 2. terminated strings and bytes ---------------------------------------------------

TERM = """
bytewright: 1
family: term
records:
  rec:
    fields:
      - {name: cstr, type: str, terminator: 0}
      - {name: line, type: bytes, terminator: "hex:0d0a"}
      - {name: tail, type: u8}
"""


def test_terminated_strings_and_bytes(schema_module):
    m = schema_module(TERM)
    v = m.Rec("héllo", b"a\rb\nc", 9)
    data = both_paths(m, "rec", v)
    assert data == "héllo".encode() + b"\x00a\rb\nc\r\n\x09"
    all_fail(m, "rec", b"abc", TruncatedError)  # no terminator
    all_fail(m, "rec", b"x\x00no-crlf\n\x09", TruncatedError)
    for enc in (m.encode_rec, m.construct_encode_rec):
        with pytest.raises(EncodeError):
            enc(m.Rec("a\x00b", b"", 0))
        with pytest.raises(EncodeError):
            enc(m.Rec("", b"x\r\ny", 0))


# -- 3. repeat until a condition on the last item ------------------------------------

PNGLIKE = """
bytewright: 1
family: pnglike
records:
  chunk:
    fields:
      - {name: length, type: u32be}
      - {name: ctype, type: str, size: 4, encoding: ascii}
      - {name: data, type: bytes, size: length}
      - {name: crc, type: u32be, checksum: {algorithm: crc32, covers: [ctype, data]}}
  png:
    fields:
      - {name: signature, type: bytes, size: 8, const: "89504e470d0a1a0a"}
      - {name: chunks, type: chunk, repeat: {until_item: "_item.ctype == 'IEND'"}}
      - {name: trailer, type: bytes, size: eos}
"""


def test_repeat_until_item_condition_png(schema_module):
    import zlib

    m = schema_module(PNGLIKE)
    # real PNG bytes: an 1x1 grey image made here, chunk by chunk
    ihdr = struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0)
    idat = zlib.compress(b"\x00\x7f")
    v = m.Png([m.Chunk("IHDR", ihdr), m.Chunk("IDAT", idat), m.Chunk("IEND", b"")], b"")
    data = both_paths(m, "png", v)

    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    assert data == (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat)
                    + chunk(b"IEND", b""))
    # bytes after IEND are not chunks: the repeat ended at IEND
    back, _ = m.decode_png(data + b"junk")
    assert back.trailer == b"junk" and len(back.chunks) == 3
    all_fail(m, "png", data[:-12], TruncatedError)  # IEND missing: the region ends first
    for enc in (m.encode_png, m.construct_encode_png):  # IEND must be last and only last
        with pytest.raises((EncodeError, Exception)):
            enc(m.Png([m.Chunk("IEND", b""), m.Chunk("IDAT", b"")], b""))


UNTIL = """
bytewright: 1
family: until
records:
  rec:
    fields:
      - {name: ids, type: uleb128, repeat: {until: 0}}
      - {name: rest, type: u16, repeat: eos}
"""


def test_repeat_until_terminator_and_to_region_end(schema_module):
    m = schema_module(UNTIL)
    data = both_paths(m, "rec", m.Rec([5, 300], [1, 2]))
    assert data == b"\x05\xac\x02\x00\x01\x00\x02\x00"
    all_fail(m, "rec", data[:-1])  # a partial last item is an error on every path


# -- 4. sizes relative to the region end, _offset / _remaining -------------------------

REL = """
bytewright: 1
family: rel
records:
  rec:
    fields:
      - {name: head, type: u8}
      - {name: at, type: u8, value: "_offset"}
      - {name: body, type: bytes, size: "_remaining - 4"}
      - {name: crc, type: u32, checksum: {algorithm: crc32, covers: [body]}}
  opt:
    fields:
      - {name: a, type: u8}
      - {name: extra, type: u16, if: "_remaining >= 2"}
"""


def test_size_relative_to_region_end_and_offset(schema_module):
    m = schema_module(REL)
    v = m.Rec(1, b"payload")
    data = both_paths(m, "rec", v)
    assert data[:2] == b"\x01\x01" and data[2:-4] == b"payload" and len(data) == 13
    all_fail(m, "rec", data[:3])  # fewer than 4 bytes left: negative size
    both_paths(m, "opt", m.Opt(1, 515))
    both_paths(m, "opt", m.Opt(1, None))
    assert m.decode_opt(b"\x01\x03\x02")[0].extra == 515
    assert m.decode_opt(b"\x01")[0].extra is None


# -- 5. a sequence that ends at the first record failing validation -------------------

LOG = """
bytewright: 1
family: log
records:
  entry:
    fields:
      - {name: n, type: u8, valid: {max: 100}}
      - {name: body, type: bytes, size: n}
      - {name: crc, type: u32, checksum: {algorithm: crc32, covers: preceding}}
  log:
    fields:
      - {name: entries, type: entry, repeat: {eos: true, stop_on_error: true}}
"""


@pytest.mark.parametrize("damage,reason,kept", [
    (lambda d: d, None, 2),
    (lambda d: d[:-1] + bytes([d[-1] ^ 1]), "checksum", 1),
    (lambda d: d[:-2], "truncated", 1),
    (lambda d: d + b"\xff", "constraint", 2),
])
def test_log_ends_at_first_invalid_record(schema_module, damage, reason, kept):
    m = schema_module(LOG)
    v = m.Log([m.Entry(b"ab"), m.Entry(b"cde")])
    good = both_paths(m, "log", v)
    data = damage(good)
    results = [m.decode_log(data)[0], m.construct_decode_log(data),
               m.construct_decode_log(data, compiled=True)]
    for r in results:
        assert isinstance(r.entries, LogList) and len(r.entries) == kept
        if reason is None:
            assert r.entries.stop is None
        else:
            assert r.entries.stop.reason == reason
            assert r.entries.stop.offset == (7 if kept == 1 else 15)  # the failing record
    assert results[0] == results[1] == results[2]
    assert StopReason(7, "checksum") == StopReason(7, "checksum", "other text")


# -- 6. enum-scoped case labels -----------------------------------------------------

SCOPED = """
bytewright: 1
family: scoped
enums:
  op: {type: u8, values: {PUT: 1, DEL: 2}}
  unrelated: {type: u8, values: {PUT: 9}}
records:
  put: {fields: [{name: x, type: u8}]}
  hdr: {fields: [{name: op, type: op}]}
  rec:
    fields:
      - {name: op, type: op}
      - {name: body, switch: op, cases: {PUT: put, op.DEL: empty}}
  nested:
    fields:
      - {name: h, type: hdr}
      - {name: body, switch: h.op, cases: {PUT: put, DEL: empty}}
"""


def test_case_labels_resolve_against_the_tags_enum(schema_module, tmp_path):
    m = schema_module(SCOPED)
    assert both_paths(m, "rec", m.Rec(m.Op.PUT, m.Put(5))) == b"\x01\x05"
    assert both_paths(m, "rec", m.Rec(m.Op.DEL, None)) == b"\x02"
    assert both_paths(m, "nested", m.Nested(m.Hdr(m.Op.PUT), m.Put(3))) == b"\x01\x03"
    bad = SCOPED.replace("op.DEL: empty", "unrelated.PUT: empty")
    assert any("not of the tag's enum" in p for p in problems(tmp_path, bad))
    bad = SCOPED.replace("op.DEL: empty", "GONE: empty")
    assert any("not a member of enum 'op'" in p for p in problems(tmp_path, bad))


# -- 7. names: every Python keyword refused with file:line:path ------------------------

@pytest.mark.parametrize("word", keyword.kwlist)
def test_python_keywords_refused_as_field_and_member_names(tmp_path, word):
    as_field = f"""
bytewright: 1
family: kw
records:
  r:
    fields:
      - {{name: ok, type: u8}}
      - {{name: "{word}", type: u8}}
"""
    as_member = f"""
bytewright: 1
family: kw
enums:
  e: {{type: u8, values: {{"{word}": 1, OK: 2}}}}
records:
  r:
    fields:
      - {{name: ok, type: e}}
"""
    found = problems(tmp_path, as_field)
    # lower-case keywords reach the name check; True/False/None already fail the JSON
    # Schema's snake_case pattern -- either way a file:line:path problem, no module
    assert len(found) == 1 and "p.yaml:8: error: records.r.fields[1].name" in found[0], found
    assert "Python keyword" in found[0] or "does not match" in found[0]
    found = problems(tmp_path, as_member)
    assert len(found) == 1 and f"p.yaml:5: error: enums.e.values.{word}" in found[0], found
    assert "Python keyword" in found[0]


def test_names_the_module_uses_are_refused(tmp_path):
    text = """
bytewright: 1
family: clash
records:
  struct:
    params: {buf: {type: int}}
    fields:
      - {name: _hidden, type: u8}
"""
    found = " | ".join(problems(tmp_path, text))
    assert "'Struct'" in found and "param name 'buf'" in found and "'_hidden'" in found


def test_expression_function_names_usable_as_fields(schema_module):
    m = schema_module("""
bytewright: 1
family: fnames
records:
  r:
    fields:
      - {name: len, type: u8}
      - {name: min, type: u8}
      - {name: data, type: bytes, size: "len"}
      - {name: top, type: u8, value: "max(len, min)"}
""")
    data = both_paths(m, "r", m.R(1, b"abc"))
    assert data == b"\x03\x01abc\x03"


# -- 8. strict Construct path: NaN bits, region ends, no hangs -----------------------

NAN = """
bytewright: 1
family: nan
records:
  vec:
    fields:
      - {name: n, type: u32}
      - {name: values, type: f32, repeat: {count: n}, view: numpy}
  items:
    fields:
      - {name: xs, type: u16, repeat: eos}
"""


def test_signalling_nan_bits_kept_on_both_paths(schema_module):
    m = schema_module(NAN)
    data = b"\x02\x00\x00\x00" + bytes.fromhex("0100807f") + struct.pack("<f", 1.5)
    fast = m.decode_vec(data)[0]
    for c in (m.construct_decode_vec(data), m.construct_decode_vec(data, compiled=True)):
        assert c.values.tobytes() == fast.values.tobytes() == data[4:]
        assert math.isnan(c.values[0])
    assert m.construct_encode_vec(fast) == data == m.encode_vec(fast)


def test_partial_last_item_is_an_error_on_every_path(schema_module):
    m = schema_module(NAN)
    assert both_paths(m, "items", m.Items([1, 2])) == b"\x01\x00\x02\x00"
    all_fail(m, "items", b"\x01\x00\x02", TruncatedError)


def test_zero_size_records_do_not_hang_iteration():
    from bytewright.generated import htt

    with pytest.raises(DecodeError):
        list(htt.iter_tail_full(b"\x00", semantic_dims=0))


def test_expression_on_another_switch_case_is_a_decode_error():
    """generated/ze.py read f_begin.payload.change_count when the first frame is not a
    Begin frame (AttributeError); now a DecodeError with an offset, on every path."""
    from bytewright.generated import ze
    from bytewright.review import checks

    fx = next(f for f in checks.fixtures() if f.path.stem == "wal_graph_commit_v1")
    env, _ = ze.decode_graph_envelope(fx.data[14:-8])
    first_not_begin = ze.encode_zgw_frame(env.changes[0])  # a change where Begin belongs
    data = first_not_begin + ze.encode_zgw_frame(env.commit)
    with pytest.raises(DecodeError) as exc:
        ze.decode_graph_envelope(data)
    assert exc.value.offset is not None and "change_count" in exc.value.message
    for compiled in (False, True):
        with pytest.raises(DecodeError):
            ze.construct_decode_graph_envelope(data, compiled=compiled)


def test_varint_rules_and_zigzag_equals_uleb128_with_convert(schema_module):
    m = schema_module("""
bytewright: 1
family: vrules
records:
  r:
    fields:
      - {name: id, type: uleb128, valid: {min: 1, max: 1000}}
      - {name: a, type: zigzag}
      - {name: b, type: uleb128, convert: zigzag}
""")
    data = both_paths(m, "r", m.R(5, -3, -3))
    assert data == b"\x05\x05\x05"  # zigzag(-3) = 5, whichever way it is written
    all_fail(m, "r", b"\x00\x05\x05", ConstraintError)  # below valid.min
    all_fail(m, "r", b"\xe9\x07\x05\x05", ConstraintError)  # 1001 above valid.max
    all_fail(m, "r", b"\x05\x05\x85", TruncatedError)  # varint cut by the end


def test_zero_size_items_refused_not_looped(schema_module):
    m = schema_module("""
bytewright: 1
family: zero
records:
  nothing:
    fields:
      - {name: xs, type: u8, repeat: {count: 0}}
  many:
    fields:
      - {name: items, type: nothing, repeat: eos}
""")
    all_fail(m, "many", b"\x01", ConstraintError)
    with pytest.raises(ConstraintError):
        list(m.iter_nothing(b"\x00"))


@pytest.mark.parametrize("schema,record,make", [
    (INTS, "rec", lambda m: m.Rec(b"k" * 130, "nm", b"BE", [-1, 5], [7], -7, 1, m.BodyA(-65))),
    (INTS, "sized", lambda m: m.Sized(b"x" * 140, 7)),
    (TERM, "rec", lambda m: m.Rec("héllo", b"a\rb", 9)),
    (PNGLIKE, "png", lambda m: m.Png([m.Chunk("IHDR", b"1234"), m.Chunk("IEND", b"")], b"")),
    (REL, "rec", lambda m: m.Rec(1, b"payload")),
    (LOG, "log", lambda m: m.Log([m.Entry(b"ab"), m.Entry(b"cde"), m.Entry(b"")])),
    (UNTIL, "rec", lambda m: m.Rec([5, 300, 1], [1, 2])),
])
def test_new_constructs_agree_on_corrupted_input(schema_module, schema, record, make):
    """Truncations, bit flips and overwritten bytes: same value or an error on every path."""
    import random

    m = schema_module(schema)
    data = both_paths(m, record, make(m))
    rng = random.Random(len(data))
    inputs = [data[:i] for i in range(len(data))]
    for _ in range(150):
        buf = bytearray(data)
        buf[rng.randrange(len(buf))] ^= 1 << rng.randrange(8)
        inputs.append(bytes(buf))
    for raw in inputs:
        got = []
        for fn in (lambda d: m.DECODERS[record](d)[0], m.CONSTRUCT_DECODERS[record],
                   lambda d: m.CONSTRUCT_DECODERS[record](d, compiled=True)):
            try:
                got.append(("ok", fn(raw)))
            except DecodeError:
                got.append(("error", None))
        assert got[0] == got[1] == got[2], (raw.hex(), got)
