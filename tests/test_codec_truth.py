"""Both codec paths tell the truth (ARCHITECTURE.md, "Open to any format"): every generated
encoder returns bytes that decode to the value it was given or raises ``EncodeError``; both
decoders raise the same project error class, at the same field path and offset.

Small user schemas are generated into ``tmp_path`` through the CLI, as a user would.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bytewright.runtime import errors as E

BW = str(Path(sys.executable).with_name("bytewright"))

SCHEMAS = {
    "zz": """
        records:
          rec:
            fields:
              - {name: n, type: zigzag}
              - {name: data, type: bytes, size: n, if: "n >= 0"}
        """,
    "eosres": """
        records:
          rec:
            fields:
              - {name: a, type: u8}
              - {name: trailer, type: bytes, size: eos, reserved: zero}
        """,
    "rem": """
        records:
          a_file:
            fields:
              - {name: blocks, type: blk, repeat: eos}
          blk:
            fields:
              - {name: content, type: inner, size: "min(4, _remaining)"}
          inner:
            fields:
              - {name: items, type: u8, repeat: eos}
        """,
    "strsize": """
        records:
          adjacent:
            fields:
              - {name: n, type: u16}
              - {name: name, type: str, size: n}
          apart:
            fields:
              - {name: n, type: u16}
              - {name: m, type: u16}
              - {name: name, type: str, size: n}
              - {name: extra, type: bytes, size: m}
        """,
    "negck": """
        records:
          neg:
            fields:
              - {name: items, type: u16, repeat: {prefix: zigzag}}
          compif:
            params: {flag: {type: int, default: 1}}
            fields:
              - {name: a, type: u32}
              - {name: body, type: bytes, size: 4, compressed: {algorithm: deflate}}
              - {name: chk, type: u32, if: "flag == 1", checksum: {algorithm: crc32, covers: [body]}}
              - {name: tail, type: u32}
        """,
    "psize": """
        records:
          rec:
            params: {n: {type: int}}
            fields:
              - {name: items, type: u8, repeat: eos, size: "n - 1"}
              - {name: tail, type: u8}
        """,
    "typed": """
        enums:
          kind: {type: u8, values: {A: 1, B: 2}}
        records:
          item:
            fields:
              - {name: x, type: kind}
              - {name: y, type: u16}
          rec:
            fields:
              - {name: magic, type: u8, const: 7}
              - {name: items, type: item, repeat: {prefix: u8}}
              - {name: label, type: str, length: u8}
              - {name: kinds, type: kind, repeat: {prefix: u8}}
        """,
    "rules": """
        enums:
          tag: {type: u8, values: {A: 1, B: 2, NONE: 3}}
        records:
          a_body:
            fields:
              - {name: x, type: u8}
          b_body:
            fields:
              - {name: y, type: u8}
          edge:
            fields:
              - {name: head, type: bytes, size: 4}
              - {name: lo, type: u8}
              - {name: hi, type: u8, assert: [{check: "hi > lo", message: "hi must exceed lo"}]}
          rec:
            fields:
              - {name: version, type: u8, valid: {min: 1, max: 4}}
              - {name: tag, type: tag}
              - {name: body, switch: tag, cases: {A: a_body, B: b_body, NONE: empty}}
              - {name: present, type: u8}
              - {name: extra, type: u16, if: "present == 1"}
              - {name: edges, type: edge, repeat: {prefix: u8}}
        """,
    "absent": """
        records:
          rec:
            fields:
              - {name: version, type: u8}
              - name: n
                type: u32
                if: "version == 2"
                assert: [{check: "n >= 1", message: "needs a row"}]
              - {name: rows, type: u8, repeat: {count: n}, if: "version == 2"}
              - {name: id, type: uleb128}
        """,
    "countvalid": """
        records:
          rec:
            fields:
              - {name: n, type: u8, valid: {min: 1, max: 4}}
              - {name: items, type: u8, repeat: {count: n}}
        """,
    "sizerule": """
        records:
          rec:
            fields:
              - {name: rows, type: u8}
              - name: blen
                type: u8
                assert: [{check: "blen == (rows + 7) // 8", message: "bitmap length must be ceil(rows/8)"}]
              - {name: bitmap, type: bytes, size: blen}
        """,
    "valuerule": """
        records:
          rec:
            fields:
              - {name: offset, type: uleb128}
              - name: length
                type: uleb128
                value: "len(data)"
                assert: [{check: "offset + length <= 255", message: "reaches past 255"}]
              - {name: data, type: bytes, size: length}
        """,
    "npview": """
        records:
          rec:
            params: {n: {type: int}}
            fields:
              - {name: values, type: f32, repeat: {count: n}, view: numpy}
        """,
    "runs": """
        records:
          rec:
            versions: {from: version, range: [1, 2]}
            fields:
              - {name: magic, type: bytes, size: 2, const: "4142"}
              - {name: version, type: u8}
              - {name: n, type: u32}
              - {name: label, type: str, length: u8}
              - {name: tags, type: u16, repeat: {prefix: uleb128}}
              - {name: kind, type: u8, assert: [{check: "kind < 5", error: unsupported, message: "kind of a later version"}]}
        """,
}


@pytest.fixture(scope="module")
def gen(tmp_path_factory):
    root = tmp_path_factory.mktemp("truth")
    cache: dict = {}

    def load(name: str):
        if name not in cache:
            src = root / f"{name}.yaml"
            src.write_text(f"bytewright: 1\nfamily: {name}\n" + textwrap.dedent(SCHEMAS[name]))
            out = root / name
            out.mkdir(exist_ok=True)
            run = subprocess.run([BW, "generate", str(src), "-o", str(out)], cwd=root,
                                 capture_output=True, text=True, timeout=120)
            assert run.returncode == 0, run.stderr
            spec = importlib.util.spec_from_file_location(f"truth_{name}", out / f"{name}.py")
            mod = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = mod
            spec.loader.exec_module(mod)
            cache[name] = mod
        return cache[name]
    return load


def paths(m, rec: str):
    return ((getattr(m, f"encode_{rec}"), getattr(m, f"decode_{rec}")),
            (getattr(m, f"construct_encode_{rec}"), getattr(m, f"construct_decode_{rec}")))


def truthful(m, rec: str, value, **params) -> list[str]:
    """Per path: 'ok' (round trip) or 'EncodeError'; fails on a lie or another exception."""
    out = []
    for enc, dec in paths(m, rec):
        try:
            data = enc(value, **params)
        except E.EncodeError:
            out.append("EncodeError")
            continue
        got = dec(data, **params)
        got = got[0] if isinstance(got, tuple) else got
        assert got == value, f"{enc.__name__} wrote {data.hex()}, read back as {got!r}"
        out.append("ok")
    return out


def decode_errors(m, rec: str, data: bytes, **params) -> list[tuple]:
    out = []
    for dec in (getattr(m, f"decode_{rec}"), getattr(m, f"construct_decode_{rec}")):
        with pytest.raises(E.DecodeError) as info:
            dec(data, **params)
        out.append((type(info.value).__name__, info.value.path, info.value.offset))
    return out


# -- encoders that crashed or lied --------------------------------------------------------------

def test_zigzag_size_read_by_the_condition_of_its_own_field(gen):
    m = gen("zz")
    assert truthful(m, "rec", m.Rec(data=b"abc")) == ["ok", "ok"]
    # absent: no size the encoder could derive (any negative value would do)
    assert truthful(m, "rec", m.Rec(data=None)) == ["EncodeError", "EncodeError"]


def test_reserved_zero_bytes_to_the_end(gen):
    m = gen("eosres")
    assert truthful(m, "rec", m.Rec(a=5)) == ["ok", "ok"]
    assert m.decode_rec(b"\x05\x00\x00")[0] == m.Rec(a=5)
    assert decode_errors(m, "rec", b"\x05\x00\x01") == [
        ("ConstraintError", "rec.trailer", 1), ("ConstraintError", "rec.trailer", 1)]


@pytest.mark.parametrize("rec, value", [("adjacent", {"name": "abc"}),
                                        ("apart", {"name": "abc", "extra": b"xy"})])
def test_str_sized_by_a_derived_field(gen, rec, value):
    m = gen("strsize")
    assert truthful(m, rec, m.RECORDS[rec](**value)) == ["ok", "ok"]


def test_size_expression_over_a_parameter(gen):
    m = gen("psize")
    assert truthful(m, "rec", m.Rec(items=[1], tail=9), n=2) == ["ok", "ok"]
    # 3 items where the size expression says 1 byte: refused, not written to be misread
    assert truthful(m, "rec", m.Rec(items=[1, 2, 3], tail=9), n=2) == \
        ["EncodeError", "EncodeError"]
    # fewer bytes than the size is refused too (zeros padded on would read as items)
    assert truthful(m, "rec", m.Rec(items=[], tail=9), n=3) == ["EncodeError", "EncodeError"]
    with pytest.raises(E.EncodeError) as info:
        m.encode_rec(m.Rec(items=[1, 2, 3], tail=9), n=2)
    assert info.value.path == "rec.items"


def test_size_from_bytes_remaining(gen):
    m = gen("rem")
    lie = m.AFile(blocks=[m.Blk(content=m.Inner(items=[1, 2, 3, 4, 5])),
                          m.Blk(content=m.Inner(items=[6]))])
    assert truthful(m, "a_file", lie) == ["EncodeError", "EncodeError"]
    fine = m.AFile(blocks=[m.Blk(content=m.Inner(items=[1, 2, 3, 4])),
                           m.Blk(content=m.Inner(items=[5, 6]))])
    assert truthful(m, "a_file", fine) == ["ok", "ok"]


# -- one error contract on both decoders ---------------------------------------------------------

def test_negative_zigzag_count_is_a_constraint_on_both_paths(gen):
    m = gen("negck")
    got = decode_errors(m, "neg", b"\x01\x00\x00")
    assert [g[0] for g in got] == ["ConstraintError", "ConstraintError"]


def test_checksum_under_a_condition_reports_its_own_offset(gen):
    m = gen("negck")
    data = bytearray(m.encode_compif(m.Compif(a=1, body=b"abcd", tail=2)))
    at = len(data) - 8
    data[at] ^= 1
    got = decode_errors(m, "compif", bytes(data))
    assert got == [("ChecksumError", "compif.chk", at)] * 2


def test_construct_errors_carry_item_path_and_offset(gen):
    m = gen("typed")
    good = m.encode_rec(m.Rec(items=[m.Item(x=m.Kind.A, y=1)] * 3, label="hi", kinds=[]))
    bad = bytearray(good)
    bad[2 + 3 * 2] = 9  # item 2's x: not a member of the closed enum
    assert decode_errors(m, "rec", bytes(bad)) == [("ConstraintError", "rec.items[2].x", 8)] * 2
    bad = bytearray(good)
    bad[0] = 8  # the magic
    assert [g[:2] for g in decode_errors(m, "rec", bytes(bad))] == [
        ("ConstraintError", "rec.magic")] * 2
    got = decode_errors(m, "rec", good[:-1])  # the label cut short
    assert [g[0] for g in got] == ["TruncatedError"] * 2


@pytest.mark.parametrize("value", [
    {"items": [{"x": 1, "y": 1}], "label": "x"},  # a dict, not the record
    {"items": [None], "label": "x"},  # a missing record
    {"items": [("Item", 1, 70000)], "label": "x"},  # u16 out of range
    {"items": [("Item", 3, 1)], "label": "x"},  # not a member of the enum
    {"items": [], "label": 5},  # not text
    {"items": [], "label": None},  # a missing field
    {"items": [], "label": "x", "kinds": [1, 7]},  # a list item not a member of the enum
])
def test_wrong_values_raise_encode_error_on_both_paths(gen, value):
    m = gen("typed")
    items = [m.Item(x=i[1], y=i[2]) if isinstance(i, tuple) else i for i in value["items"]]
    v = m.Rec(items=items, label=value["label"], kinds=value.get("kinds", []))
    for enc in (m.encode_rec, m.construct_encode_rec):
        with pytest.raises(E.EncodeError) as info:
            data = enc(v)
            # a member given as its plain int is fine only if it reads back the same
            got = m.decode_rec(data)[0]
            assert got == v, got
            raise E.EncodeError("round trip held")
        assert info.value.path.startswith("rec")


@pytest.mark.parametrize("value, path", [
    ({"items": [("Item", 1, 70000)]}, "rec.items[0].y"),  # packed in a run: named anyway
    ({"items": [("Item", 1, 1), ("Item", 3, 1)]}, "rec.items[1].x"),
    ({"kinds": [1, 7]}, "rec.kinds[1]"),
    ({"label": None}, "rec.label"),
])
def test_both_encoders_name_the_same_field(gen, value, path):
    m = gen("typed")
    items = [m.Item(x=i[1], y=i[2]) for i in value.get("items", [])]
    v = m.Rec(items=items, label=value.get("label", "x"), kinds=value.get("kinds", []))
    got = []
    for enc in (m.encode_rec, m.construct_encode_rec):
        with pytest.raises(E.EncodeError) as info:
            enc(v)
        got.append(info.value.path)
    assert got == [path, path]


def _rules_value(m, **change):
    v = dict(version=1, tag=m.Tag.A, body=m.ABody(x=1), present=1, extra=5,
             edges=[m.Edge(head=b"abcd", lo=1, hi=2)])
    v.update(change)
    return m.Rec(**v)


@pytest.mark.parametrize("change, path", [
    ({"version": 0}, "rec.version"),  # outside valid: [1, 4]
    ({"tag": 2}, "rec.body"),  # tag B with an a_body: would decode as a b_body
    ({"tag": 3}, "rec.body"),  # the empty case with a body
    ({"present": 0}, "rec.extra"),  # a value the condition leaves out
    ("head", "rec.edges[0].head"),  # 5 bytes for a 4-byte field (was cut silently)
    ("hilo", "rec.edges[0].hi"),  # the decoder's assert, held on encode
])
def test_values_the_decoder_would_refuse_are_encode_errors(gen, change, path):
    m = gen("rules")
    assert truthful(m, "rec", _rules_value(m)) == ["ok", "ok"]
    if change == "head":
        v = _rules_value(m, edges=[m.Edge(head=b"abcde", lo=1, hi=2)])
    elif change == "hilo":
        v = _rules_value(m, edges=[m.Edge(head=b"abcd", lo=2, hi=2)])
    else:
        v = _rules_value(m, **change)
    assert truthful(m, "rec", v) == ["EncodeError", "EncodeError"]
    got = []
    for enc in (m.encode_rec, m.construct_encode_rec):
        with pytest.raises(E.EncodeError) as info:
            enc(v)
        got.append(info.value.path)
    assert got == [path, path]


def test_errors_agree_where_the_fast_path_reads_a_run_whole(gen):
    """The fast path reads a fixed run (and a versioned record's version) before any rule
    of its fields: a cut input is a truncation at the first field it cuts, on both paths."""
    m = gen("runs")
    good = m.encode_rec(m.Rec(version=1, n=7, label="abc", tags=[1, 2], kind=1))
    cases = {
        b"": ("TruncatedError", "rec.version", 0),  # the version is read first
        b"ZZ\x09": ("UnsupportedError", "rec.version", 0),  # then checked, before the magic
        b"ZZ\x01\x00": ("TruncatedError", "rec.n", 3),  # cut run: not "bad magic"
        good[:9]: ("TruncatedError", "rec.label", 8),  # the text cut after its prefix
        good[:11]: ("TruncatedError", "rec.tags.count", 11),
        good[:14]: ("TruncatedError", "rec.tags", 12),  # 2 items need 4 bytes
        good[:-1] + b"\x07": ("UnsupportedError", "rec.kind", len(good) - 1),
    }
    got = {data: decode_errors(m, "rec", data) for data in cases}
    assert got == {data: [want, want] for data, want in cases.items()}


def test_a_count_of_an_absent_list_and_a_varint_out_of_range(gen):
    m = gen("absent")
    # the count's rule holds only where the list is there
    assert truthful(m, "rec", m.Rec(version=1, rows=None, id=1)) == ["ok", "ok"]
    assert truthful(m, "rec", m.Rec(version=2, rows=[7], id=1)) == ["ok", "ok"]
    assert truthful(m, "rec", m.Rec(version=2, rows=[], id=1)) == ["EncodeError"] * 2
    got = []
    for enc in (m.encode_rec, m.construct_encode_rec):
        with pytest.raises(E.EncodeError) as info:
            enc(m.Rec(version=1, rows=None, id=2 ** 64))
        got.append(info.value.path)
    assert got == ["rec.id", "rec.id"]


def test_a_numpy_view_of_another_count_and_a_version_out_of_range(gen):
    import numpy as np

    m = gen("npview")
    values = np.array([1.0, 2.0], dtype="<f4")
    for enc in (m.encode_rec, m.construct_encode_rec):
        assert m.decode_rec(enc(m.Rec(values=values), n=2), n=2)[0].values.tolist() == [1, 2]
        with pytest.raises(E.EncodeError):
            enc(m.Rec(values=values), n=3)  # 3 values would be read back
    r = gen("runs")
    bad = r.Rec(version=9, n=7, label="abc", tags=[1, 2], kind=1)
    for enc in (r.encode_rec, r.construct_encode_rec):
        with pytest.raises(E.EncodeError) as info:
            enc(bad)
        assert info.value.path == "rec.version"


def test_a_derived_count_is_held_to_its_range(gen):
    m = gen("countvalid")
    assert truthful(m, "rec", m.Rec(items=[1])) == ["ok", "ok"]
    for items in ([], [1] * 5):
        for enc in (m.encode_rec, m.construct_encode_rec):
            with pytest.raises(E.EncodeError) as info:
                enc(m.Rec(items=items))
            assert info.value.path == "rec.n"


def test_a_rule_on_a_measured_size_is_checked_once_written(gen):
    m = gen("sizerule")
    assert truthful(m, "rec", m.Rec(rows=9, bitmap=b"\x01\x00")) == ["ok", "ok"]
    for enc in (m.encode_rec, m.construct_encode_rec):
        with pytest.raises(E.EncodeError) as info:
            enc(m.Rec(rows=0, bitmap=b"\x01"))
        assert info.value.path == "rec.blen"


def test_a_rule_on_a_computed_value_is_checked_on_encode(gen):
    m = gen("valuerule")
    assert truthful(m, "rec", m.Rec(offset=250, data=b"abc")) == ["ok", "ok"]
    for enc in (m.encode_rec, m.construct_encode_rec):
        with pytest.raises(E.EncodeError) as info:
            enc(m.Rec(offset=254, data=b"abc"))
        assert info.value.path == "rec.length"


# -- derived values held to their rules; compiled decoding; logs; codec errors -----------------

MORE = {
    "sizevalid": """
        records:
          rec:
            fields:
              - {name: kind, type: u8}
              - {name: epoch, type: u32}
              - {name: n, type: u16, valid: {min: 1, max: 4}}
              - {name: data, type: bytes, size: n}
              - {name: tail, type: u8}
          vrec:
            fields:
              - {name: n, type: uleb128, valid: {max: 3}}
              - {name: data, type: bytes, size: n}
          arec:
            fields:
              - {name: kind, type: u8}
              - name: n
                type: u16
                assert: [{check: "n <= 2", message: "at most 2 bytes"}]
              - {name: data, type: bytes, size: n}
        """,
    "compz": """
        records:
          inner:
            fields:
              - {name: items, type: u8, repeat: eos}
          rec:
            fields:
              - {name: n, type: u8}
              - {name: body, type: inner, size: n, compressed: {algorithm: zstd, length: u32}}
              - {name: tail, type: u8}
        """,
}
SCHEMAS.update(MORE)


@pytest.mark.parametrize("rec, field, good, bad", [
    ("rec", "n", {"kind": 1, "epoch": 2, "data": b"ab", "tail": 3},
     [{"kind": 1, "epoch": 2, "data": b"abcde", "tail": 3},  # above max: 5 > 4
      {"kind": 1, "epoch": 2, "data": b"", "tail": 3}]),  # below min: 0 < 1
    ("vrec", "n", {"data": b"abc"}, [{"data": b"abcd"}]),  # a varint size
    ("arec", "n", {"kind": 1, "data": b"ab"}, [{"kind": 1, "data": b"abc"}]),  # an assert
])
def test_a_measured_size_is_held_to_its_valid_range_and_asserts(gen, rec, field, good, bad):
    """The decoder refuses a size outside the field's ``valid`` range (or its asserts):
    an encoder that measured such a size refuses the value instead of writing it."""
    m = gen("sizevalid")
    assert truthful(m, rec, m.RECORDS[rec](**good)) == ["ok", "ok"]
    for value in bad:
        v = m.RECORDS[rec](**value)
        assert truthful(m, rec, v) == ["EncodeError", "EncodeError"]
        got = []
        for enc in (getattr(m, f"encode_{rec}"), getattr(m, f"construct_encode_{rec}"),
                    getattr(m, f"encode_many_{rec}")):
            with pytest.raises(E.EncodeError) as info:
                enc([v] if enc.__name__.startswith("encode_many") else v)
            got.append(info.value.path)
        assert got == [f"{rec}.{field}", f"{rec}.{field}", f"{rec}[0].{field}"]


def test_a_shipped_page_whose_content_is_too_large_is_refused():
    from bytewright.generated import kladde

    ok = kladde.Page(kind=kladde.PageKind.Data, epoch=1, content=b"x" * 4081)
    assert kladde.decode_page(kladde.encode_page(ok))[0] == ok
    big = kladde.Page(kind=kladde.PageKind.Data, epoch=1, content=b"x" * 4082)
    for enc in (kladde.encode_page, kladde.construct_encode_page):
        with pytest.raises(E.EncodeError) as info:
            enc(big)
        assert info.value.path == "page.content_size"


def test_compiled_construct_decoding_reports_as_the_other_paths(gen):
    m = gen("typed")
    good = m.encode_rec(m.Rec(items=[m.Item(x=m.Kind.A, y=1)] * 3, label="hi", kinds=[]))
    bad = bytearray(good)
    bad[2 + 3 * 2] = 9
    for data in (bytes(bad), b"\x08" + good[1:], good[:-1], good[:5]):
        got = []
        for dec in (m.decode_rec, m.construct_decode_rec,
                    lambda b: m.construct_decode_rec(b, compiled=True)):
            with pytest.raises(E.DecodeError) as info:
                dec(data)
            got.append((type(info.value).__name__, info.value.path, info.value.offset))
        assert got[0] == got[1] == got[2], got
    # in the caller's buffer: an offset counts from its start, not the record's
    data = b"\xff\xff" + bytes(bad)
    with pytest.raises(E.DecodeError) as info:
        m.construct_decode_rec(data, 2, compiled=True)
    assert (info.value.path, info.value.offset) == ("rec.items[2].x", 10)


def test_encode_many_decodes_back_a_log_of_remaining_records(gen):
    m = gen("rem")
    lie = m.AFile(blocks=[m.Blk(content=m.Inner(items=[1, 2, 3, 4, 5]))])
    with pytest.raises(E.EncodeError) as info:
        m.encode_many_a_file([lie])
    assert info.value.path.startswith("a_file[0]")
    # a block of 1 item before another reads 4 bytes (min(4, bytes left)): item 1 lies
    four, one_item = m.Blk(content=m.Inner(items=[1, 2, 3, 4])), m.Blk(content=m.Inner(items=[5]))
    assert m.decode_many_blk(m.encode_many_blk([four, four, one_item])) == [four, four, one_item]
    with pytest.raises(E.EncodeError) as info:
        m.encode_many_blk([four, one_item, four])
    assert info.value.path == "blk[1]"
    # a record whose last list runs to the end swallows the next one of the log
    one = m.AFile(blocks=[m.Blk(content=m.Inner(items=[1]))])
    assert m.encode_a_file(one)
    with pytest.raises(E.EncodeError) as info:
        m.encode_many_a_file([one, one])
    assert info.value.path.startswith("a_file[0]")
    assert m.decode_many_a_file(m.encode_many_a_file([one])) == [one]


def test_a_decompressed_section_of_the_wrong_size_is_a_constraint_on_both_paths(gen):
    import struct

    import zstandard

    m = gen("compz")
    for n in (3, 5):  # the frame holds fewer / more bytes than the size field says
        z = zstandard.ZstdCompressor().compress(b"x" * n)
        data = b"\x04" + struct.pack("<I", len(z)) + z + b"\x02"
        assert decode_errors(m, "rec", data) == [("ConstraintError", "rec.body", 5)] * 2
