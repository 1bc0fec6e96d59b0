"""The diff's categories on a table of single-change schema edits.

Each row edits one thing in a small demo schema (``tests/data/diff_demo.yaml``) and states
the exact set of categories the report must hold and the rule ids that must fire. The
table is the contract: a rename is API-only, a widening is one finding with the shifted
fields nested under it, a gated field without a default is reported, and so on.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from bytewright.review import diff, docs

ROOT = Path(__file__).resolve().parent
BASE_PATH = ROOT / "data" / "diff_demo.yaml"
BASE = BASE_PATH.read_text(encoding="utf-8")

W, P, ID, A, D = "WIRE-BREAKING", "API-BREAKING", "ID-CONTRACT", "ADDITIVE", "DOC"

STAMP = '      - {name: stamp, type: u32, doc: "creation time"}\n'
COUNT = '      - {name: count, type: u16, doc: "entries"}\n'
TOTAL = '      - {name: total, type: u32, doc: "payload bytes"}\n'
WEIGHT = '      - {name: weight, type: u16, since: 2, doc: "v2 weight"}\n'
DEL = '      DEL: {value: 2, doc: "drop a value"}\n'
ENTRY_RANGE = "    versions: {from: version, range: [1, 2]}\n"
ACCEPTED = "  accepted: [1, 2]\n"
CURRENT = "  current: 2\n"
COVERS = "        checksum: {algorithm: crc32, covers: [kind, key]}\n"
COMPRESSED = "        compressed: {algorithm: codec, length: u32}\n"
RAW_LEN = "      - {name: raw_len, type: u32}\n"

# name -> (edits, exact categories, rule ids that must be present)
TABLE: dict[str, tuple[list[tuple[str, str]], set[str], set[str]]] = {
    "rename_field": ([(STAMP, STAMP.replace("stamp", "created"))], {P}, {"P001"}),
    "rename_size_source": ([(RAW_LEN, RAW_LEN.replace("raw_len", "byte_len")),
                            ("size: raw_len", "size: byte_len")], {P}, {"P001"}),
    "rename_record": ([("  blob:\n", "  payload:\n")], {P}, {"P002"}),
    "reorder": ([(COUNT + TOTAL, TOTAL + COUNT)], {W}, {"W003"}),
    "widen": ([(COUNT, COUNT.replace("u16", "u32"))], {W}, {"W004"}),
    "narrow": ([(STAMP, STAMP.replace("u32", "u16"))], {W}, {"W004"}),
    "add_unversioned": ([(STAMP, STAMP + '      - {name: extra, type: u8}\n')], {W}, {"W002"}),
    "add_since_new_version": ([
        (ENTRY_RANGE, ENTRY_RANGE.replace("[1, 2]", "[1, 3]")),
        (ACCEPTED, ACCEPTED.replace("[1, 2]", "[1, 3]")),
        (WEIGHT, WEIGHT + '      - {name: rank, type: u8, since: 3}\n')],
        {A, P}, {"A006", "A008", "P006"}),
    "add_since_existing_version": ([(WEIGHT, WEIGHT + '      - {name: rank, type: u8, since: 2}\n')],
                                   {W, P}, {"W002", "P006"}),
    "remove_field": ([(STAMP, "")], {W}, {"W001"}),
    "enum_add": ([(DEL, DEL + '      GET: {value: 3, doc: "read"}\n')], {A}, {"A001"}),
    "enum_remove": ([(DEL, "")], {ID}, {"I002"}),
    "enum_renumber": ([(DEL, DEL.replace("value: 2", "value: 4"))], {ID}, {"I001"}),
    "enum_rename": ([(DEL, DEL.replace("DEL", "DROP"))], {P}, {"P004"}),
    "retired_id_reused": ([(DEL, DEL + '      OLD: {value: 9, doc: "back"}\n'),
                           ("    retired: [9]\n", "")], {ID}, {"I004"}),
    "id_retired": ([("    retired: [9]\n", "    retired: [9, 7]\n")], {A}, {"A002"}),
    "version_bump": ([(ACCEPTED, ACCEPTED.replace("[1, 2]", "[1, 3]")),
                      (CURRENT, "  current: 3\n")], {A}, {"A008"}),
    "versions_narrowed": ([(ACCEPTED, ACCEPTED.replace("[1, 2]", "[2, 2]"))], {W}, {"W016"}),
    "retired_version_reused": ([(ACCEPTED, ACCEPTED.replace("[1, 2]", "[0, 2]")),
                                ("  retired: [0]\n", "")],
                               {A, ID}, {"I005", "A008"}),
    "checksum_coverage": ([(COVERS, COVERS.replace("[kind, key]", "[key]"))], {W}, {"W007"}),
    "checksum_algorithm": ([(COVERS, COVERS.replace("crc32", "crc32c"))], {W}, {"W007"}),
    "compression_removed": ([(COMPRESSED, "")], {W}, {"W008"}),
    "compression_length": ([(COMPRESSED, COMPRESSED.replace("length: u32", "length: u16"))],
                           {W}, {"W008"}),
    "magic": ([('const: "44454d4f"', 'const: "44454d50"')], {W}, {"W006"}),
    "doc_field": ([(STAMP, STAMP.replace("creation time", "creation time (seconds)"))],
                  {D}, {"D003"}),
    "doc_record": ([("    doc: One entry.\n", "    doc: One entry of the log.\n")], {D}, {"D002"}),
    "doc_enum": ([("    doc: Record kind.\n", "    doc: Record kind (op code).\n")], {D}, {"D001"}),
    "record_added": ([("records:\n", "records:\n  note:\n    fields:\n"
                       "      - {name: text, type: str, length: u8}\n")], {A}, {"A005"}),
    "record_removed": ([(BASE[BASE.index("  blob:\n"):], "")], {W}, {"W012"}),
    "flag_added": ([("      signed: {bit: 1, doc: \"signed\"}\n",
                     "      signed: {bit: 1, doc: \"signed\"}\n      sparse: {bit: 2}\n")],
                   {A}, {"A003"}),
    "flag_moved": ([("signed: {bit: 1", "signed: {bit: 3")], {ID}, {"I006"}),
    "flag_renamed": ([("signed: {bit: 1", "negative: {bit: 1")], {P}, {"P007"}),
    "enum_width": ([("  kind:\n    type: u8\n", "  kind:\n    type: u16\n")], {W}, {"W015"}),
    "range_widened": ([("valid: {min: 1, max: 2}", "valid: {min: 1, max: 3}")], {A}, {"A009"}),
    "range_narrowed": ([("valid: {min: 1, max: 2}", "valid: {min: 2, max: 2}")], {W}, {"W009"}),
}


def edited(edits: list[tuple[str, str]]) -> str:
    text = BASE
    for old, new in edits:
        assert text.count(old) == 1, f"edit anchor not unique/found: {old!r}"
        text = text.replace(old, new)
    return text


@functools.cache
def _old() -> diff.Side:
    return diff.load_texts({BASE_PATH: BASE}, "old", base=ROOT.parent)


def compare(new_text: str) -> diff.Report:
    old = _old()  # read-only: one load serves every row
    new = diff.load_texts({BASE_PATH: new_text}, "new", base=ROOT.parent)
    return diff.compare(old, new)


def test_table_has_enough_rows():
    assert len(TABLE) >= 25


def test_unchanged_is_empty():
    assert compare(BASE).findings == []


@pytest.mark.parametrize("case", sorted(TABLE))
def test_category(case):
    edits, categories, rules = TABLE[case]
    rep = compare(edited(edits))
    got = {f.rule.category for f in rep.findings}
    ids = {f.rule.id for f in rep.findings}
    assert got == categories, diff.render_text(rep)
    assert rules <= ids, diff.render_text(rep)


def test_widen_is_one_finding_with_shifts_nested():
    rep = compare(edited([(COUNT, COUNT.replace("u16", "u32"))]))
    assert [f.rule.id for f in rep.findings] == ["W004"]
    (f,) = rep.findings
    assert f.subject == "demo.header.count"
    joined = "\n".join(f.details)
    for shifted in ("total: offset 8 -> 10", "stamp: offset 12 -> 14",
                    "header_crc: offset 16 -> 18", "record size 20 -> 22"):
        assert shifted in joined, joined
    assert "    - total: offset 8 -> 10" in diff.render_text(rep)


def test_rename_is_not_wire():
    rep = compare(edited([(STAMP, STAMP.replace("stamp", "created"))]))
    (f,) = rep.findings
    assert "Header.stamp -> Header.created" in f.message
    assert rep.exit_code == 1  # API breaks still fail the check


def test_gated_field_names_old_versions():
    rep = compare(edited(TABLE["add_since_new_version"][0]))
    (f,) = [f for f in rep.findings if f.rule.id == "P006"]
    assert "records of v1-2 decode Entry.rank as None" in f.message


def test_removed_field_lists_api_consequence():
    rep = compare(edited([(STAMP, "")]))
    (f,) = [f for f in rep.findings if f.rule.id == "W001"]
    assert "API: generated attribute Header.stamp removed" in f.details


def test_junit_output_fails_only_breaking_rules():
    import xml.etree.ElementTree as ET

    rep = compare(edited([(COUNT, COUNT.replace("u16", "u32")),
                          (DEL, DEL + '      GET: {value: 3, doc: "read"}\n')]))
    root = ET.fromstring(diff.render_junit(rep))
    suite = root.find("testsuite")
    assert suite.get("failures") == "1"
    failing = [c for c in suite.iter("testcase") if c.find("failure") is not None]
    assert [c.get("name") for c in failing] == ["W004 field-type-changed"]
    text = failing[0].find("failure").text
    assert "demo.header.count" in text and "total: offset 8 -> 10" in text
    added = next(c for c in suite.iter("testcase") if c.get("name") == "A001 id-added")
    assert "demo.kind.GET" in added.find("system-out").text
    assert diff.RENDERERS["junit"] is diff.render_junit


def test_html_view_draws_old_and_new_layouts():
    rep = compare(edited([(COUNT, COUNT.replace("u16", "u32"))]))
    page = docs.render_diff_html(rep)
    assert page.count("<svg") == 2 and 'class="compare"' in page
    assert "W004" in page and "demo.header" in page
    assert "#ea580c" in page  # count drawn as changed in the new layout


def test_project_except_list():
    assert diff.project_excepts({"diff": {"except": ["W004", "field-renamed"]}}) == [
        "W004", "field-renamed"]
    assert diff.project_excepts({}) == []
    with pytest.raises(diff.DiffError, match="unknown rule"):
        diff.project_excepts({"diff": {"except": ["NOPE"]}})
    with pytest.raises(diff.DiffError, match="must be a list"):
        diff.project_excepts({"diff": {"except": "W004"}})
    rep = diff.compare(*[diff.load_texts({BASE_PATH: t}, n, base=ROOT.parent) for t, n in (
        (BASE, "old"), (edited([(STAMP, STAMP.replace("stamp", "created"))]), "new"))],
        allow=set(diff.project_excepts({"diff": {"except": ["field-renamed"]}})))
    assert rep.exit_code == 0 and all(f.allowed for f in rep.findings)


def test_cli_junit_and_project_except(tmp_path, capsys):
    from bytewright.cli.main import main

    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir()
    new.mkdir()
    (old / "demo.yaml").write_text(BASE, encoding="utf-8")
    (new / "demo.yaml").write_text(edited([(STAMP, STAMP.replace("stamp", "created"))]),
                                   encoding="utf-8")
    assert main(["diff", str(old), str(new), "--format", "junit"]) == 1
    assert 'failures="1"' in capsys.readouterr().out
    proj = tmp_path / "bytewright.toml"
    proj.write_text('name = "demo"\nschemas = ["new"]\noutput = "generated"\n\n'
                    '[diff]\nexcept = ["field-renamed"]\n', encoding="utf-8")
    assert main(["diff", str(old), str(new), "--project", str(proj)]) == 0
    out = capsys.readouterr().out
    assert "API-BREAKING  P001 field-renamed (allowed)" in out
    proj.write_text('schemas = ["new"]\noutput = "generated"\n[diff]\nexcept = ["W999"]\n',
                    encoding="utf-8")
    assert main(["diff", str(old), str(new), "--project", str(proj)]) == 2
    assert "unknown rule" in capsys.readouterr().err
