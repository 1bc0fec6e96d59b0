"""Byte order as data: ``endian:`` of a record, a field or the file as an expression.

Every case is checked against bytes built here with ``struct`` ('<' and '>'), decoded on
the fast path and the Construct path (interpreted and compiled), and encoded on both
paths byte-identically, in both orders; errors agree in class, path and offset."""

from __future__ import annotations

import struct

import pytest

from bytewright.generator import pipeline
from bytewright.review import diff
from bytewright.runtime.errors import ConstraintError, EncodeError, TruncatedError

from .conftest import build_module

SCHEMA = """
bytewright: 1
family: orders
enums:
  link: {type: u16, values: {ETH: 1, RAW: 101}}
  kind: {type: u16, values: {SHORT: 3, LONG: 4}}
flags:
  bits: {type: u16, bits: {a: 0, b: 9}}
records:
  packet:
    fields:
      - {name: ts, type: u32}
      - {name: caplen, type: u32}
      - {name: data, type: bytes, size: caplen}
  pcap_file:
    endian: "'le' if magic == 0xa1b2c3d4 else 'be'"
    fields:
      - {name: magic, type: u32le}
      - {name: version_major, type: u16}
      - {name: linktype, type: link}
      - {name: snap, type: f32}
      - {name: tag, type: u16be}
      - {name: packets, type: packet, repeat: eos}
  short_v:
    fields:
      - {name: v, type: u16}
  long_v:
    fields:
      - {name: v, type: u32}
  entry:
    fields:
      - {name: tag, type: u16}
      - {name: kind, type: kind}
      - {name: body, switch: kind, cases: {SHORT: short_v, LONG: long_v}}
      - {name: flags, type: bits}
  tiff:
    endian: "'le' if order == 0x4949 else ('be' if order == 0x4d4d else 'unknown')"
    fields:
      - {name: order, type: u16le}
      - {name: magic, type: u16, const: 42}
      - {name: entries, type: entry, repeat: {prefix: u16}}
      - {name: words, type: i32, repeat: {count: 2}}
      - {name: name, type: str, length: u16}
  holder:
    fields:
      - {name: n, type: u8}
      - {name: items, type: tiff, repeat: {count: n}}
  chunk:
    endian: "'be' if bom == 0xfeff else 'le'"
    fields:
      - {name: length, type: u32}
      - {name: bom, type: u16le}
      - {name: data, type: bytes, size: length}
      - {name: x, type: f64}
  sample:
    fields:
      - {name: big, type: u8}
      - {name: value, type: u32, endian: "'be' if big else 'le'"}
      - {name: count, type: u16}
  by_param:
    params: {order: {type: str}}
    endian: order
    fields:
      - {name: a, type: u32}
      - {name: e, type: entry}
  fixed_be:
    endian: be
    fields:
      - {name: a, type: u32}
      - {name: e, type: entry}
  versioned:
    endian: "'le' if bom == 1 else 'be'"
    versions: {from: version, range: [1, 2]}
    fields:
      - {name: bom, type: u8}
      - {name: version, type: u8}
      - {name: a, type: u16}
      - {name: b, type: u32, since: 2}
"""

FILE_LEVEL = """
bytewright: 1
family: filelevel
endian: order
records:
  item:
    fields:
      - {name: a, type: u16}
      - {name: b, type: u32le}
  root:
    params: {order: {type: str}}
    fields:
      - {name: n, type: u32}
      - {name: items, type: item, repeat: {count: n}}
"""


@pytest.fixture(scope="module")
def m(tmp_path_factory):
    return build_module(SCHEMA, tmp_path_factory.mktemp("orders"), "orders")


@pytest.fixture(scope="module")
def mf(tmp_path_factory):
    return build_module(FILE_LEVEL, tmp_path_factory.mktemp("filelevel"), "filelevel")


def every_path(m, rec: str, data: bytes, **params):
    """Decode on all three paths (one value) and encode it back on all three (the same
    bytes as built by hand)."""
    value, end = m.DECODERS[rec](data, **params)
    assert end == len(data)
    assert m.CONSTRUCT_DECODERS[rec](data, **params) == value
    assert m.CONSTRUCT_DECODERS[rec](data, compiled=True, **params) == value
    assert m.ENCODERS[rec](value, **params) == data
    assert m.CONSTRUCT_ENCODERS[rec](value, **params) == data
    assert m.CONSTRUCT_ENCODERS[rec](value, compiled=True, **params) == data
    return value


def decode_errors(m, rec: str, data: bytes, **params) -> list[tuple]:
    out = []
    for fn in (m.DECODERS[rec], m.CONSTRUCT_DECODERS[rec],
               lambda b, **p: m.CONSTRUCT_DECODERS[rec](b, compiled=True, **p)):
        with pytest.raises(Exception) as info:
            fn(data, **params)
        e = info.value
        out.append((type(e), e.path, e.offset))
    return out


def encode_errors(m, rec: str, value, **params) -> list[tuple]:
    out = []
    for fn in (m.ENCODERS[rec], m.CONSTRUCT_ENCODERS[rec],
               lambda v, **p: m.CONSTRUCT_ENCODERS[rec](v, compiled=True, **p)):
        with pytest.raises(EncodeError) as info:
            fn(value, **params)
        out.append((type(info.value), info.value.path))
    return out


ORDER = {"le": "<", "be": ">"}


def pcap(o: str) -> bytes:
    e = ORDER[o]
    magic = struct.pack("<I", 0xA1B2C3D4 if o == "le" else 0xD4C3B2A1)
    head = magic + struct.pack(e + "HHf", 2, 1, 1.5) + struct.pack(">H", 7)
    return head + struct.pack(e + "II", 10, 3) + b"abc" + struct.pack(e + "II", 11, 1) + b"z"


def tiff(o: str) -> bytes:
    e = ORDER[o]
    out = (b"II" if o == "le" else b"MM") + struct.pack(e + "H", 42) + struct.pack(e + "H", 2)
    out += struct.pack(e + "HHHH", 1, 3, 7, 0x201)      # SHORT entry, flags a+b
    out += struct.pack(e + "HHIH", 2, 4, 0x01020304, 1)  # LONG entry, flags a
    return out + struct.pack(e + "ii", -1, 5) + struct.pack(e + "H", 2) + b"hi"


@pytest.mark.parametrize("o", ["le", "be"])
def test_pcap_magic_chooses_the_order_and_packets_inherit_it(m, o):
    v = every_path(m, "pcap_file", pcap(o))
    assert v.magic == (0xA1B2C3D4 if o == "le" else 0xD4C3B2A1)
    assert (v.version_major, v.linktype, v.snap) == (2, m.Link.ETH, 1.5)
    assert v.tag == 7  # u16be: read big-endian in both orders
    assert [(p.ts, p.data) for p in v.packets] == [(10, b"abc"), (11, b"z")]


def test_an_encoded_value_takes_the_order_its_mark_says(m):
    v = m.decode_pcap_file(pcap("le"))[0]
    v.magic = 0xD4C3B2A1  # now the big-endian magic: every governed field flips
    assert m.encode_pcap_file(v) == pcap("be")
    assert m.construct_encode_pcap_file(v, compiled=True) == pcap("be")


@pytest.mark.parametrize("o", ["le", "be"])
def test_tiff_mark_enum_flags_switch_and_prefix_follow_the_order(m, o):
    v = every_path(m, "tiff", tiff(o))
    assert v.order == (0x4949 if o == "le" else 0x4D4D)
    (a, b) = v.entries
    assert (a.tag, a.kind, a.body.v, a.flags.a, a.flags.b) == (1, m.Kind.SHORT, 7, True, True)
    assert (b.kind, b.body.v, b.flags.b) == (m.Kind.LONG, 0x01020304, False)
    assert (v.words, v.name) == ([-1, 5], "hi")


def test_an_inheriting_record_alone_reads_the_files_order(m):
    data = struct.pack("<II", 5, 2) + b"ok"
    assert m.decode_packet(data) == (m.Packet(ts=5, data=b"ok"), 10)
    assert m.construct_decode_packet(data, compiled=True) == m.Packet(ts=5, data=b"ok")
    assert m.encode_packet(m.Packet(ts=5, data=b"ok")) == data


def test_a_bad_mark_is_a_constraint_error_at_the_mark(m):
    bad = b"XY" + tiff("le")[2:]
    assert decode_errors(m, "tiff", bad) == [(ConstraintError, "tiff.order", 0)] * 3
    with pytest.raises(ConstraintError, match="byte order of tiff must be le or be"):
        m.decode_tiff(bad)


def test_a_bad_mark_in_a_list_names_the_item_and_its_absolute_offset(m):
    good = tiff("le")
    data = bytes([2]) + good + b"XY" + good[2:]
    at = 1 + len(good)
    assert decode_errors(m, "holder", data) == [(ConstraintError, "holder.items[1].order", at)] * 3


def test_nested_errors_inside_an_order_keep_path_and_offset(m):
    data = bytes([2]) + tiff("le") + tiff("be")[:-1]  # the second name is cut short
    errs = decode_errors(m, "holder", data)
    # the string's bytes start after its u16 length (big-endian here): 1 of 2 is there
    assert errs == [(TruncatedError, "holder.items[1].name", len(data) - 1)] * 3


def test_a_mark_cut_short_is_a_truncation_at_the_record(m):
    assert decode_errors(m, "tiff", b"I") == [(TruncatedError, "tiff.order", 0)] * 3


def test_encoding_a_value_whose_mark_is_neither_order_fails_on_both_paths(m):
    v = m.decode_tiff(tiff("le"))[0]
    v.order = 0x1234
    assert encode_errors(m, "tiff", v) == [(EncodeError, "tiff.order")] * 3
    h = m.Holder(items=[m.decode_tiff(tiff("be"))[0], v])
    fast, interpreted, compiled = encode_errors(m, "holder", h)
    assert fast == interpreted == (EncodeError, "holder.items[1].order")
    assert compiled[1].startswith("holder")  # compiled builds name no list items


@pytest.mark.parametrize("o", ["le", "be"])
def test_mark_after_the_length_it_governs(m, o):
    e = ORDER[o]
    bom = 0xFEFF if o == "be" else 0
    data = struct.pack(e + "I", 3) + struct.pack("<H", bom) + b"abc" + struct.pack(e + "d", 2.5)
    v = every_path(m, "chunk", data)
    assert (v.bom, v.data, v.x) == (bom, b"abc", 2.5)


@pytest.mark.parametrize("o", ["le", "be"])
def test_field_level_expression_governs_only_its_field(m, o):
    e = ORDER[o]
    data = bytes([o == "be"]) + struct.pack(e + "I", 0x01020304) + struct.pack("<H", 0x0506)
    v = every_path(m, "sample", data)
    assert (v.value, v.count) == (0x01020304, 0x0506)


@pytest.mark.parametrize("o", ["le", "be"])
def test_a_param_chooses_the_order(m, o):
    e = ORDER[o]
    data = struct.pack(e + "IHHHH", 5, 1, 3, 7, 0x201)
    v = every_path(m, "by_param", data, order=o)
    assert (v.a, v.e.body.v) == (5, 7)


def test_a_param_that_is_neither_order(m):
    data = struct.pack("<IHHHH", 5, 1, 3, 7, 0x201)
    assert decode_errors(m, "by_param", data, order="middle") == [
        (ConstraintError, "by_param", 0)] * 3
    v = m.decode_by_param(data, order="le")[0]
    assert [x[0] for x in encode_errors(m, "by_param", v, order="middle")] == [EncodeError] * 3


def test_a_fixed_record_order_is_inherited(m):
    data = struct.pack(">IHHHH", 5, 1, 3, 7, 0x201)
    v = every_path(m, "fixed_be", data)
    assert (v.a, v.e.tag, v.e.body.v) == (5, 1, 7)


@pytest.mark.parametrize("o", ["le", "be"])
@pytest.mark.parametrize("version", [1, 2])
def test_versions_and_orders_together(m, o, version):
    e = ORDER[o]
    data = bytes([o == "le", version]) + struct.pack(e + "H", 0x0102)
    if version == 2:
        data += struct.pack(e + "I", 0x03040506)
    v = every_path(m, "versioned", data)
    assert (v.a, v.b) == (0x0102, 0x03040506 if version == 2 else None)


@pytest.mark.parametrize("o", ["le", "be"])
def test_file_level_expression_over_a_param(mf, o):
    e = ORDER[o]
    data = struct.pack(e + "I", 2)
    for a, b in ((1, 2), (3, 4)):
        data += struct.pack(e + "H", a) + struct.pack("<I", b)
    v = every_path(mf, "root", data, order=o)
    assert [(i.a, i.b) for i in v.items] == [(1, 2), (3, 4)]


def problems(tmp_path, fields: str, endian: str) -> list[str]:
    path = tmp_path / "p.yaml"
    path.write_text(f"bytewright: 1\nfamily: p\nrecords:\n  r:\n    endian: \"{endian}\"\n"
                    f"    fields:\n{fields}")
    return [str(p) for p in pipeline.run([path]).problems]


@pytest.mark.parametrize("fields, endian, message", [
    ("      - {name: s, type: bytes, length: u8}\n      - {name: bom, type: u8}\n",
     "'le' if bom else 'be'", "'bom' must sit at a fixed offset"),
    ("      - {name: bom, type: u16}\n", "'le' if bom else 'be'",
     "'bom' is itself governed by the order"),
    ("      - {name: bom, type: u16le}\n", "'le' if nope else 'be'",
     "names 'nope', neither a param nor a field"),
    ("      - {name: bom, type: u16le}\n", "'up'", "byte order must be 'le' or 'be'"),
])
def test_misuse_is_a_schema_problem_at_the_endian_line(tmp_path, fields, endian, message):
    (p,) = problems(tmp_path, fields, endian)
    assert message in p
    assert p.startswith(f"{tmp_path / 'p.yaml'}:5: error: records.r.endian")


def test_a_file_level_expression_must_name_params_of_a_record(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("bytewright: 1\nfamily: p\nendian: lee\nrecords:\n  r:\n"
                    "    fields: [{name: a, type: u32}]\n")
    (p,) = [str(x) for x in pipeline.run([path]).problems]
    assert p.startswith(f"{path}:3: error: endian: the byte-order expression 'lee'")


def test_the_json_schema_accepts_expressions_and_refuses_typos(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("bytewright: 1\nfamily: p\nendian: be\nrecords:\n  r:\n    endyan: le\n"
                    "    fields: []\n")
    assert any("'endyan' was unexpected" in str(p) for p in pipeline.run([path]).problems)


def test_docs_and_diff_show_the_expression(tmp_path):
    from bytewright.review import docs
    at = tmp_path / "orders.yaml"
    side = diff.load_texts({at: SCHEMA}, "old", base=tmp_path)
    fl = docs.build_model(diff.load_texts({tmp_path / "f.yaml": FILE_LEVEL}, "f", base=tmp_path))
    docs.validate_json(fl)
    assert fl["families"][0]["endian"] == "le or be: order"
    model = docs.build_model(side)
    docs.validate_json(model)  # the published layouts schema takes the new keys
    (fam,) = model["families"]
    recs = {r["name"]: r for r in fam["records"]}
    assert recs["tiff"]["byte_order"].startswith("le or be: 'le' if order == 0x4949")
    assert [lay["label"] for lay in recs["tiff"]["layouts"]] == ["all versions, le",
                                                                 "all versions, be"]
    assert recs["packet"]["byte_order"] == "le or be: inherited (alone: le)"
    new = diff.load_texts({at: SCHEMA.replace("0x4d4d", "0x4d4e")}, "new", base=tmp_path)
    rep = diff.compare(side, new)
    assert [(f.rule.id, f.subject) for f in rep.findings] == [("W020", "orders.tiff")]
    assert diff.compare(side, diff.load_texts({at: SCHEMA}, "new",
                                              base=tmp_path)).findings == []


def test_ksy_export_notes_the_choice():
    import tempfile
    from pathlib import Path

    from bytewright.review import export_ksy
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "orders.yaml"
        path.write_text(SCHEMA)
        fam = pipeline.run([path], render_modules=False).families["orders"]
    exp = export_ksy.export_family(fam)
    assert any(n.startswith("pcap_file: byte order le or be: 'le' if magic") for n in exp.notes)


CHAINED = """
bytewright: 1
family: chained
records:
  frame:
    params: {prev: {type: int, default: 0}}
    fields:
      - {name: page, type: u32}
      - {name: check, type: u32, checksum: {algorithm: crc32, covers: [page], seed: prev}}
  log:
    endian: "'le' if bom == 1 else 'be'"
    fields:
      - {name: bom, type: u8}
      - name: frames
        type: frame
        repeat: eos
        chain: {param: prev, from: check, first: 0}
"""


@pytest.mark.parametrize("o", ["le", "be"])
def test_a_chain_reads_the_previous_item_in_the_inherited_order(tmp_path, o):
    import zlib
    mc = build_module(CHAINED, tmp_path, "chained")
    e = ORDER[o]
    data, prev = bytes([o == "le"]), 0
    for page in (5, 6, 7):
        raw = struct.pack(e + "I", page)
        prev = zlib.crc32(raw, prev)  # each check seeded by the one before
        data += raw + struct.pack(e + "I", prev)
    v = every_path(mc, "log", data)
    assert [f.page for f in v.frames] == [5, 6, 7]


def test_many_records_in_either_order_in_one_loop(m):
    """``decode_many``/``decode_prefix`` read the records optimistically (one twin per
    order); a bad mark stops them where the checked decoder says."""
    assert all(hasattr(m, n) for n in ("_u_tiff_le", "_u_tiff_be", "_u_tiff", "_m_tiff",
                                       "_u_entry_be", "_u_packet_le"))
    data = tiff("le") + tiff("be") + tiff("le")
    values = m.decode_many_tiff(data)
    assert [v.order for v in values] == [0x4949, 0x4D4D, 0x4949]
    assert values == [v for v, _ in m.iter_tiff(data)]
    assert m.decode_many_pcap_file(pcap("be"))[0].packets[1].data == b"z"
    cut = data[:len(tiff("le")) * 2] + b"XY" + tiff("le")[2:]
    with pytest.raises(ConstraintError) as info:
        m.decode_many_tiff(cut)
    assert (info.value.path, info.value.offset) == ("tiff[2].order", 2 * len(tiff("le")))
    got, stop = m.decode_prefix_tiff(cut)
    assert (len(got), stop) == (2, 2 * len(tiff("le")))
    assert m.encode_many_tiff(values) == data


@pytest.mark.parametrize("kind", ["valid", "near"])
@pytest.mark.parametrize("rec", ["pcap_file", "tiff", "holder", "chunk", "sample", "fixed_be",
                                 "versioned", "entry"])
def test_the_codec_truth_property_holds(m, tmp_path_factory, rec, kind):
    """Values drawn from the schema (marks drawn to choose either order) encode alike on
    both paths and decode back on all three; one invalid change fails alike."""
    from bytewright.properties import Builder, run_record
    path = tmp_path_factory.mktemp("prop") / "orders.yaml"
    path.write_text(SCHEMA)
    fam = pipeline.run([path], render_modules=False).families["orders"]
    res = run_record(Builder(fam, m), rec, max_examples=12, kind=kind, shrink=False)
    assert res.status == "ok", res.detail


NUMPY = """
bytewright: 1
family: npv
records:
  pt:
    fields:
      - {name: x, type: u32}
  r:
    endian: "'le' if bom == 1 else 'be'"
    fields:
      - {name: bom, type: u8}
      - {name: n, type: u16}
      - {name: vals, type: u32, repeat: {count: n}, view: numpy}
"""


@pytest.mark.parametrize("o", ["le", "be"])
def test_a_numpy_view_takes_the_layouts_order(tmp_path, o):
    mn = build_module(NUMPY, tmp_path, "npv")
    e = ORDER[o]
    data = bytes([o == "le"]) + struct.pack(e + "HII", 2, 7, 0x01020304)
    v, _ = mn.decode_r(data)
    assert list(v.vals) == [7, 0x01020304]
    assert list(mn.construct_decode_r(data, compiled=True).vals) == [7, 0x01020304]
    assert mn.encode_r(v) == data == mn.construct_encode_r(v)


def test_a_numpy_view_of_an_inheriting_record_is_a_schema_problem(tmp_path):
    path = tmp_path / "np.yaml"
    path.write_text(NUMPY + "      - {name: pts, type: pt, repeat: {count: n}, view: numpy}\n")
    (p,) = [str(x) for x in pipeline.run([path]).problems]
    assert "records.r.fields[3].view: view: numpy of a record whose byte order is data" in p


SCOPED = """
bytewright: 1
family: scoped
records:
  sub:
    fields:
      - {name: v, type: u16}
  r:
    fields:
      - {name: big, type: u8}
      - {name: a, type: sub, endian: "'be' if big else 'le'"}
      - {name: b, type: sub}
      - {name: c, type: u16}
"""


@pytest.mark.parametrize("o", ["le", "be"])
def test_a_field_expression_on_a_record_field_governs_that_record_only(tmp_path, o):
    ms = build_module(SCOPED, tmp_path, "scoped")
    data = bytes([o == "be"]) + struct.pack(ORDER[o] + "H", 0x0102) + struct.pack(
        "<HH", 0x0304, 0x0506)  # b and c keep the file's order
    v = every_path(ms, "r", data)
    assert (v.a.v, v.b.v, v.c) == (0x0102, 0x0304, 0x0506)


def test_a_record_named_like_an_orders_layout_is_a_schema_problem(tmp_path):
    path = tmp_path / "clash.yaml"
    path.write_text("bytewright: 1\nfamily: clash\nrecords:\n  r:\n    endian: \"'le' if m "
                    "else 'be'\"\n    fields: [{name: m, type: u8}, {name: a, type: u16}]\n"
                    "  r_be:\n    fields: [{name: a, type: u16}]\n")
    (p,) = [str(x) for x in pipeline.run([path]).problems]
    assert p.startswith(f"{path}:7: error: records.r_be: record name r_be clashes")


def test_a_chain_over_items_choosing_their_own_order_needs_an_explicit_anchor(tmp_path):
    text = CHAINED.replace("  log:\n    endian: \"'le' if bom == 1 else 'be'\"\n", "  log:\n")
    text = text.replace("    params: {prev: {type: int, default: 0}}\n",
                        "    params: {prev: {type: int, default: 0}}\n"
                        "    endian: \"'le' if page == 1 else 'be'\"\n")
    text = text.replace("{name: page, type: u32}", "{name: page, type: u32le}")
    path = tmp_path / "c.yaml"
    path.write_text(text)
    (p,) = [str(x) for x in pipeline.run([path]).problems]
    assert "records.log.fields[1].chain.from" in p
    assert "'check' follows the byte order each item chooses" in p
