"""Field defaults (`default:`): absent fields decode as their default on every codec path,
constructors need not name them, diff takes a defaulted version-gated field as additive,
and `fixtures write` encodes cases that leave them out."""

from __future__ import annotations

import dataclasses
import struct
from pathlib import Path

import pytest

from bytewright.cli.main import main
from bytewright.generator import pipeline
from bytewright.review import checks
from bytewright.runtime.errors import EncodeError

SCHEMA = """
bytewright: 1
family: dflt
enums:
  color: {type: u8, values: {RED: 1, BLUE: 2}}
records:
  entry:
    versions: {from: version, range: [1, 2]}
    fields:
      - {name: version, type: u8}
      - {name: size, type: u32}
      - {name: flags2, type: u8, since: 2, default: 0}
      - {name: tint, type: color, since: 2, default: BLUE}
      - {name: label, type: str, length: u8, since: 2, default: "none"}
      - {name: salt, type: bytes, size: 4, since: 2, default: "hex:00000000"}
      - {name: extent, type: u32, if: "size > 4096", default: 0}
  simple:
    fields:
      - {name: a, type: u8}
      - {name: b, type: u16, if: "a > 0", default: 7}
      - {name: c, type: u8}
"""


def all_paths(m, record: str, value) -> bytes:
    data = m.ENCODERS[record](value)
    assert m.CONSTRUCT_ENCODERS[record](value) == data
    assert m.CONSTRUCT_ENCODERS[record](value, compiled=True) == data
    for back in (m.DECODERS[record](data)[0], m.CONSTRUCT_DECODERS[record](data),
                 m.CONSTRUCT_DECODERS[record](data, compiled=True)):
        assert back == value
    return data


def decoded_everywhere(m, record: str, data: bytes) -> list:
    return [m.DECODERS[record](data)[0], m.CONSTRUCT_DECODERS[record](data),
            m.CONSTRUCT_DECODERS[record](data, compiled=True),
            *m.decode_many_entry(data + data)] if record == "entry" else [
            m.DECODERS[record](data)[0], m.CONSTRUCT_DECODERS[record](data),
            m.CONSTRUCT_DECODERS[record](data, compiled=True)]


def test_older_versions_decode_the_defaults_on_every_path(schema_module):
    m = schema_module(SCHEMA)
    v1 = b"\x01" + struct.pack("<I", 10)  # a v1 entry written by hand: no v2 fields
    for got in decoded_everywhere(m, "entry", v1):
        assert (got.flags2, got.tint, got.label, got.salt, got.extent) == \
            (0, m.Color.BLUE, "none", b"\x00\x00\x00\x00", 0)
        assert got.tint is m.Color.BLUE  # the enum member, not a bare int


def test_constructors_need_not_name_defaulted_fields(schema_module):
    m = schema_module(SCHEMA)
    fields = {f.name: f for f in dataclasses.fields(m.Entry)}
    assert fields["flags2"].default == 0 and fields["flags2"].kw_only
    assert fields["tint"].default is m.Color.BLUE
    e = m.Entry(1, 10)
    assert e.flags2 == 0 and e.label == "none" and e.extent == 0
    assert all_paths(m, "entry", e) == b"\x01" + struct.pack("<I", 10)
    e2 = m.Entry(2, 5000, flags2=3, tint=m.Color.RED, label="hi", salt=b"abcd", extent=9)
    assert all_paths(m, "entry", e2) == (b"\x02" + struct.pack("<I", 5000) + b"\x03\x01"
                                         + b"\x02hi" + b"abcd" + struct.pack("<I", 9))
    # v2 with the defaults written out
    assert all_paths(m, "entry", m.Entry(2, 1)) == (b"\x02" + struct.pack("<I", 1)
                                                    + b"\x00\x02\x04none\x00\x00\x00\x00")


def test_a_false_condition_takes_the_default_or_none_and_refuses_others(schema_module):
    m = schema_module(SCHEMA)
    assert all_paths(m, "simple", m.Simple(0, 9)) == b"\x00\x09"
    assert m.decode_simple(b"\x00\x09")[0].b == 7
    assert m.encode_simple(m.Simple(0, 9, b=None)) == b"\x00\x09"  # None is fine too
    assert all_paths(m, "simple", m.Simple(1, 9, b=300)) == b"\x01" + struct.pack("<H", 300) + b"\x09"
    for enc in (m.encode_simple, m.construct_encode_simple):
        with pytest.raises(EncodeError) as info:
            enc(m.Simple(0, 9, b=8))  # would be dropped: refused alike
        assert info.value.path == "simple.b"


def test_the_property_harness_draws_defaults_for_absent_fields(schema_module, tmp_path):
    from bytewright.properties import Builder, run_record
    m = schema_module(SCHEMA)
    path = tmp_path / "prop.yaml"
    path.write_text(SCHEMA)
    fam = pipeline.run([path], render_modules=False).families["dflt"]
    for rec in ("entry", "simple"):
        for kind in ("valid", "near"):
            res = run_record(Builder(fam, m), rec, max_examples=15, kind=kind, shrink=False)
            assert res.status == "ok", (rec, kind, res.detail, res.example)


@pytest.mark.parametrize(("field", "message"), [
    ("{name: x, type: u8, default: 300}", "default 300 does not fit u8"),
    ("{name: x, type: color, default: GREEN}", "not a member of enum 'color'"),
    ("{name: x, type: bytes, size: 2, default: abcd}", 'written "hex:..."'),
    ("{name: x, type: str, length: u8, default: 5}", "must be text"),
    ("{name: x, type: u8, repeat: {count: 2}, default: 0}", "single stored field"),
    ("{name: x, type: u8, default: '1'}", "must be an integer"),
])
def test_bad_defaults_are_schema_errors_with_lines(tmp_path, field, message):
    text = ("bytewright: 1\nfamily: bad\nenums:\n  color: {type: u8, values: {RED: 1}}\n"
            f"records:\n  r:\n    fields:\n      - {{name: a, type: u8}}\n      - {field}\n")
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    got = [str(p) for p in pipeline.run([path]).problems]
    assert len(got) == 1 and ":9: error: records.r.fields[1].default:" in got[0], got
    assert message in got[0]


def test_json_schema_takes_default_values(tmp_path):
    text = ("bytewright: 1\nfamily: ok\nrecords:\n  r:\n    fields:\n"
            "      - {name: a, type: u8, if: 'True', default: 1}\n"
            "      - {name: f, type: f32, if: 'True', default: 1.5}\n"
            "      - {name: s, type: str, length: u8, if: 'True', default: null}\n")
    path = tmp_path / "ok.yaml"
    path.write_text(text)
    assert not pipeline.run([path]).problems


# -- diff -----------------------------------------------------------------------------------

OLD = """bytewright: 1
family: dd
records:
  rec:
    versions: {from: version, range: [1, 1]}
    fields:
      - {name: version, type: u8}
      - {name: a, type: u16}
"""


def run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_diff_takes_a_defaulted_gated_field_as_additive(tmp_path, capsys):
    old = tmp_path / "old.yaml"
    old.write_text(OLD)
    new = tmp_path / "new.yaml"
    new.write_text(OLD.replace("[1, 1]", "[1, 2]")
                   + "      - {name: b, type: u8, since: 2, default: 0}\n")
    code, out, _ = run(["diff", str(old), str(new)], capsys)
    assert code == 0, out
    assert "ADDITIVE" in out and "A006" in out
    assert "P006" not in out and "WIRE-BREAKING " not in out
    assert "0 wire-breaking, 0 api-breaking" in out
    bare = tmp_path / "bare.yaml"
    bare.write_text(OLD.replace("[1, 1]", "[1, 2]") + "      - {name: b, type: u8, since: 2}\n")
    code, out, _ = run(["diff", str(old), str(bare)], capsys)
    assert code == 1 and "P006 gated-field-without-default" in out


# -- fixtures write --------------------------------------------------------------------------

def test_fixtures_write_with_cases_that_omit_defaulted_fields(tmp_path, capsys):
    root = tmp_path / "proj"
    assert run(["init", str(root), "--family", "notes"], capsys)[0] == 0
    (root / "schemas" / "notes.yaml").unlink()
    (root / "fixtures" / "notes" / "two_notes.hex").unlink()
    (root / "cases" / "notes_cases.py").unlink()
    (root / "schemas" / "dflt.yaml").write_text(SCHEMA)
    (root / "cases" / "dflt_cases.py").write_text(
        "def cases(codec):\n"
        "    yield ('old_entry', 'entry', {}, codec.Entry(version=1, size=10), 'v1')\n"
        "    yield ('new_entry', 'entry', {}, codec.Entry(version=2, size=1, flags2=5), 'v2')\n")
    assert run(["generate", "--project", str(root)], capsys)[0] == 0
    code, _, err = run(["fixtures", "write", "--project", str(root)], capsys)
    assert code == 0, err
    old = checks.parse_fixture(root / "fixtures" / "dflt" / "old_entry.hex").data
    new = checks.parse_fixture(root / "fixtures" / "dflt" / "new_entry.hex").data
    assert old == b"\x01" + struct.pack("<I", 10)
    assert new == b"\x02" + struct.pack("<I", 1) + b"\x05\x02\x04none\x00\x00\x00\x00"
    code, out, err = run(["check", "--project", str(root)], capsys)
    assert code == 0, err + out
    assert "2 passed, 0 failed" in out


def test_shipped_modules_import_no_field_helper(tmp_path):
    """Schemas without defaults keep their generated header unchanged."""
    text = Path(__file__).resolve().parents[1].joinpath("generated", "htt.py").read_text()
    assert "from dataclasses import dataclass\n" in text


def test_doc_shows_the_default(tmp_path, capsys):
    path = tmp_path / "dflt.yaml"
    path.write_text(SCHEMA)
    out_dir = tmp_path / "docs"
    code, _, err = run(["doc", str(path), "--out", str(out_dir)], capsys)
    assert code == 0, err
    page = (out_dir / "dflt.md").read_text()
    assert "default 0 when absent" in page and "default 'none' when absent" in page
    assert "default 0x00000000 when absent" in page and "default Color.BLUE when absent" in page


def test_a_misspelt_default_key_is_refused(tmp_path):
    path = tmp_path / "typo.yaml"
    path.write_text("bytewright: 1\nfamily: t\nrecords:\n  r:\n    fields:\n"
                    "      - {name: a, type: u8, defualt: 1}\n")
    got = [str(p) for p in pipeline.run([path]).problems]
    assert len(got) == 1 and ":6: error: records.r.fields[0]: unknown key(s)" in got[0]
    assert "'defualt' was unexpected" in got[0]


def test_inspect_shows_the_default_of_a_field_the_version_does_not_have(tmp_path, capsys):
    """Version 1 bytes have no ``b``: the decoders give it its default, and so does
    ``inspect`` (marked as not in the bytes), never ``None``."""
    (tmp_path / "vv.yaml").write_text("""\
bytewright: 1
family: vv
endian: le
detect: [{record: rec, magic: "hex:5656"}]
records:
  rec:
    versions: {from: ver, range: [1, 2]}
    fields:
      - {name: magic, type: bytes, size: 2, const: "5656"}
      - {name: ver, type: u8}
      - {name: a, type: u8}
      - {name: b, type: u16, since: 2, default: 7}
""")
    (tmp_path / "bytewright.toml").write_text('schemas = ["vv.yaml"]\noutput = "gen"\n')
    assert main(["generate", "--project", str(tmp_path)]) == 0
    (tmp_path / "v1.bin").write_bytes(b"VV\x01\x05")
    (tmp_path / "v2.bin").write_bytes(b"VV\x02\x05\x09\x00")
    capsys.readouterr()
    assert main(["inspect", "--list", "--project", str(tmp_path), str(tmp_path / "v1.bin")]) == 0
    out = capsys.readouterr().out
    assert "b = 7 (default; not in this version)" in out and "None" not in out
    assert main(["inspect", "--list", "--project", str(tmp_path), str(tmp_path / "v2.bin")]) == 0
    out = capsys.readouterr().out
    assert "b = 9" in out and "(default;" not in out
