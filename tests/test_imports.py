"""Schema imports (`imports:`): definitions of another schema file included in a family,
with what they reference, on every codec path; problems at the imported file's lines;
check, doc and diff over importing schemas."""

from __future__ import annotations

import importlib.util
import struct
import sys
from pathlib import Path

import pytest

from bytewright.cli.main import main
from bytewright.generator import pipeline

COMMON = """bytewright: 1
family: common
enums:
  color: {type: u8, values: {RED: 1, BLUE: 2}}
  unused: {type: u8, values: {X: 1}}
flags:
  opts: {type: u8, bits: {a: 0, tint: {bits: [1, 2], enum: color}}}
types:
  fixed: {base: i32, fixed_point: q64.64}
records:
  point:
    doc: A point.
    fields:
      - {name: x, type: i16}
      - {name: y, type: i16}
      - {name: c, type: color}
  shape:
    fields:
      - {name: n, type: u8}
      - {name: pts, type: point, repeat: {count: n}}
      - {name: o, type: opts}
  other:
    fields:
      - {name: z, type: u8}
"""

MAIN = """bytewright: 1
family: drawing
imports:
  - {from: common.yaml, records: [shape], enums: [color]}
records:
  scene:
    fields:
      - {name: bg, type: color}
      - {name: shapes, type: shape, repeat: {prefix: u8}}
      - {name: extra, type: u8, if: "bg == color.BLUE"}
"""


def generate(folder: Path, main_text: str = MAIN, common: str = COMMON):
    (folder / "common.yaml").write_text(common)
    (folder / "main.yaml").write_text(main_text)
    return pipeline.run([folder / "main.yaml"], base=folder)


def load(folder: Path, text: str, name: str):
    out = folder / f"gen_{name}.py"
    out.write_text(text)
    spec = importlib.util.spec_from_file_location(f"gen_{name}", out)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def all_paths(m, record: str, value) -> bytes:
    data = m.ENCODERS[record](value)
    assert m.CONSTRUCT_ENCODERS[record](value) == data
    assert m.CONSTRUCT_ENCODERS[record](value, compiled=True) == data
    assert m.DECODERS[record](data) == (value, len(data))
    assert m.CONSTRUCT_DECODERS[record](data) == value
    assert m.CONSTRUCT_DECODERS[record](data, compiled=True) == value
    return data


def test_imported_records_enums_and_their_references_are_included(tmp_path):
    r = generate(tmp_path)
    assert not r.problems, [str(p) for p in r.problems]
    fam = r.families["drawing"]
    # shape brings point (its item) and opts (flags) and, through them, color
    assert set(fam.records) == {"scene", "shape", "point"}
    assert set(fam.enums) == {"color"} and set(fam.flags) == {"opts"}
    assert "other" not in fam.records and "unused" not in fam.enums and not fam.aliases
    text = r.modules["drawing.py"]
    assert 'SCHEMA_FILES = ["main.yaml", "common.yaml"]' in text
    assert "import common" not in text and "from common" not in text  # included, not imported
    m = load(tmp_path, text, "drawing")
    v = m.Scene(m.Color.BLUE, [m.Shape([m.Point(1, -2, m.Color.RED)],
                                       m.Opts(True, m.Color.BLUE))], 4)
    data = all_paths(m, "scene", v)
    assert data == (b"\x02" + b"\x01" + b"\x01" + struct.pack("<hh", 1, -2) + b"\x01"
                    + bytes([0b101]) + b"\x04")
    assert m.decode_many_scene(data + data) == [v, v]
    assert m.Point.__doc__.startswith("A point.")


def test_imports_of_types_and_flags_by_name(tmp_path):
    main_text = """bytewright: 1
family: drawing
imports:
  - {from: common.yaml, flags: [opts], types: [fixed]}
records:
  r:
    fields:
      - {name: o, type: opts}
      - {name: f, type: fixed}
"""
    r = generate(tmp_path, main_text)
    assert not r.problems, [str(p) for p in r.problems]
    fam = r.families["drawing"]
    assert set(fam.flags) == {"opts"} and set(fam.aliases) == {"fixed"}
    assert set(fam.enums) == {"color"} and set(fam.records) == {"r"}
    m = load(tmp_path, r.modules["drawing.py"], "drawing2")
    assert all_paths(m, "r", m.R(m.Opts(False, m.Color.RED), -5)) == \
        bytes([0b010]) + struct.pack("<i", -5)


def problems(folder: Path, main_text: str, common: str = COMMON) -> list[str]:
    return [str(p) for p in generate(folder, main_text, common).problems]


@pytest.mark.parametrize(("entry", "message"), [
    ("{from: missing.yaml, records: [shape]}", "cannot import 'missing.yaml'"),
    ("{from: common.yaml, records: [nope]}", "'common.yaml' defines no record 'nope'"),
    ("{from: common.yaml, enums: [scene_kind]}", "defines no enum 'scene_kind'"),
    ("{from: common.yaml, records: [scene]}", "defines no record 'scene'"),
])
def test_bad_imports_are_problems_at_the_import(tmp_path, entry, message):
    text = MAIN.replace("{from: common.yaml, records: [shape], enums: [color]}", entry)
    got = problems(tmp_path, text)
    assert any(message in p and "main.yaml:4: error: imports[0]" in p for p in got), got


def test_a_name_imported_and_defined_locally_is_a_problem(tmp_path):
    text = MAIN + "  point:\n    fields:\n      - {name: q, type: u8}\n"
    text = text.replace("records: [shape]", "records: [point]")
    got = problems(tmp_path, text)
    assert any("main.yaml:4: error: imports[0].records[0]: 'point' is imported and also "
               "defined in this file" in p for p in got), got


def test_a_different_byte_order_is_refused(tmp_path):
    got = problems(tmp_path, MAIN, COMMON.replace("family: common\n", "family: common\nendian: be\n"))
    assert any("has endian 'be', this file 'le'" in p for p in got), got


def test_problems_in_imported_definitions_name_their_own_file_and_line(tmp_path):
    common = COMMON.replace("      - {name: o, type: opts}",
                            "      - {name: o, type: opts, if: \"n == 'x'\"}")
    got = problems(tmp_path, MAIN, common)
    assert got == ["common.yaml:21: error: records.shape.fields[2].if: n == 'x' compares an "
                   "integer with a str"]


def test_yaml_schema_rejects_unknown_import_keys(tmp_path):
    text = MAIN.replace("enums: [color]}", "enums: [color], recrods: [x]}")
    got = problems(tmp_path, text)
    assert any("main.yaml:4" in p and "'recrods' was unexpected" in p for p in got), got


# -- check, doc and diff ----------------------------------------------------------------------

def run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def project(tmp_path: Path, capsys) -> Path:
    root = tmp_path / "proj"
    assert run(["init", str(root), "--family", "notes"], capsys)[0] == 0
    (root / "schemas" / "common.yaml").write_text(COMMON)
    (root / "schemas" / "main.yaml").write_text(MAIN)
    return root


def test_check_sees_a_changed_imported_file_as_drift(tmp_path, capsys):
    root = project(tmp_path, capsys)
    assert run(["generate", "--project", str(root)], capsys)[0] == 0
    assert (root / "generated" / "drawing.py").is_file()
    code, out, err = run(["check", "--project", str(root)], capsys)
    assert code == 0, err + out
    common = root / "schemas" / "common.yaml"
    common.write_text(COMMON.replace("{name: y, type: i16}", "{name: y, type: i32}"))
    code, out, err = run(["check", "--project", str(root)], capsys)
    assert code != 0 and "drawing" in (out + err)


def test_doc_and_diff_over_importing_schemas(tmp_path, capsys):
    root = project(tmp_path, capsys)
    out_dir = tmp_path / "docs"
    code, _, err = run(["doc", "--project", str(root), "--out", str(out_dir)], capsys)
    assert code == 0, err
    page = (out_dir / "drawing.md").read_text()
    assert "shape" in page and "point" in page and "A point." in page
    old = root / "schemas" / "main.yaml"
    new_dir = tmp_path / "new"
    new_dir.mkdir()
    (new_dir / "common.yaml").write_text(
        COMMON.replace("{name: y, type: i16}", "{name: y, type: i32}"))
    (new_dir / "main.yaml").write_text(MAIN)
    code, out, _ = run(["diff", str(old), str(new_dir / "main.yaml")], capsys)
    assert code == 1
    assert "W004" in out and "point.y" in out  # the imported record's change, per family


def test_the_codec_truth_property_holds_for_included_records(tmp_path):
    from bytewright.properties import Builder, run_record
    r = generate(tmp_path)
    m = load(tmp_path, r.modules["drawing.py"], "drawing3")
    for rec in ("scene", "shape", "point"):
        for kind in ("valid", "near"):
            res = run_record(Builder(r.families["drawing"], m), rec, max_examples=15,
                             kind=kind, shrink=False)
            assert res.status == "ok", (rec, kind, res.detail, res.example)
